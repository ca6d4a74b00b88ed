"""Foundation rooms import no verb, and a verb imports no other verb: only the composers (check, demo, outputs and
the CLI) put verbs together (docs/architecture.md, "where new code goes"). The edges that exist today are listed
with their reason; any new one fails. Every import counts, inside functions and under TYPE_CHECKING too."""

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
#: The composers: they run several verbs, so they may import any.
COMPOSERS = frozenset({"check", "demo", "outputs", "cli", "__main__"})

_GATEWAY_LEDGER = (
    "the gateway's ledger rows and metrics are the rollout's and the alerts' input (a foundation "
    "room for the ledger row is issue 25's typed-row work)"
)
#: (importing package or module, imported module) -> why the edge is there today. Remove an entry when it goes.
ALLOWED: dict[tuple[str, str], str] = {
    ("doctor", "switchover.plan.canary"): "doctor lists the canary plan's findings",
    ("export", "switchover.gateway.envoy"): "export and the gateway's Envoy plane share one renderer",
    ("export", "switchover.rollout"): "export renders the rollout's gates (Argo Rollouts, Grafana)",
    ("testing", "switchover.gateway.app"): "the fault matrix runs a real gateway against fake engines",
    ("testing", "switchover.gateway.server"): "the fault matrix runs a real gateway against fake engines",
}


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


def test_no_new_import_between_verbs_or_from_a_foundation_room_into_a_verb() -> None:
    files: dict[tuple[str, str], list[str]] = {}
    new = {edge: files[edge] for edge in sorted(cross_edges(files=files) - set(ALLOWED))}
    assert not new, (
        "a verb (or foundation room) imports another verb; move the shared code to a foundation room "
        f"or into a composer (docs/architecture.md, where new code goes): {new}"
    )


def test_the_check_finds_an_edge_it_was_not_told_about(tmp_path: Path) -> None:
    (tmp_path / "verify").mkdir()
    (tmp_path / "verify" / "x.py").write_text("from switchover.probe.context import ProbeContext\n")
    (tmp_path / "wire").mkdir()
    (tmp_path / "wire" / "y.py").write_text("def f():\n    from switchover import bench\n")
    (tmp_path / "check").mkdir()
    (tmp_path / "check" / "z.py").write_text("import switchover.probe.runner\n")  # a composer: allowed
    assert cross_edges(tmp_path) == {("verify", "switchover.probe.context"), ("wire", "switchover.bench")}


def test_verify_no_longer_imports_probe() -> None:
    assert not {e for e in cross_edges() if e[0] == "verify"}


def test_every_allowed_edge_still_exists_so_the_list_only_shrinks() -> None:
    stale = sorted(set(ALLOWED) - cross_edges())
    assert not stale, f"these edges are gone: remove them from ALLOWED: {stale}"
