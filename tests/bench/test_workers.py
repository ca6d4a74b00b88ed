"""`bench --workers N`: one central schedule across processes, exact merge of their results, and each worker's
achieved load against its share."""

from __future__ import annotations

import pytest

from switchover.bench.runner import BenchRun
from switchover.bench.stats import summarize_step
from switchover.bench.worker import share
from switchover.bench.workload import arrival_offsets
from switchover.evidence.bench import BenchPlan, EndpointSpec
from switchover.testing.zerowork import ZeroWorkServer


def _plan(url: str, **kw) -> BenchPlan:
    base = dict(buckets=[16], output_tokens=8, calibrate=False, scrape_interval_s=0, workers=3)
    base.update(kw)
    return BenchPlan(endpoints=[EndpointSpec(label="target", url=url)], **base)


def test_shares_add_up_and_differ_by_at_most_one():
    for total in (1, 5, 64, 100):
        parts = [share(total, w, 3) for w in range(3)]
        assert sum(parts) == total and max(parts) - min(parts) <= 1


async def test_concurrency_split_across_workers_merges_exactly(tmp_path):
    async with ZeroWorkServer(itl_s=0.001) as srv:
        report, rd = await BenchRun(_plan(srv.url, concurrency=[6], requests=60, warmup_requests=3), tmp_path).run()
    (step,) = report.steps
    rows = rd.read_records("requests")
    assert len(rows) == 63 and len({r["index"] for r in rows}) == 63  # one schedule: no request number twice
    assert len(list((rd.path / "requests").glob("part-*-w*.parquet"))) == 3
    assert [(w.worker, w.target, w.requests) for w in step.workers] == [(0, 2, 20), (1, 2, 20), (2, 2, 20)]
    assert all(w.achieved and w.achieved > 1.5 for w in step.workers)
    exact = summarize_step(rows)
    assert (step.requests, step.ok, step.warmup) == (exact.requests, exact.ok, exact.warmup)
    assert step.ttft_ms == exact.ttft_ms and step.tpot_ms == exact.tpot_ms and step.itl_ms == exact.itl_ms
    assert step.steady is not None and exact.steady is not None
    assert step.steady.achieved == pytest.approx(exact.steady.achieved) and step.steady.target == 6
    assert {e.chunk_stamps for e in report.endpoints} != {None}


async def test_rate_mode_workers_send_the_one_central_schedule(tmp_path):
    plan = _plan(
        "http://127.0.0.1:1",
        rates=[200.0],
        arrival="poisson",
        requests=40,
        warmup_requests=0,
        concurrency=None,
        workers=2,
        seed=5,
    )
    async with ZeroWorkServer(itl_s=0.0005) as srv:
        plan = plan.model_copy(update={"endpoints": [EndpointSpec(label="target", url=srv.url)]})
        report, rd = await BenchRun(plan, tmp_path).run()
    rows = sorted(rd.read_records("requests"), key=lambda r: r["index"])
    assert [r["index"] for r in rows] == list(range(40))
    want = arrival_offsets("poisson", 200.0, 40, 5)
    t0 = rows[0]["sched_ns"]
    assert [r["sched_ns"] - t0 for r in rows] == [int(off * 1e9) for off in want]
    (step,) = report.steps
    assert [w.target for w in step.workers] == [100.0, 100.0] and step.requests == 40


async def test_a_worker_answer_past_64_kib_is_read_whole(tmp_path):
    # each worker answers with its accumulator on one line: 200 requests x 31 ITL gaps is well past asyncio's
    # default 64 KiB line limit
    async with ZeroWorkServer(itl_s=0.0002) as srv:
        plan = _plan(srv.url, concurrency=[8], requests=400, warmup_requests=0, output_tokens=32, workers=2)
        report, _ = await BenchRun(plan, tmp_path).run()
    (step,) = report.steps
    assert step.ok == 400 and step.itl_ms is not None and step.itl_ms.count == 400 * 31


def test_a_hung_worker_is_bounded_by_the_longest_step_every_timeout_allows():
    from switchover.bench.workers import step_bound_s

    assert step_bound_s(30.0, 10, 5.0, 4, None) == 30 + 5 + 60  # a timed step
    assert step_bound_s(None, 100, 5.0, 10, None) == 100 / 10 * 5 + 5 + 60  # every request to its timeout
    assert step_bound_s(None, 100, 5.0, None, 50.0) == 100 / 50 + 5 + 60  # paced
