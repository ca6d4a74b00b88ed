"""Every verb, every parameter, every class of bad value (issue 11): exit code in {0,1,2,3} as documented, a value
the option's rules refuse is exit 2 naming the option, an error is one line on stderr (plus an optional hint),
never a traceback or an internal error, no secret in an error line, no temporary file left behind, and every
case finishes within a bound. The cases come from the live command tree (tests/cli/cases.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from switchover.atomicfile import is_temp
from switchover.errors import INTERNAL_ERROR
from tests.cli import cases as C
from tests.cli import workspace as W
from tests.cli.runner import HUNG, run_cli

REACHED = 99  # a patched side effect (serve, install, launch) was reached: the input was accepted
CASE_LIMIT_S = 20.0  # generous: two shared cores; the slowest case takes about 1 s alone


def _reached(*_: object, **__: object) -> None:
    raise SystemExit(REACHED)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[W.Workspace]:
    root = tmp_path_factory.mktemp("fuzz")
    workspace = W.build(root)
    with W.servers() as urls, pytest.MonkeyPatch.context() as mp:
        workspace.urls = urls
        mp.setenv("SWITCHOVER_TESTBED_DIR", str(root / "out" / "default-testbed"))
        mp.delenv("SWITCHOVER_DEBUG", raising=False)
        mp.chdir(workspace.work)
        for target in (
            "switchover.gateway.server.Gateway",
            "aiohttp.web.run_app",
            "switchover.testbed.install.Installer.run",
            "switchover.testbed.processes.up",
            "switchover.demo.run_demo",
            "switchover.bench.calibrate.calibrate",
            "switchover.bench.sweep.run_sweep",
            "switchover.review.server.serving",
        ):
            mp.setattr(target, _reached)
        run = root / "in" / "check-runs"
        run_cli(["check", workspace.path("switchover.yaml"), "--runs-dir", str(run), "--skip", "bench"])
        next(run.iterdir()).rename(root / "in" / "check-run")
        yield workspace


def _temp_files(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if is_temp(p) or p.name.endswith((".partial", ".tmp"))]


def check_case(case: C.Case, root: Path) -> list[str]:
    """What is wrong with one case's outcome (empty: it met the contract)."""
    code, out, err, seconds = run_cli(case.argv)
    problems = []
    lines = [x for x in err.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("error:")]
    if code == HUNG:
        problems.append("still running after the hang limit (stopped)")
    if "Traceback" in out + err:
        problems.append("traceback")
    if code == INTERNAL_ERROR or "internal error" in err:
        problems.append(f"internal error: {errors[-1:]}")
    if (0 if code == REACHED else code) not in case.allowed:
        problems.append(f"exit {code}, allowed {sorted(case.allowed)}")
    if case.must_refuse and code != 2:
        problems.append(f"accepted (exit {code}), must be refused with exit 2")
    if code == 2:
        if (
            len(errors) != 1
            or not lines[-1].startswith(("error:", "hint:"))
            or (lines[-1].startswith("hint:") and not lines[-2].startswith("error:"))
        ):
            problems.append(f"exit 2 without one error line last: {lines[-3:]}")
        elif case.must_refuse and case.names and not any(n in errors[0] for n in case.names):
            problems.append(f"error does not name {case.names[0]}: {errors[0][:160]}")
    if any(W.SECRET in line for line in lines if line.startswith(("error:", "hint:"))):
        problems.append("a planted secret is echoed in an error line")
    if seconds > CASE_LIMIT_S:
        problems.append(f"took {seconds:.1f} s")
    left = _temp_files(root)
    if left:
        problems.append(f"temp files left: {left[:3]}")
        for p in left:
            Path(p).unlink(missing_ok=True)
    return problems


def test_every_command_has_a_fuzz_spec() -> None:
    assert set(C.commands()) == set(C.SPECS)


def test_every_numeric_option_is_bounded() -> None:
    assert C.numeric_options_without_parser(set(C.SPECS)) == []


@pytest.mark.parametrize("name", sorted(C.SPECS))
def test_bad_input_never_breaks_the_contract(ws: W.Workspace, name: str) -> None:
    cases = C.generate(ws, name, C.commands()[name])
    failures = []
    for case in cases:
        problems = check_case(case, ws.root)
        if problems:
            failures.append(f"{' '.join(case.argv)[:200]!r} [{case.param} {case.label}]: {'; '.join(problems)}")
    assert not failures, f"{len(failures)} of {len(cases)} cases broke the contract:\n" + "\n".join(failures[:60])


def test_no_written_file_holds_a_planted_secret(ws: W.Workspace) -> None:
    """Runs after the fuzz cases (file order): every file they wrote is free of the secrets put into argv."""
    leaks = []
    for root in (ws.work, ws.root / "out"):
        for p in root.rglob("*"):
            if p.is_file() and W.SECRET.encode() in p.read_bytes():
                leaks.append(str(p))
    assert leaks == []
