"""Gate verdicts (pass / hold / fail), the decision they lead to, and the evidence sources."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from switchover.config.rollout import GateName, GateThresholds, PrometheusSource
from switchover.errors import Unreachable
from switchover.evidence import gateway_series as mn
from switchover.ledger_files import read_ledger_rows
from switchover.rollout.gates import ArmWindow, GateResult, WindowStats, decide, evaluate, stats_from_ledger
from switchover.rollout.prometheus_window import stats_from_prometheus
from tests.rollout.builders import traffic, write_ledger

TH = GateThresholds(min_samples=50, max_error_rate=0.02, max_fallback_ratio=0.05, max_ttft_p99_ratio=1.5)


def _stats(**new: float) -> WindowStats:
    return WindowStats(
        source="ledger",
        window_s=60,
        new=ArmWindow(**new),
        old=ArmWindow(ttft_p99_ms=100, ttft_n=500, tpot_p99_ms=10, tpot_n=500),
    )


@pytest.mark.parametrize(
    ("requests", "errors", "verdict"),
    [
        (100, 0, "pass"),
        (100, 2, "pass"),  # 2 % is at the line, not over it
        (100, 3, "fail"),
        (10, 0, "hold"),  # too few samples: hold, never pass
        (10, 1, "hold"),  # 1 error could still be absorbed by 50 requests
        (10, 2, "fail"),  # 2 errors exceed 2 % of 50 whatever the next 40 do
        (0, 0, "hold"),
    ],
)
def test_error_rate_gate(requests: int, errors: int, verdict: str) -> None:
    [r] = evaluate(_stats(requests=requests, errors=errors), [GateName.ERROR_RATE], TH)
    assert r.verdict == verdict, r.reason


@pytest.mark.parametrize(("fallbacks", "verdict"), [(5, "pass"), (6, "fail")])
def test_fallback_ratio_gate(fallbacks: int, verdict: str) -> None:
    [r] = evaluate(_stats(requests=100, fallbacks=fallbacks), [GateName.FALLBACK_RATIO], TH)
    assert r.verdict == verdict


@pytest.mark.parametrize(
    ("p99", "n", "verdict"), [(149.0, 100, "pass"), (151.0, 100, "fail"), (500.0, 49, "hold"), (None, 0, "hold")]
)
def test_ttft_ratio_gate(p99: float | None, n: int, verdict: str) -> None:
    [r] = evaluate(_stats(ttft_p99_ms=p99, ttft_n=n), [GateName.TTFT_P99_RATIO], TH)
    assert r.verdict == verdict, r.reason


def test_soft_gates_fail_without_being_hard() -> None:
    th = TH.model_copy(update={"soft": [GateName.TPOT_P99_RATIO]})
    [r] = evaluate(_stats(tpot_p99_ms=100, tpot_n=100), [GateName.TPOT_P99_RATIO], th)
    assert r.verdict == "fail" and not r.hard
    assert decide([r]) == "hold"


def _r(verdict: str, hard: bool = True) -> GateResult:
    return GateResult(gate=GateName.ERROR_RATE, verdict=verdict, hard=hard, threshold=0.0, samples=0, reason="")


@pytest.mark.parametrize(
    ("verdicts", "blockers", "decision"),
    [
        (["pass", "pass"], [], "advance"),
        (["pass", "hold"], [], "hold"),
        (["hold", "fail"], [], "rollback"),
        (["pass"], ["dwell"], "hold"),
        ([], [], "advance"),
    ],
)
def test_decision(verdicts: list[str], blockers: list[str], decision: str) -> None:
    assert decide([_r(v) for v in verdicts], blockers) == decision


def test_ledger_evidence_counts_arms_errors_and_fallbacks(tmp_path: Path) -> None:
    rows = traffic(0.0, 200, new_share=0.5, seed=1) + traffic(100.0, 40, new_share=1.0, new_outcome="fallback_ok")
    write_ledger(tmp_path, rows)
    got, skipped = read_ledger_rows(tmp_path, since=0.0)
    assert len(got) == 240 and skipped.bad_lines == 0
    s = stats_from_ledger(got, window_s=120, with_shadow=False, th=TH)
    assert s.new.fallbacks == 40 and s.new.errors == 0
    assert s.new.requests + s.old.requests == 240
    assert s.new.ttft_n == s.new.requests - 40 and s.old.ttft_p99_ms is not None
    [fb] = evaluate(s, [GateName.FALLBACK_RATIO], TH)
    assert fb.verdict == "fail"
    assert len(read_ledger_rows(tmp_path, since=100.0).rows) == 40


def test_shadow_gate_fails_on_a_shifted_shadow_and_passes_on_a_clean_one() -> None:
    th = TH.model_copy(update={"min_samples": 100})
    bad = stats_from_ledger(
        traffic(0.0, 400, new_share=0.0, shadow=True, shadow_ttft_scale=2.0), window_s=60, with_shadow=True, th=th
    )
    [r] = evaluate(bad, [GateName.SHADOW_DISTRIBUTION], th)
    assert r.verdict == "fail" and "ttft_ms" in r.reason
    good = stats_from_ledger(
        traffic(0.0, 400, new_share=0.0, shadow=True, seed=5), window_s=60, with_shadow=True, th=th
    )
    [r] = evaluate(good, [GateName.SHADOW_DISTRIBUTION], th)
    assert r.verdict == "pass", r.reason
    few = stats_from_ledger(traffic(0.0, 50, new_share=0.0, shadow=True), window_s=60, with_shadow=True, th=th)
    [r] = evaluate(few, [GateName.SHADOW_DISTRIBUTION], th)
    assert r.verdict == "hold"


class _FakePrometheus(BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, float | None]] = {}
    queries: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)["query"][0]
        self.queries.append(query)
        value = next((v for k, v in self.answers.items() if k in query), None)
        result = [] if value is None else [{"metric": {}, "value": [0, str(value)]}]
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakePrometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_prometheus_evidence_is_read_with_promql(prometheus: str) -> None:
    _FakePrometheus.queries = []
    _FakePrometheus.answers = {
        f'{mn.ROUTED}{{arm="new",job="gw"}}': 200.0,
        f'{mn.REQUESTS}{{arm="new",outcome': 9.0,
        f"{mn.FALLBACKS}": 1.0,
        f'{mn.TTFT}_count{{arm="new"': 190.0,
        f'{mn.TTFT}_count{{arm="old"': 800.0,
        f'{mn.TTFT}_bucket{{arm="new"': 0.300,
        f'{mn.TTFT}_bucket{{arm="old"': 0.100,
    }
    s = stats_from_prometheus(PrometheusSource(url=prometheus, selector='job="gw"'), window_s=300)
    assert (s.new.requests, s.new.errors, s.new.fallbacks) == (200, 9, 1)
    assert s.new.ttft_p99_ms == pytest.approx(300.0) and s.old.ttft_n == 800
    assert s.new.tpot_n == 0 and s.new.tpot_p99_ms is None  # no data: reported missing, not 0
    assert all("[300s]" in q for q in _FakePrometheus.queries)
    results = {
        r.gate: r.verdict
        for r in evaluate(s, [GateName.ERROR_RATE, GateName.TTFT_P99_RATIO, GateName.TPOT_P99_RATIO], TH)
    }
    assert results == {GateName.ERROR_RATE: "fail", GateName.TTFT_P99_RATIO: "fail", GateName.TPOT_P99_RATIO: "hold"}


def test_unreachable_prometheus_is_exit_3() -> None:
    from switchover.testbed.processes import free_port

    with pytest.raises(Unreachable):
        stats_from_prometheus(PrometheusSource(url=f"http://127.0.0.1:{free_port()}", timeout_s=1), window_s=60)


def test_shadow_gate_judges_only_the_configured_metrics() -> None:
    th = TH.model_copy(update={"min_samples": 100, "shadow_metrics": ["output_tokens", "finish_reason", "error_code"]})
    s = stats_from_ledger(
        traffic(0.0, 400, new_share=0.0, shadow=True, shadow_ttft_scale=2.0, seed=5),
        window_s=60,
        with_shadow=True,
        th=th,
    )
    assert s.shadow is not None and "ttft_ms" in s.shadow.differs  # still compared and reported
    [r] = evaluate(s, [GateName.SHADOW_DISTRIBUTION], th)
    assert r.verdict == "pass", r.reason
