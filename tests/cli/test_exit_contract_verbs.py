"""The exit-code contract of docs/cli.md for EVERY command of `switchover --help`: each command lists its ok (0),
failed (1), bad input (2) and unreachable (3) paths — run here in process against the fake engine, a closed port
and loopback servers — or says why a path does not exist for it (a command that reads only local files cannot be
unreachable) or where it runs instead. A new command fails `test_every_command_states_its_four_exit_paths` until
its row is written. A path where the command still lies is a strict xfail naming the defect (see the reason)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from switchover.testing import FakeEngine
from switchover.testing.persona import Persona
from tests.check import builders as b
from tests.cli import cases as C
from tests.cli import workspace as W
from tests.cli.runner import run_cli
from tests.loopback import tcp_server

OK, FAILED, BAD_INPUT, UNREACHABLE = 0, 1, 2, 3
SMALL = "builtin:meta-llama/Llama-3.1-8B-Instruct"
STARTLOGS = Path(__file__).parents[1] / "startlog" / "fixtures"
SGLANG_METRICS = b'sglang:num_running_reqs{model_name="m"} 1\nsglang:num_queue_reqs{model_name="m"} 0\n'


@dataclass
class Env:
    """What a row's command line may use: the fuzz workspace, a fake engine, one that differs from it, one that
    answers every request with 500, a closed port, a /metrics server and a scratch folder per row."""

    ws: W.Workspace
    url: str
    other: str
    failing: str
    closed: str
    metrics: str
    scratch: Path

    def config(self, extra: str = "") -> str:
        """A fresh migration file (its own gateway run_dir and rollout state) naming the fake engines."""
        folder = self.scratch / f"cfg{len(list(self.scratch.glob('cfg*')))}"
        folder.mkdir(parents=True)
        p = folder / "switchover.yaml"
        p.write_text(
            f"old: {{url: '{self.url}', engine: vllm}}\nnew: {{url: '{self.other}', engine: llamacpp}}\n"
            "gateway:\n  weight: 0\n  rollback: false\n  run_dir: gw\nrollout:\n  stages: [5, 20]\n" + extra
        )
        return str(p)

    def go_run(self) -> str:
        return str(b.write_run(self.scratch / "go", b.full_evidence()).path)


Argv = Callable[[Env], list[str]]


@dataclass(frozen=True)
class Path_:
    """One exit path of one command: run `argv` and expect `code` (and `needle` in the output), or, with no argv,
    `why` it does not exist for this command or where it is tested instead; `lies`: the defect that still makes the
    command exit otherwise (a strict xfail, so the row fails once the command is fixed and the mark is stale)."""

    code: int
    argv: Argv | None = None
    needle: str = ""
    why: str = ""
    lies: str = ""


def run(code: int, argv: Argv, needle: str = "", lies: str = "") -> Path_:
    return Path_(code, argv, needle, lies=lies)


def none(code: int, why: str) -> Path_:
    return Path_(code, why=why)


LOCAL = "reads only local files and flags: nothing to reach"
NO_CHECK = "reports what it read; nothing in it is judged pass or fail"
COVERED = "tests/cli/test_exit_contract.py"
FUZZED = "every option's bad values: tests/cli/test_bad_input_fuzz.py"
NOT_HERE = "starts or installs real engines: the real-engine tier"


def _bad(*argv: str) -> Path_:
    """Bad input: an option value the command refuses."""
    return run(BAD_INPUT, lambda e: list(argv), "error:")


EXITS: dict[str, list[Path_]] = {
    # --- plan: no GPU, no network ----------------------------------------------------------------------------
    "plan card": [
        run(OK, lambda e: ["plan", "card", "-m", SMALL]),
        none(FAILED, NO_CHECK),
        _bad("plan", "card", "-m", "builtin:nope/nope"),
        none(UNREACHABLE, LOCAL),
    ],
    "plan capacity": [none(OK, COVERED), none(FAILED, COVERED), none(BAD_INPUT, COVERED), none(UNREACHABLE, LOCAL)],
    "plan parallel": [none(OK, COVERED), none(FAILED, COVERED), none(BAD_INPUT, FUZZED), none(UNREACHABLE, LOCAL)],
    "plan canary": [none(OK, COVERED), none(FAILED, COVERED), none(BAD_INPUT, FUZZED), none(UNREACHABLE, LOCAL)],
    "plan grace": [none(OK, COVERED), none(FAILED, COVERED), none(BAD_INPUT, COVERED), none(UNREACHABLE, LOCAL)],
    "plan limits": [
        none(OK, "needs a bench run's summary.json: tests/plan/test_limits.py"),
        none(FAILED, "--weight above the cap: tests/plan/test_limits.py"),
        _bad("plan", "limits", "--bench", "does-not-exist"),
        none(UNREACHABLE, LOCAL),
    ],
    "plan choose": [
        run(OK, lambda e: ["plan", "choose", "-m", SMALL, "--gpu", "H100-80G"]),
        run(
            FAILED,
            lambda e: ["plan", "choose", "-m", SMALL, "--cpu", "--feature", "lora", "-e", "trtllm"],
            "no engine is free of blockers",
        ),
        _bad("plan", "choose", "-m", SMALL, "--gpu", "H999"),
        none(UNREACHABLE, LOCAL),
    ],
    "plan translate": [
        run(
            OK,
            lambda e: [
                "plan",
                "translate",
                "vllm serve m --max-model-len 8192",
                "--from",
                "vllm@0.6.3",
                "--to",
                "sglang@0.5.5",
            ],
        ),
        run(
            FAILED,
            lambda e: [
                "plan",
                "translate",
                "vllm serve m --no-such-flag-x 1",
                "--from",
                "vllm@0.6.3",
                "--to",
                "sglang@0.5.5",
            ],
            "refused",
        ),
        _bad("plan", "translate", "vllm serve m", "--to", "nope"),
        none(UNREACHABLE, LOCAL),
    ],
    # --- hw ----------------------------------------------------------------------------------------------------
    "hw gpus": [
        run(OK, lambda e: ["hw", "gpus"]),
        none(FAILED, NO_CHECK),
        none(BAD_INPUT, FUZZED),
        none(UNREACHABLE, LOCAL),
    ],
    "hw fingerprint": [
        run(OK, lambda e: ["hw", "fingerprint"]),
        none(FAILED, NO_CHECK + " (no GPU is said)"),
        none(BAD_INPUT, FUZZED),
        none(UNREACHABLE, "reads this host's GPUs through NVML"),
    ],
    "hw diff": [
        run(OK, lambda e: ["hw", "diff", "catalog:H100-80G", "catalog:H100-80G"]),
        run(
            FAILED,
            lambda e: [
                "hw",
                "diff",
                "catalog:H100-80G",
                "catalog:A100-80G",
                "-m",
                "builtin:Qwen/Qwen3-32B",
                "-e",
                "llamacpp",
            ],
            "fails on B",
        ),
        _bad("hw", "diff", "catalog:H100-80G", "catalog:NOPE"),
        none(UNREACHABLE, LOCAL),
    ],
    "hw startlog": [
        run(OK, lambda e: ["hw", "startlog", str(STARTLOGS / "vllm-cpu-testbed.log"), "-e", "vllm"], "verdict: ok"),
        run(FAILED, lambda e: ["hw", "startlog", str(STARTLOGS / "vllm-cpu-kv-oom-testbed.log"), "-e", "vllm"]),
        _bad("hw", "startlog", "does-not-exist.log"),
        none(UNREACHABLE, LOCAL),
    ],
    # --- endpoints -------------------------------------------------------------------------------------------
    "probe": [
        run(OK, lambda e: ["probe", "--old", e.url, "--new", e.url, "--budget-s", "20"]),
        run(FAILED, lambda e: ["probe", "--old", e.url, "--new", e.other, "--budget-s", "20"], "breaking"),
        _bad("probe", "--old", "not a url"),
        run(UNREACHABLE, lambda e: ["probe", "--old", e.closed, "--new", e.closed, "--budget-s", "5"]),
    ],
    "verify": [
        run(
            OK,
            lambda e: ["verify", "--old", e.url, "--new", e.url, "--structured", "0", "--no-long-inputs"],
            "identical",
        ),
        run(
            FAILED,
            lambda e: [
                "verify",
                "--old",
                e.url,
                "--new",
                e.other,
                "--structured",
                "0",
                "--no-long-inputs",
                "--fail-on-flagged",
            ],
            "flagged",
        ),
        _bad("verify", "--old", "not a url"),
        run(
            UNREACHABLE,
            lambda e: ["verify", "--old", e.closed, "--new", e.closed, "--structured", "0", "--no-long-inputs"],
        ),
    ],
    "ready": [
        run(OK, lambda e: ["ready", e.url], "ready"),
        run(FAILED, lambda e: ["ready", e.failing]),
        _bad("ready", "not a url"),
        run(UNREACHABLE, lambda e: ["ready", e.closed]),
    ],
    "overload": [none(OK, COVERED), none(FAILED, COVERED), none(BAD_INPUT, COVERED), none(UNREACHABLE, COVERED)],
    "metrics-adapter": [
        run(
            OK,
            lambda e: ["metrics-adapter", "--from", "sglang", "--to", "vllm", "--upstream", e.metrics, "--once"],
            "vllm:",
        ),
        run(
            FAILED,
            lambda e: ["metrics-adapter", "--from", "sglang", "--to", "vllm", "--upstream", e.url, "--once"],
            "HTTP 404",
        ),
        _bad("metrics-adapter", "--from", "nope", "--to", "vllm", "--once"),
        run(
            UNREACHABLE,
            lambda e: ["metrics-adapter", "--from", "sglang", "--to", "vllm", "--upstream", e.closed, "--once"],
        ),
    ],
    "drill": [
        run(
            OK,
            lambda e: [
                "drill",
                "--stop-new",
                "true",
                "--start-old",
                "true",
                "--url",
                e.url,
                "--timeout",
                "5",
                "--runs",
                str(e.scratch / "drill"),
            ],
        ),
        run(
            FAILED,
            lambda e: [
                "drill",
                "--stop-new",
                "true",
                "--start-old",
                "true",
                "--url",
                e.closed,
                "--timeout",
                "0.5",
                "--runs",
                str(e.scratch / "drill"),
            ],
        ),
        _bad("drill", "--stop-new", "true", "--start-old", "true", "--url", "not a url"),
        none(
            UNREACHABLE,
            "an endpoint that never answers within --timeout is the drill's failure (1): the "
            "drill is what brings it up",
        ),
    ],
    "bench": [
        none(OK, "a whole run against the zero-work server: tests/bench/test_soak.py"),
        none(FAILED, "an SLO or error-rate failure over a real run: tests/bench"),
        _bad("bench", "--url", "not a url"),
        run(
            UNREACHABLE,
            lambda e: [
                "bench",
                "--url",
                e.closed,
                "--engine",
                "vllm",
                "--no-calibrate",
                "--requests",
                "2",
                "--buckets",
                "16",
                "--runs-dir",
                str(e.scratch / "bench"),
            ],
        ),
    ],
    "bench calibrate": [
        run(OK, lambda e: ["bench", "calibrate", "--concurrency", "1", "--chunks", "1", "--duration", "0.1"]),
        none(FAILED, NO_CHECK + " (the load generator's own ceiling)"),
        none(BAD_INPUT, FUZZED),
        none(UNREACHABLE, "measures against a zero-work server it starts itself"),
    ],
    "bench report": [
        none(OK, "needs a bench run directory: tests/bench"),
        none(FAILED, NO_CHECK),
        run(BAD_INPUT, lambda e: ["bench", "report", e.go_run()], "missing from the run directory"),
        none(UNREACHABLE, LOCAL),
    ],
    "bench recompute": [
        none(OK, "needs a bench run directory: tests/bench"),
        none(FAILED, NO_CHECK),
        run(BAD_INPUT, lambda e: ["bench", "recompute", e.go_run(), "--as", "vllm"], "missing from the run directory"),
        none(UNREACHABLE, LOCAL),
    ],
    "bench sweep": [
        none(OK, NOT_HERE + " (tests/engines: a sweep launches the engine per point)"),
        run(
            FAILED,
            lambda e: [
                "bench",
                "sweep",
                "--launch",
                "true {bs}",
                "--param",
                "bs=1",
                "--url",
                e.closed,
                "--runs-dir",
                str(e.scratch / "sweep"),
            ],
            "no point of the sweep was measured",
        ),
        _bad("bench", "sweep", "--launch", "true", "--param", "bs"),
        none(UNREACHABLE, "a point whose engine does not come up is a failed point (1)"),
    ],
    # --- judging a migration ---------------------------------------------------------------------------------
    "check": [
        run(OK, lambda e: ["report", e.go_run()], "VERDICT: GO"),  # check's verdict, rebuilt from its run
        run(FAILED, lambda e: ["check", e.config(), "--runs-dir", str(e.scratch / "check"), "--only", "probe"]),
        _bad("check", "--only", "nope"),
        none(
            UNREACHABLE,
            "unreachable endpoints make the run incomplete: exit 1 with the report (tests/check/test_cli.py)",
        ),
    ],
    "report": [none(OK, COVERED), none(FAILED, COVERED), none(BAD_INPUT, COVERED), none(UNREACHABLE, LOCAL)],
    "doctor": [
        none(OK, COVERED),
        none(FAILED, "a symptom matches or it does not (2)"),
        none(BAD_INPUT, COVERED),
        none(UNREACHABLE, LOCAL),
    ],
    "diff-model": [
        run(OK, lambda e: ["diff-model", e.ws.path("hf"), e.ws.path("hf"), "--no-weights"]),
        none(FAILED, NO_CHECK + " (the differences are listed; `check` judges them)"),
        _bad("diff-model", "does-not-exist", "does-not-exist"),
        none(UNREACHABLE, LOCAL),
    ],
    "cachekey": [
        run(OK, lambda e: ["cachekey", e.ws.path("hf"), "--model-id", "m", "--prompt", "Hello"]),
        none(FAILED, NO_CHECK),
        _bad("cachekey", "does-not-exist", "--prompt", "x"),
        none(UNREACHABLE, LOCAL),
    ],
    "validate": [
        run(OK, lambda e: ["validate", e.ws.path("switchover.yaml")], "ok"),
        none(FAILED, "a file that is not a valid migration is bad input (2)"),
        run(BAD_INPUT, lambda e: ["validate", e.ws.path("rules.yaml")]),
        none(UNREACHABLE, LOCAL),
    ],
    "schema": [
        run(OK, lambda e: ["schema", "probe"]),
        none(FAILED, NO_CHECK),
        _bad("schema", "nope"),
        none(UNREACHABLE, LOCAL),
    ],
    "demo": [
        none(OK, NOT_HERE + " (tests/engines: the demo runs the bed's two engines)"),
        none(FAILED, NOT_HERE),
        _bad("demo", "--dir", "/proc/version"),
        none(UNREACHABLE, NOT_HERE),
    ],
    # --- gateway, rollout, review, export, alerts ------------------------------------------------------------
    "gateway": [
        none(OK, "serves until stopped: tests/gateway"),
        none(FAILED, "serves until stopped: tests/gateway"),
        run(BAD_INPUT, lambda e: ["gateway", "-c", e.ws.path("rules.yaml")]),
        none(UNREACHABLE, "an arm that does not answer is the gateway's 502/503 to the client, not an exit"),
    ],
    "gateway hash-key": [
        run(OK, lambda e: ["gateway", "hash-key", "team-a", "--generate"], "sk-gw-"),
        none(FAILED, NO_CHECK),
        run(BAD_INPUT, lambda e: ["gateway", "hash-key", "team-a"]),
        none(UNREACHABLE, LOCAL),
    ],
    "gateway state": [
        none(OK, "needs a running gateway: tests/gateway"),
        none(FAILED, NO_CHECK),
        run(BAD_INPUT, lambda e: ["gateway", "state", "-c", e.ws.path("rules.yaml")]),
        run(UNREACHABLE, lambda e: ["gateway", "state", "-c", e.config()], "no running gateway"),
    ],
    "gateway reset": [
        none(OK, "needs a running gateway: tests/gateway"),
        none(FAILED, NO_CHECK),
        run(BAD_INPUT, lambda e: ["gateway", "reset", "-c", e.ws.path("rules.yaml")]),
        run(UNREACHABLE, lambda e: ["gateway", "reset", "-c", e.config()], "no running gateway"),
    ],
    "rollout init": [
        run(OK, lambda e: ["rollout", "init", "--print"], "stages"),
        none(FAILED, "adding a section is refused only for bad input"),
        run(BAD_INPUT, lambda e: ["rollout", "init", "-c", str(e.scratch / "none.yaml")], "no such file"),
        none(UNREACHABLE, LOCAL),
    ],
    "rollout status": [
        run(OK, lambda e: ["rollout", "status", "-c", e.config()], "not_started"),
        none(FAILED, NO_CHECK),
        run(BAD_INPUT, lambda e: ["rollout", "status", "-c", e.ws.path("rules.yaml")]),
        none(UNREACHABLE, LOCAL),
    ],
    "rollout gates": [
        none(OK, "every gate passing needs a stage's worth of ledger rows: tests/rollout"),
        run(FAILED, lambda e: ["rollout", "gates", "-c", e.config()], "decision: hold"),
        none(BAD_INPUT, COVERED),
        none(UNREACHABLE, COVERED),
    ],
    "rollout advance": [
        none(OK, "entering a stage needs a check run of the same endpoints: tests/rollout"),
        run(FAILED, lambda e: ["rollout", "advance", "-c", e.config(), "-m", "go"], "refused"),
        run(BAD_INPUT, lambda e: ["rollout", "advance", "-c", e.ws.path("rules.yaml")]),
        none(UNREACHABLE, COVERED + " (through rollout gates)"),
    ],
    "rollout rollback": [
        run(OK, lambda e: ["rollout", "rollback", "-c", e.config(), "--reason", "drill"], "nothing to roll back"),
        none(FAILED, "a rollback is refused only for bad input"),
        run(BAD_INPUT, lambda e: ["rollout", "rollback", "-c", e.ws.path("rules.yaml"), "--reason", "x"]),
        none(UNREACHABLE, LOCAL),
    ],
    "rollout abandon": [
        run(OK, lambda e: ["rollout", "abandon", "-c", e.config(), "--reason", "x", "--force"]),
        none(FAILED, "an abandon is refused only for bad input"),
        run(BAD_INPUT, lambda e: ["rollout", "abandon", "-c", e.config(), "--reason", "x"], "--criterion"),
        none(UNREACHABLE, LOCAL),
    ],
    "rollout reset": [
        run(OK, lambda e: ["rollout", "reset", "-c", e.config(), "--reason", "x"], "reset"),
        none(FAILED, "a reset is refused only for bad input"),
        run(BAD_INPUT, lambda e: ["rollout", "reset", "-c", e.ws.path("rules.yaml"), "--reason", "x"]),
        none(UNREACHABLE, LOCAL),
    ],
    "rollout watch": [
        run(
            OK,
            lambda e: ["rollout", "watch", "-c", e.config(), "--max-checks", "1", "--interval", "0.01"],
            "nothing to watch",
        ),
        none(FAILED, "a watch that rolls back: tests/rollout"),
        run(BAD_INPUT, lambda e: ["rollout", "watch", "-c", e.ws.path("rules.yaml")]),
        none(UNREACHABLE, COVERED),
    ],
    "rollout compare": [
        run(OK, lambda e: ["rollout", "compare", "-c", e.config()], "no ledger at"),  # nothing recorded yet: a state
        none(FAILED, "tests/rollout"),
        run(BAD_INPUT, lambda e: ["rollout", "compare", "-c", e.ws.path("rules.yaml")]),
        none(UNREACHABLE, LOCAL + " (the gateway's ledger)"),
    ],
    "rollout holding": [
        run(OK, lambda e: ["rollout", "holding", "-c", e.config()], "no rollback window yet"),
        none(FAILED, "at risk or failing inside the window: tests/rollout"),
        run(BAD_INPUT, lambda e: ["rollout", "holding", "-c", e.ws.path("rules.yaml")]),
        none(UNREACHABLE, "old's readiness check inside the window: tests/rollout"),
    ],
    "rollout prerequisites": [
        none(OK, "every prerequisite met needs a drill and a live old side: tests/rollout"),
        run(FAILED, lambda e: ["rollout", "prerequisites", "-c", e.config()]),
        run(BAD_INPUT, lambda e: ["rollout", "prerequisites", "-c", e.ws.path("rules.yaml")]),
        none(UNREACHABLE, "an unreachable old side is a prerequisite not met (1)"),
    ],
    "review serve": [
        none(OK, "tests/cli/test_exit_nothing_recorded.py, tests/review"),
        none(FAILED, NO_CHECK),
        none(BAD_INPUT, "tests/cli/test_exit_nothing_recorded.py"),
        none(UNREACHABLE, LOCAL),
    ],
    "review summary": [
        none(OK, "tests/cli/test_exit_nothing_recorded.py"),
        none(FAILED, NO_CHECK),
        none(BAD_INPUT, "tests/cli/test_exit_nothing_recorded.py"),
        none(UNREACHABLE, LOCAL),
    ],
    "review export": [
        none(OK, "tests/cli/test_exit_nothing_recorded.py"),
        none(FAILED, NO_CHECK),
        none(BAD_INPUT, "tests/cli/test_exit_nothing_recorded.py"),
        none(UNREACHABLE, LOCAL),
    ],
    "review gate": [
        none(OK, "tests/review"),
        none(FAILED, "tests/cli/test_exit_nothing_recorded.py"),
        none(BAD_INPUT, "tests/cli/test_exit_nothing_recorded.py"),
        none(UNREACHABLE, LOCAL),
    ],
    "export argo": [
        run(OK, lambda e: ["export", "argo", "-c", e.config(), "--out", str(e.scratch / "a.yaml")]),
        none(FAILED, "what Argo cannot express is a printed warning (0)"),
        run(BAD_INPUT, lambda e: ["export", "argo", "-c", e.ws.path("rules.yaml"), "--out", str(e.scratch / "a.yaml")]),
        none(UNREACHABLE, LOCAL),
    ],
    "export envoy": [
        run(OK, lambda e: ["export", "envoy", "-c", e.config(), "--out", str(e.scratch / "e.yaml")]),
        none(FAILED, "what Envoy cannot express is a printed warning (0)"),
        run(
            BAD_INPUT, lambda e: ["export", "envoy", "-c", e.ws.path("rules.yaml"), "--out", str(e.scratch / "e.yaml")]
        ),
        none(UNREACHABLE, LOCAL),
    ],
    "export grafana": [
        run(OK, lambda e: ["export", "grafana", "-c", e.config(), "--out", str(e.scratch / "g.json")]),
        none(FAILED, "what Grafana cannot express is a printed warning (0)"),
        run(
            BAD_INPUT,
            lambda e: ["export", "grafana", "-c", e.ws.path("rules.yaml"), "--out", str(e.scratch / "g.json")],
        ),
        none(UNREACHABLE, LOCAL),
    ],
    "alerts translate": [
        run(OK, lambda e: ["alerts", "translate", e.ws.path("rules.yaml"), "--from", "vllm", "--to", "sglang"]),
        run(FAILED, lambda e: ["alerts", "translate", e.ws.path("rules.yaml"), "--from", "vllm", "--to", "llamacpp"]),
        _bad("alerts", "translate", "does-not-exist.yaml", "--from", "vllm", "--to", "sglang"),
        none(UNREACHABLE, LOCAL),
    ],
    # --- the test bed ----------------------------------------------------------------------------------------
    "testbed setup": [
        none(OK, NOT_HERE),
        none(FAILED, NOT_HERE),
        _bad("testbed", "setup", "--dir", "/proc/version"),
        none(UNREACHABLE, NOT_HERE + " (downloads)"),
    ],
    "testbed up": [
        none(OK, NOT_HERE),
        none(FAILED, NOT_HERE),
        run(
            BAD_INPUT,
            lambda e: ["testbed", "up", "--dir", str(e.scratch / "no-bed"), "--timeout", "1"],
            "testbed setup",
        ),
        none(UNREACHABLE, NOT_HERE),
    ],
    "testbed status": [
        run(OK, lambda e: ["testbed", "status", "--dir", str(e.scratch / "no-bed")], "not running"),
        none(FAILED, NO_CHECK + " (running or not is said)"),
        _bad("testbed", "status", "--dir", "/proc/version"),
        none(UNREACHABLE, LOCAL),
    ],
    "testbed down": [
        run(OK, lambda e: ["testbed", "down", "--dir", str(e.scratch / "no-bed")], "not running"),
        none(FAILED, "stopping what is not running is the state asked for (0)"),
        _bad("testbed", "down", "--dir", "/proc/version"),
        none(UNREACHABLE, LOCAL),
    ],
}


def test_every_command_states_its_four_exit_paths() -> None:
    assert sorted(EXITS) == sorted(C.commands())
    for name, paths in EXITS.items():
        assert sorted(p.code for p in paths) == [OK, FAILED, BAD_INPUT, UNREACHABLE], name
        for p in paths:
            assert (p.argv is None) == bool(p.why), (name, p.code)


def _metrics_answer(conn: socket.socket, stop: threading.Event) -> None:
    with contextlib.suppress(OSError):
        conn.recv(65536)
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: "
            + str(len(SGLANG_METRICS)).encode()
            + b"\r\nConnection: close\r\n\r\n"
            + SGLANG_METRICS
        )
        conn.close()


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[W.Workspace, str, str, str, str]]:
    ws = W.build(tmp_path_factory.mktemp("exit-verbs"))
    failing = FakeEngine()
    failing.script(weights={"status:500": 1.0})
    other = FakeEngine(
        persona=Persona(
            salt="z",
            salt_after=1,
            unknown_fields="reject",
            max_stop=None,
            keep_stop=True,
            stop_finish="stop_sequence",
            n_mode="reject",
        )
    )
    with (
        FakeEngine().in_thread() as url,
        other.in_thread() as other_url,
        failing.in_thread() as failing_url,
        tcp_server(_metrics_answer) as metrics,
    ):
        yield ws, url, other_url, failing_url, metrics


RUNNABLE = [
    pytest.param(
        name, p, id=f"{name}-{p.code}", marks=[pytest.mark.xfail(strict=True, reason=p.lies)] if p.lies else []
    )
    for name, paths in EXITS.items()
    for p in paths
    if p.argv is not None
]


@pytest.mark.parametrize(("name", "path"), RUNNABLE)
def test_each_command_exits_as_the_contract_says(
    name: str,
    path: Path_,
    engines: tuple[W.Workspace, str, str, str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ws, url, other, failing, metrics = engines
    monkeypatch.chdir(tmp_path)  # nothing is read from or written to the folder the suite runs in
    env = Env(ws, url, other, failing, W.CLOSED, metrics, tmp_path)
    assert path.argv is not None
    argv = path.argv(env)
    code, out, err, _ = run_cli(argv)
    assert "Traceback" not in err
    assert code == path.code, (argv, code, out[-600:], err[-600:])
    assert path.needle in out + err, (path.needle, out[-600:], err[-600:])
    if code == BAD_INPUT:
        assert sum(x.startswith("error:") for x in err.splitlines()) == 1, err[-300:]
