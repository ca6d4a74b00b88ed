"""Every live `switchover ...` example of the README and docs/ (the ones tests/docs/test_examples.py lists as LIVE)
runs against the test bed: vLLM CPU as old, llama-server as new, both serving the tiny model.

An example is run as a user would paste it (a fresh `python -m switchover` process in a folder holding what the docs
name), after these substitutions, each what a user does with their own values:
- the endpoints: `http://127.0.0.1:18001` and `:8000` (old), `:18002` and `:8080` (new), and the `URL` placeholders
  (first old, then new) become the bed's URLs; `switchover.yaml` is the migration file `switchover demo` writes for
  the bed (both engines, a short check, a gateway with shadow, three stages);
- `runs/<stamp>-check`, `runs/<id>-bench` and the like become the run directory an earlier example wrote (check and
  bench examples run first); `~/.cache/switchover/testbed` is the bed's folder and `demo` its name;
- `[optional parts]` are left out, `> file` / `>> file` / `| ...` tails are cut (tests/docs/test_examples.py);
- options that only size a workload are scaled to a 2-CPU bed: `--requests 4`, `--concurrency 1,2`, `--buckets 32`,
  `--output-tokens 8`, `--interval 0.2`, `--max-checks 2`.
An example must not be refused (exit 2), be unreachable (3) or crash (70); exit 1 is a finding (a gate that holds).
Examples the bed cannot run as written are listed in SKIP with why, and which test runs that verb instead; the table
test fails when a live example is neither run nor skipped with a reason. Run under the engine lock:
    flock /tmp/switchover-engines.lock timeout 1500 python3 -m pytest -q -p no:cacheprovider \\
        tests/engines/test_doc_examples_live.py
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from switchover import demo
from switchover.testbed.processes import free_port
from tests.docs.test_examples import ALL, OFFLINE, _workspace
from tests.engines.conftest import Bed

pytestmark = [pytest.mark.engines, pytest.mark.timeout(900)]

LIVE = [e for e in ALL if e not in OFFLINE]
OLD_PORTS, NEW_PORTS = ("18001", "8000"), ("18002", "8080")
SCALED = {
    "--requests": "4",
    "--concurrency": "1,2",
    "--buckets": "32",
    "--output-tokens": "8",
    "--interval": "0.2",
    "--max-checks": "2",
}
SOAK = "a soak of hours (--duration, --checkpoint-every, --window, --resume): tests/bench/test_soak.py runs one"
# (regex on the example, why the bed cannot run it as written and where the verb runs instead)
SKIP: list[tuple[str, str]] = [
    (r"^switchover demo\b", "starts a bed of its own; tests/engines/test_check_demo_rollout.py runs its steps"),
    (r"bench sweep --launch \"llama-server \.\.\.", "`...` stands for the user's own launch line"),
    (r"systemctl", "stops and starts the user's systemd units; tests/engines/test_drill_llama.py runs drill"),
    (
        r"^switchover metrics-adapter --from sglang",
        "reads an SGLang server's /metrics (the bed has none) and serves until stopped; tests/gateway runs the adapter",
    ),
    (r"--duration \d+h|--resume ", SOAK),
    (r"^switchover testbed (up|down)\b", "the tier's bed fixture is this command (one bed fits 2 CPUs)"),
]
# examples that still fail for a known defect in a file this test's author does not own: always (a strict xfail:
# fix, then unmark), or only in one state the bed's own verdicts lead to (an xfail only when that message is seen)
KNOWN: dict[str, str] = {}
KNOWN_WHEN: dict[str, tuple[str, str]] = {}


def skip_reason(command: str) -> str | None:
    return next((why for pattern, why in SKIP if re.search(pattern, command)), None)


@dataclass
class Session:
    """The folder examples run in, the bed, and what earlier examples left (run directories, a gateway)."""

    bed: Bed
    work: Path
    gateway: subprocess.Popen[bytes] | None = None
    gateway_port: int = 0
    done: dict[tuple[str, ...], tuple[int, str]] = field(default_factory=dict)  # argv -> (exit code, output tail)

    def latest(self, suffix: str) -> str:
        found = sorted(self.work.glob(f"runs/*-{suffix}"), key=lambda p: p.stat().st_mtime)
        assert found, f"no runs/*-{suffix} written by an earlier example"
        return str(found[-1].relative_to(self.work))

    def start_gateway(self) -> None:
        """`switchover gateway --config switchover.yaml` in the background (the README starts it before the rollout
        examples), then two requests through it: the ledger rows `rollout watch` and `compare` read."""
        if self.gateway is not None:
            return
        self.gateway = subprocess.Popen(
            [sys.executable, "-m", "switchover", "gateway", "--config", "switchover.yaml"],
            cwd=self.work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{self.gateway_port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.gateway.poll() is None:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{url}/health", timeout=2).close()
                break
            time.sleep(0.5)
        assert self.gateway.poll() is None, f"the gateway exited {self.gateway.returncode}"
        body = json.dumps(
            {"model": self.bed.model, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4}
        ).encode()
        for _ in range(2):
            req = urllib.request.Request(f"{url}/v1/chat/completions", body, {"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=120).close()

    def stop_gateway(self) -> None:
        if self.gateway is not None and self.gateway.poll() is None:
            self.gateway.send_signal(signal.SIGINT)
            try:
                self.gateway.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.gateway.kill()
                self.gateway.wait()


def substitute(command: str, s: Session) -> list[str]:
    """The example's argv after the module docstring's substitutions."""
    text = re.sub(r"\s\[[^\]]*\]", "", command)
    text = re.split(r"\s>>?\s", text)[0]
    for port in OLD_PORTS:
        text = text.replace(f"http://127.0.0.1:{port}", s.bed.old_url)
    for port in NEW_PORTS:
        text = text.replace(f"http://127.0.0.1:{port}", s.bed.new_url)
    text = text.replace(" URL ", f" {s.bed.old_url} ", 1).replace(" URL ", f" {s.bed.new_url} ", 1)
    text = re.sub(r"runs/(<stamp>|<id>|\d{8}T\d{6}Z)-check", lambda _: s.latest("check"), text)
    text = re.sub(r"runs/(<stamp>|<id>|\d{8}T\d{6}Z)-bench", lambda _: s.latest("bench"), text)
    root = str(s.bed.layout.root)
    text = text.replace("~/.cache/switchover/testbed", root)
    argv = shlex.split(text)
    for i, word in enumerate(argv[:-1]):
        if word in SCALED:
            argv[i + 1] = SCALED[word]
    logs = sorted(Path(root, "run").glob("*-old-vllm.log"), key=lambda p: p.stat().st_mtime)
    return [str(logs[-1]) if w.endswith("/run/demo-old-vllm.log") and logs else w for w in argv[1:]]


def _phase(example: tuple[str, int, str]) -> int:
    """In the order a user goes: check and bench (what later examples read), then the gateway (the ledger the
    rollout reads), then the rest."""
    command = example[2]
    if re.match(r"switchover (check|bench --old|bench --config)", command):
        return 0
    if re.match(r"switchover gateway (--config|state|reset)", command):
        return 1
    return 2


RUN = sorted((e for e in LIVE if skip_reason(e[2]) is None), key=_phase)


def test_every_live_example_is_run_or_skipped_with_a_reason() -> None:
    assert len(LIVE) >= 20
    skipped = [e for e in LIVE if skip_reason(e[2]) is not None]
    assert len(RUN) + len(skipped) == len(LIVE) and len(RUN) >= len(skipped), (len(RUN), len(skipped))
    assert set(KNOWN) | set(KNOWN_WHEN) <= {e[2] for e in RUN}


@pytest.fixture(scope="module")
def session(bed: Bed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    work = _workspace(tmp_path_factory.mktemp("live-examples"))
    port = free_port()
    (work / "switchover.yaml").write_text(demo.demo_config(bed.old_url, bed.new_url, port))
    s = Session(bed, work, gateway_port=port)
    try:
        yield s
    finally:
        s.stop_gateway()


@pytest.mark.parametrize(
    ("doc", "line", "command"),
    [
        pytest.param(*e, marks=[pytest.mark.xfail(strict=True, reason=KNOWN[e[2]])] if e[2] in KNOWN else [])
        for e in RUN
    ],
    ids=[f"{d}:{n}" for d, n, _ in RUN],
)
def test_each_live_example_runs_against_the_bed(session: Session, doc: str, line: int, command: str) -> None:
    if re.match(r"switchover (gateway (--config|state|reset)|rollout)", command):
        session.start_gateway()
        if command.startswith("switchover gateway --config"):  # the example itself: started, still serving
            assert session.gateway is not None and session.gateway.poll() is None
            return
    argv = substitute(command, session)
    if tuple(argv) not in session.done:  # the same example in two documents runs once
        done = subprocess.run(
            [sys.executable, "-m", "switchover", *argv],
            cwd=session.work,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "NO_COLOR": "1"},
            check=False,
        )
        assert "Traceback" not in done.stdout + done.stderr, done.stderr[-2000:]
        session.done[tuple(argv)] = (done.returncode, (done.stderr or done.stdout).strip()[-600:])
    code, said = session.done[tuple(argv)]
    if command in KNOWN_WHEN and code == 2 and KNOWN_WHEN[command][0] in said:
        pytest.xfail(KNOWN_WHEN[command][1])
    assert code in (0, 1), f"{doc}:{line}: `{' '.join(argv)}` exited {code}: {said}"
