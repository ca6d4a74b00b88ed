"""The exit-code contract of docs/cli.md, run in process: each verb's success, failure, warning and unreachable
paths exit 0 / 1 / 0 / 3, and bad input 2 — so `switchover X && deploy` never goes ahead on a failure."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

import pytest

from switchover.testing import FakeEngine
from tests.check import builders as b
from tests.cli.runner import run_cli
from tests.loopback import tcp_server

OK, FAILED, BAD_INPUT, UNREACHABLE = 0, 1, 2, 3
SMALL = "builtin:meta-llama/Llama-3.1-8B-Instruct"
LARGE = "builtin:Qwen/Qwen3-32B"
DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  template:
    spec:
      terminationGracePeriodSeconds: 30
      containers:
      - name: engine
        image: x
"""


def _closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _silent_port() -> contextlib.AbstractContextManager[str]:
    """Accepts connections and never answers."""
    return tcp_server()


def _expect(argv: list[str], code: int, *needles: str) -> str:
    got, out, err, _ = run_cli(argv)
    assert got == code, (argv, got, out[-800:], err[-800:])
    assert "Traceback" not in err
    for n in needles:
        assert n in out + err, (n, out[-800:], err[-800:])
    return out + err


# --- doctor ---------------------------------------------------------------------------------------------------


def test_doctor_a_match_is_0_no_match_is_2() -> None:
    _expect(["doctor", "p99 up, qps flat"], OK, "p99-up-qps-flat")
    _expect(["doctor", "my cat ate the gpu"], BAD_INPUT, "no known symptom matches")  # was 0 with a 0.34 match


# --- plan -------------------------------------------------------------------------------------------------------


def test_plan_capacity_fits_0_does_not_fit_1_unknown_gpu_2() -> None:
    _expect(["plan", "capacity", "-m", SMALL, "-e", "vllm", "--gpu", "H100-80G", "--json"], OK)
    _expect(["plan", "capacity", "-m", LARGE, "-e", "vllm", "--gpu", "L4-24G", "--json"], FAILED, "does not fit")
    _expect(["plan", "capacity", "-m", SMALL, "-e", "vllm", "--gpu", "H999"], BAD_INPUT, "H999")


def test_plan_parallel_exits_1_when_no_layout_fits_as_capacity_does() -> None:
    _expect(["plan", "parallel", "-m", SMALL, "-e", "vllm", "--gpu", "H100-80G", "--gpus", "2", "--json"], OK)
    for fmt in ([], ["--json"]):  # was 0 on both
        _expect(
            ["plan", "parallel", "-m", LARGE, "-e", "vllm", "--gpu", "L4-24G", "--gpus", "1", *fmt],
            FAILED,
            "no layout fits on 1 GPU",
        )


def test_plan_canary_both_copies_start_0_a_copy_that_cannot_start_1() -> None:
    _expect(["plan", "canary", "-m", SMALL, "-e", "vllm", "--gpu", "H100-80G", "--json"], OK)
    _expect(["plan", "canary", "-m", LARGE, "-e", "vllm", "--gpu", "L4-24G", "--json"], FAILED, "do not fit")


def test_plan_grace_a_warning_is_0_a_short_setting_is_1(tmp_path: Path) -> None:
    base = ["plan", "grace", "--max-tokens", "2000", "--tpot-p99-ms", "35"]
    _expect(base, OK, "77 s")
    _expect([*base, "--client-timeout-s", "10"], OK, "warning: client timeout 10 s")  # was 1
    (tmp_path / "deploy.yaml").write_text(DEPLOY)
    _expect([*base, "--scan", str(tmp_path)], FAILED, "SHORT", "shorter than the 77 s")
    _expect(["plan", "grace", "--max-tokens", "2000"], BAD_INPUT, "no TPOT given")


# --- report -------------------------------------------------------------------------------------------------------


def test_report_exits_as_check_does_0_go_1_no_go_2_not_a_run(tmp_path: Path) -> None:
    go = Path(b.write_run(tmp_path / "go", b.full_evidence()).path)
    _expect(["report", str(go)], OK, "VERDICT: GO")
    no_go = Path(b.write_run(tmp_path / "nogo", b.full_evidence(grace=b.grace(configured=[30.0]))).path)
    _expect(["report", str(no_go)], FAILED, "VERDICT: NO-GO", "no-go:")  # was 0
    _expect(["report", str(no_go), "--json"], FAILED, '"overall": "no-go"')
    (tmp_path / "empty").mkdir()
    _expect(["report", str(tmp_path / "empty")], BAD_INPUT, "not a check run directory")


# --- overload -----------------------------------------------------------------------------------------------------

FAST = ["--max-concurrency", "2", "--waves", "1", "--max-tokens", "4", "--timeout-s", "2"]


def test_overload_measured_0_all_refused_1_bad_input_2_unreachable_3() -> None:
    engine = FakeEngine()
    with engine.in_thread() as url:
        _expect(["overload", url, *FAST], OK, "concurrency")
        engine.script(weights={"status:400": 1.0})
        _expect(["overload", url, *FAST], FAILED, "every request at concurrency 1 failed")
    _expect(["overload", "not a url", *FAST], BAD_INPUT)
    _expect(["overload", _closed_url(), *FAST], UNREACHABLE, "nothing was measured")  # was 0, "NEITHER"


def test_overload_tls_against_plain_http_and_a_silent_port_are_unreachable_within_the_timeout() -> None:
    with FakeEngine().in_thread() as url:
        _expect(["overload", url.replace("http://", "https://"), *FAST], UNREACHABLE, "nothing was measured")
    with _silent_port() as url:
        got, _, err, took = run_cli(["overload", url, *FAST[:-1], "1"])
    assert got == UNREACHABLE and "within 1 s" in err and took < 5, (got, err, took)


@pytest.mark.parametrize("verb", ["ready", "overload"])
def test_unreachable_is_3_across_verbs(verb: str) -> None:
    extra = FAST if verb == "overload" else []
    _expect([verb, _closed_url(), *extra], UNREACHABLE)


# --- rollout gates (Prometheus) ---------------------------------------------------------------------------------


def _prometheus_config(tmp_path: Path, url: str, selector: str = 'job="gw"') -> Path:
    p = tmp_path / "switchover.yaml"
    p.write_text(
        "old: {url: 'http://127.0.0.1:18001', engine: vllm}\n"
        "new: {url: 'http://127.0.0.1:18002', engine: llamacpp}\n"
        "gateway:\n  weight: 0\n  rollback: false\n  run_dir: gw\n"
        "rollout:\n  stages: [5, 20]\n  source: prometheus\n"
        f"  prometheus: {{url: '{url}', timeout_s: 1, selector: '{selector}'}}\n"
        "  entry: {enabled: false}\n"
    )  # the stage gates' exits here; entry evidence: tests/rollout
    return p


def _at_first_stage(config: Path) -> Path:
    """Enter the 5 % stage (no exit gates before it), so that `rollout gates` queries Prometheus."""
    _expect(["rollout", "advance", "-c", str(config), "-m", "start"], OK)
    return config


def _dribbling(conn: socket.socket, stop: threading.Event) -> None:
    """A valid head, then one body byte every 0.2 s."""
    with contextlib.suppress(OSError):
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n")
        for _ in range(500):
            if stop.is_set():
                return
            conn.sendall(b" ")
            stop.wait(0.2)


def _dribbling_port() -> contextlib.AbstractContextManager[str]:
    """Answers every request with a valid head, then one body byte every 0.2 s."""
    return tcp_server(_dribbling)


def test_rollout_gates_a_dribbling_prometheus_is_3_at_the_query_timeout(tmp_path: Path) -> None:
    """A byte every 0.2 s: each read is well within timeout_s, the query is not (it took 90 s at 3 s)."""
    with _dribbling_port() as url:
        config = _at_first_stage(_prometheus_config(tmp_path, url))
        got, _, err, took = run_cli(["rollout", "gates", "-c", str(config)])
    assert got == UNREACHABLE and "within 1 s" in err and took < 5, (got, err[-500:], took)


def test_rollout_gates_an_injected_selector_is_2_naming_the_field(tmp_path: Path) -> None:
    config = _prometheus_config(tmp_path, _closed_url(), selector='job="gw"}[1s])) * 0 # ')
    _expect(["rollout", "gates", "-c", str(config)], BAD_INPUT, "rollout.prometheus.selector")
    _expect(["rollout", "gates", "-c", str(_at_first_stage(_prometheus_config(tmp_path, _closed_url())))], UNREACHABLE)


def test_rollout_watch_holds_through_an_unreachable_prometheus_and_is_3_only_when_every_check_was(
    tmp_path: Path,
) -> None:
    """A watch ended at the first failed scrape before, and its automatic rollback with it."""
    config = _at_first_stage(_prometheus_config(tmp_path, _closed_url()))
    got, out, err, _ = run_cli(["rollout", "watch", "-c", str(config), "--max-checks", "2", "--interval", "0.01"])
    assert got == UNREACHABLE, (got, out, err)
    assert "[1/2] hold:" in out and "[2/2] hold:" in out, out
    assert "all 2 checks failed to reach their evidence" in err
