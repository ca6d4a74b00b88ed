"""The client's own queueing and memory (bench/clientload.py): on the wire vs in the client, the open-file limit."""

from __future__ import annotations

import resource

import pytest

from switchover.bench.clientload import client_queue, open_files_for, peak_rss_mb, rss_mb
from switchover.errors import BadInput
from switchover.evidence.bench_step import ClientMemory, StepSummary
from switchover.measure.distribution import Dist


def _step(concurrency: int | None, req_per_s: float, e2e_mean_ms: float, rate: float | None = None) -> StepSummary:
    e2e = Dist(count=10, mean=e2e_mean_ms, std=0, min=1, max=1, p50=1, p90=1, p95=1, p99=1)
    return StepSummary(
        endpoint="target",
        step=0,
        concurrency=concurrency,
        rate=rate,
        requests=10,
        warmup=0,
        ok=10,
        failed=0,
        duration_s=1.0,
        req_per_s=req_per_s,
        out_tok_per_s=None,
        chunks_per_s=None,
        error_rate=0.0,
        e2e_ms=e2e,
    )


@pytest.mark.parametrize(
    ("conc", "rps", "e2e", "wire", "client", "bound"),
    [
        (1024, 4000.0, 3.0, 12.0, 1012.0, True),  # the c=1,024 run: 12 in flight, the rest in the client
        (64, 6000.0, 10.0, 60.0, 4.0, False),  # 94 % on the wire: the server holds the load
        (64, 1000.0, 80.0, 80.0, 0.0, False),  # Little's law a little over the slots (rounding of E2E): none waiting
    ],
)
def test_on_the_wire_is_req_per_s_times_mean_e2e_and_the_rest_waits_in_the_client(conc, rps, e2e, wire, client, bound):
    q = client_queue(_step(conc, rps, e2e), lag_n=4, lag_sum_ns=8_000_000, lag_max_ns=5_000_000)
    assert q.on_wire == pytest.approx(wire)
    assert q.in_client == pytest.approx(client)
    assert q.client_bound is bound
    assert (q.send_lag_ms_mean, q.send_lag_ms_max) == (2.0, 5.0)


def test_a_rate_step_is_client_bound_when_sends_are_on_average_a_gap_late():
    assert client_queue(_step(None, 90, 5, rate=100), 10, 10 * 20_000_000, 30_000_000).client_bound is True
    assert client_queue(_step(None, 100, 5, rate=100), 10, 10 * 1_000_000, 3_000_000).client_bound is False


def test_open_file_limit_is_raised_to_the_hard_limit_or_refused_naming_both(monkeypatch):
    limits = {"now": (1024, 4096)}
    monkeypatch.setattr(resource, "getrlimit", lambda _: limits["now"])
    monkeypatch.setattr(resource, "setrlimit", lambda _, v: limits.__setitem__("now", v))
    assert open_files_for(100) == 1024 and limits["now"] == (1024, 4096)  # enough already: unchanged
    assert open_files_for(2000) == 4096 and limits["now"] == (4096, 4096)
    limits["now"] = (1024, 4096)
    with pytest.raises(BadInput, match=r"--concurrency 10000 needs about 10064 open files.*at most 4096"):
        open_files_for(10_000)


def test_memory_figures_are_this_process_and_peak_is_not_below_now():
    now, peak = rss_mb(), peak_rss_mb()
    assert now is not None and 1 < now <= peak + 1
    assert ClientMemory(idle_rss_mb=100.0, peak_rss_mb=130.5).growth_mb == 30.5
