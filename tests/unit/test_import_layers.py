"""Foundation rooms import no verb, and a verb imports no other verb: only the composers (check, demo, outputs,
export and the CLI) put verbs together (docs/architecture.md, "where new code goes"). There is no allow-list: any
such import fails. Every import counts, inside functions and under TYPE_CHECKING too."""

from __future__ import annotations

import ast
from pathlib import Path

import switchover

SRC = Path(switchover.__file__).parent

#: Packages and modules that implement a verb (a command's own logic).
VERBS = frozenset(
    {
        "plan",
        "probe",
        "verify",
        "bench",
        "gateway",
        "rollout",
        "review",
        "alerts",
        "drill",
        "doctor",
        "export",
        "report",
        "testbed",
    }
)
#: The composers: they run several verbs, so they may import any. `export` renders other verbs' configurations for
#: other systems (Envoy through the gateway's own renderer, so the exported file is the one the live plane runs;
#: Argo Rollouts and Grafana from the rollout's gates): docs/architecture.md, "where new code goes".
COMPOSERS = frozenset({"check", "demo", "outputs", "cli", "__main__", "export"})


def _imported(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [f"switchover.{a.name}" for a in node.names] if node.module == "switchover" else [node.module]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return names


def cross_edges(src: Path = SRC, files: dict[tuple[str, str], list[str]] | None = None) -> set[tuple[str, str]]:
    """(importing package, imported module cut to package.module) for every import of a verb from outside it,
    composers aside; `files` gets the files behind each edge (for the failure message)."""
    edges: set[tuple[str, str]] = set()
    for path in src.rglob("*.py"):
        rel = path.relative_to(src)
        unit = rel.parts[0].removesuffix(".py")
        if unit in COMPOSERS or unit == "__init__":
            continue
        for name in _imported(ast.parse(path.read_text(encoding="utf-8"))):
            parts = name.split(".")
            if parts[0] == "switchover" and len(parts) > 1 and parts[1] in VERBS and parts[1] != unit:
                edge = (unit, ".".join(parts[:3]))
                edges.add(edge)
                if files is not None:
                    files.setdefault(edge, []).append(rel.as_posix())
    return edges


def test_no_verb_imports_another_verb_and_no_foundation_room_imports_a_verb() -> None:
    files: dict[tuple[str, str], list[str]] = {}
    found = {edge: files[edge] for edge in sorted(cross_edges(files=files))}
    assert not found, (
        "a verb (or foundation room) imports another verb; move the shared code to a foundation room "
        f"or into a composer (docs/architecture.md, where new code goes): {found}"
    )


def test_the_check_finds_an_edge_it_was_not_told_about(tmp_path: Path) -> None:
    (tmp_path / "verify").mkdir()
    (tmp_path / "verify" / "x.py").write_text("from switchover.probe.context import ProbeContext\n")
    (tmp_path / "wire").mkdir()
    (tmp_path / "wire" / "y.py").write_text("def f():\n    from switchover import bench\n")
    (tmp_path / "check").mkdir()
    (tmp_path / "check" / "z.py").write_text("import switchover.probe.runner\n")  # a composer: allowed
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "e.py").write_text("if TYPE_CHECKING:\n    from switchover.bench.stats import X\n")
    (tmp_path / "rollout").mkdir()
    (tmp_path / "rollout" / "r.py").write_text("from switchover.export import argo\n")  # a verb into a composer
    assert cross_edges(tmp_path) == {
        ("verify", "switchover.probe.context"),
        ("wire", "switchover.bench"),
        ("evidence", "switchover.bench.stats"),
        ("rollout", "switchover.export"),
    }


def test_verify_no_longer_imports_probe() -> None:
    assert not {e for e in cross_edges() if e[0] == "verify"}
