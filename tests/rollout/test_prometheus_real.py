"""The Prometheus evidence path against a real Prometheus (Debian package `prometheus`) scraping the gateway's
own metric registry: the gates' PromQL names, labels, increase() and histogram_quantile() really work.
Skips with the reason when the binary is missing. Loopback only; bounded to ~20 s."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from switchover.config.rollout import GateName, GateThresholds, PrometheusSource
from switchover.config.rollout_custom import CustomGate
from switchover.errors import BadInput
from switchover.gateway.metrics import GatewayMetrics
from switchover.rollout.custom_gates import CustomGateResult, evaluate_custom
from switchover.rollout.gates import evaluate
from switchover.rollout.prometheus_window import stats_from_prometheus
from switchover.subproc import stop
from switchover.testbed.processes import free_port
from switchover.testing import require_tool, wait_until


@pytest.fixture
def exporter() -> Iterator[tuple[GatewayMetrics, int]]:
    metrics = GatewayMetrics()
    metrics.preset(fallback_statuses=(503,))

    class H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = metrics.render()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield metrics, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _scrapes(url: str) -> int:
    """How many successful scrapes of the exporter Prometheus has stored (0 while it is not up)."""
    q = urllib.parse.quote('sum_over_time(up{job="gw"}[10m])')
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?query={q}", timeout=2) as r:
            result = json.loads(r.read())["data"]["result"]
    except (OSError, ValueError, KeyError):
        return 0
    return int(float(result[0]["value"][1])) if result else 0


def wait_scrapes(url: str, n: int, what: str, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Wait (bounded) until Prometheus has stored `n` scrapes of the exporter; fails if it exits meanwhile."""
    wait_until(lambda: (proc is not None and proc.poll() is not None) or _scrapes(url) >= n, 30 + 2 * n, what)
    assert proc is None or proc.poll() is None, f"prometheus exited with {proc.returncode}"


@contextlib.contextmanager
def real_prometheus(tmp_path: Path, target: int) -> Iterator[str]:
    """A real Prometheus scraping 127.0.0.1:target every second (job gw); yields its URL once it scrapes."""
    binary = require_tool("prometheus", hint="Debian package prometheus")
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs: [{{job_name: gw, static_configs: [{{targets: ['127.0.0.1:{target}']}}]}}]\n"
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:  # two scrapes before the test's increments: increase() has a baseline at 0 to count from
        wait_scrapes(url, 2, "two scrapes of the exporter by prometheus", proc)
        yield url
    finally:
        stop(proc, grace_s=15)


def test_gates_read_a_real_prometheus_scraping_the_gateway_metrics(exporter, tmp_path: Path) -> None:
    metrics, target = exporter
    # no series is created here: GatewayMetrics presets them at 0, so increase() sees the first increments
    with real_prometheus(tmp_path, target) as url:
        before = _scrapes(url)
        metrics.routed.labels(arm="new", reason="weight").inc(200)
        metrics.routed.labels(arm="old", reason="weight").inc(800)
        metrics.requests.labels(arm="new", outcome="ok").inc(190)
        metrics.requests.labels(arm="new", outcome="error").inc(8)
        metrics.fallbacks.labels(reason="status_503").inc(2)
        for _ in range(190):
            metrics.ttft.labels(arm="new").observe(0.3)
            metrics.tpot.labels(arm="new").observe(0.02)
        for _ in range(800):
            metrics.ttft.labels(arm="old").observe(0.1)
            metrics.tpot.labels(arm="old").observe(0.02)
        wait_scrapes(url, before + 4, "at least three scrapes after the increments")
        s = stats_from_prometheus(PrometheusSource(url=url, selector='job="gw"'), window_s=60)
    # increase() extrapolates to the window edges a little: counts are close, not exact
    assert 180 <= s.new.requests <= 260 and 7 <= s.new.errors <= 11 and 1 <= s.new.fallbacks <= 3
    assert s.new.ttft_p99_ms is not None and 250 <= s.new.ttft_p99_ms <= 500  # inside the (0.25, 0.5] bucket
    assert s.old.ttft_p99_ms is not None and 50 <= s.old.ttft_p99_ms <= 100
    assert s.old.ttft_n >= 700
    th = GateThresholds(min_samples=50, max_error_rate=0.02, max_ttft_p99_ratio=1.5)
    verdicts = {
        r.gate: r.verdict
        for r in evaluate(
            s, [GateName.ERROR_RATE, GateName.FALLBACK_RATIO, GateName.TTFT_P99_RATIO, GateName.TPOT_P99_RATIO], th
        )
    }
    assert verdicts == {
        GateName.ERROR_RATE: "fail",
        GateName.FALLBACK_RATIO: "pass",
        GateName.TTFT_P99_RATIO: "fail",
        GateName.TPOT_P99_RATIO: "pass",
    }


def test_custom_promql_gates_run_against_a_real_prometheus_per_label(exporter, tmp_path: Path) -> None:
    metrics, target = exporter
    gate = CustomGate(
        name="error_share",
        promql='sum by (arm) (increase(switchover_gateway_requests_total{job="gw",outcome="error"}[{window}])) '
        '/ sum by (arm) (increase(switchover_gateway_requests_total{job="gw"}[{window}]))',
        max=0.02,
        by="arm",
    )
    th = GateThresholds(min_samples=10)
    with real_prometheus(tmp_path, target) as url:
        source = PrometheusSource(url=url)
        metrics.requests.labels(arm="new", outcome="ok").inc(90)
        metrics.requests.labels(arm="new", outcome="error").inc(10)
        metrics.requests.labels(arm="old", outcome="ok").inc(400)

        def scraped() -> object:  # the scrape that carries the increments, seen through the gate itself
            (r,) = evaluate_custom([gate], [], th, window_s=60, prometheus=source)
            groups = {g.group for g in r.groups}
            return r if groups == {"new", "old"} and all(g.observed for g in r.groups if g.group == "new") else None

        res = wait_until(scraped, 20, "the custom gate observing both arms (a scrape after the increments)", poll_s=0.5)
        assert isinstance(res, CustomGateResult)
        bad = CustomGate(name="typo", promql="sum(rate(x[{window}])", max=1)
        with pytest.raises(BadInput, match="Prometheus rejected"):
            evaluate_custom([bad], [], th, window_s=60, prometheus=source)
        ranged = CustomGate(name="ranged", promql='switchover_gateway_requests_total{job="gw"}[{window}]', max=1)
        with pytest.raises(BadInput, match="range vector"):
            evaluate_custom([ranged], [], th, window_s=60, prometheus=source)
        text = CustomGate(name="text", promql='"a string"', max=1)
        with pytest.raises(BadInput, match="returns a string"):
            evaluate_custom([text], [], th, window_s=60, prometheus=source)
        scalar = CustomGate(name="scalar", promql="scalar(vector(3))", max=1)
        assert evaluate_custom([scalar], [], th, window_s=60, prometheus=source)[0].verdict == "fail"
    assert res.verdict == "fail" and {g.group: g.verdict for g in res.groups} == {"new": "fail", "old": "pass"}
    assert res.query is not None and "[60s]" in res.query
