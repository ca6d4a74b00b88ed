"""Whole runs against in-process zero-work servers: the run directory, failures mid-run, the error-rate stop,
Ctrl-C keeping partial results, and an unreachable endpoint."""

from __future__ import annotations

import asyncio

import pytest

from switchover.bench.runner import BenchRun
from switchover.errors import Unreachable
from switchover.evidence.bench import BenchPlan, BenchReport, EndpointSpec
from switchover.runs import RunDir
from switchover.testing import await_until
from switchover.testing.zerowork import ZeroWorkServer


def _plan(*urls: str, **kw) -> BenchPlan:
    labels = ["old", "new"] if len(urls) == 2 else ["target"]
    base = dict(buckets=[24], output_tokens=8, concurrency=[1, 2, 4], requests=6, calibrate=False, scrape_interval_s=0)
    base.update(kw)
    return BenchPlan(endpoints=[EndpointSpec(label=lab, url=u) for lab, u in zip(labels, urls, strict=True)], **base)


async def test_ab_run_writes_a_complete_consistent_run_directory(tmp_path):
    async with ZeroWorkServer(itl_s=0.001) as a, ZeroWorkServer(itl_s=0.001) as b:
        report, rd = await BenchRun(_plan(a.url, b.url), tmp_path).run()
    assert {
        "config.json",
        "endpoints.json",
        "summary.json",
        "requests.parquet",
        "metrics.parquet",
        "report.html",
    } <= set(rd.files())
    assert len(report.steps) == 6 and all(s.ok == 6 for s in report.steps)
    rows = rd.read_records("requests")
    assert len(rows) == 2 * 3 * 7  # endpoints x steps x (requests + 1 warm-up)
    assert {r["prompt_tokens"] for r in rows} == {24}  # exact ISL
    assert {r["completion_tokens"] for r in rows} == {8}
    for s in report.steps:
        assert s.ttft_ms is not None and s.e2e_ms is not None and s.ttft_ms.p50 < s.e2e_ms.p50
    assert set(report.knees) == {"old/24", "new/24"}
    assert all(k.found or k.message.startswith("no knee in range") for k in report.knees.values())
    assert all(k.bootstrap_found is not None for k in report.knees.values())  # the fit ran on the 3 steps
    assert len(report.ab) == 3
    again = rd.read_json("summary", BenchReport)
    assert again.steps == report.steps
    assert [(q.endpoint, q.concurrency) for q in again.client] == [(s.endpoint, s.concurrency) for s in report.steps]
    assert all(q.on_wire is not None and q.send_lag_ms_mean is not None for q in again.client)
    mem = again.client_memory
    assert mem is not None and mem.idle_rss_mb and mem.peak_rss_mb and mem.peak_rss_mb >= mem.idle_rss_mb, mem
    html = rd.file("report.html").read_text()
    assert "plotly" in html and "knee" in html.lower()


async def test_failures_mid_run_are_recorded_and_the_run_continues(tmp_path):
    async with ZeroWorkServer(itl_s=0.0005, fail_after=10) as a:
        report, rd = await BenchRun(_plan(a.url), tmp_path).run()
    assert report.stopped_reason is None
    failed = [r for r in rd.read_records("requests") if r["failure_kind"]]
    assert failed and all(r["failure_kind"] == "http_status" for r in failed)
    assert report.steps[-1].errors == {"http_status": report.steps[-1].requests}
    assert report.steps[-1].ttft_ms is None
    assert report.steps[-1].missing["ttft"] == {"request failed (http_status)": report.steps[-1].requests}


async def test_max_error_rate_stops_the_run_and_keeps_what_was_measured(tmp_path):
    async with ZeroWorkServer(itl_s=0.0005, fail_after=10) as a:
        report, rd = await BenchRun(_plan(a.url, max_error_rate=0.2, concurrency=[1, 2, 4, 8]), tmp_path).run()
    assert report.stopped_reason is not None and "error rate" in report.stopped_reason
    assert len(report.steps) < 4
    assert rd.read_json("summary")["stopped_reason"] == report.stopped_reason


async def test_cancel_keeps_partial_results(tmp_path):
    async with ZeroWorkServer(itl_s=0.01) as a:
        run = BenchRun(_plan(a.url, concurrency=[1, 2], requests=50, output_tokens=16), tmp_path)
        task = asyncio.create_task(run.run())
        await await_until(
            lambda: run.run_dir is not None and any(ep.finished > 4 for ep in run.eps),
            30,
            "five requests finished (warmup and measured)",
        )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert run.run_dir is not None
    rd = RunDir.open(run.run_dir)
    summary = rd.read_json("summary", BenchReport)
    assert summary.interrupted and summary.stopped_reason == "interrupted (Ctrl-C)"
    rows = rd.read_records("requests")
    assert 0 < len(rows) < 102
    assert summary.steps and summary.steps[0].requests == len(rows) - summary.steps[0].warmup


async def test_unreachable_endpoint_is_a_one_line_unreachable_error(tmp_path):
    with pytest.raises(Unreachable, match=r"cannot connect to http://127\.0\.0\.1:1"):
        await BenchRun(_plan("http://127.0.0.1:1"), tmp_path).run()
    assert not list(tmp_path.iterdir())  # nothing half-written


async def test_dataset_trace_replay_runs_every_line(tmp_path):
    data = tmp_path / "trace.jsonl"
    data.write_text(
        '{"prompt": "a b c", "timestamp": 0}\n{"prompt": "d e", "timestamp": 0.05}\n'
        '{"prompt": "f", "timestamp": 0.1, "max_tokens": 3}\n'
    )
    async with ZeroWorkServer(itl_s=0.0005) as a:
        report, rd = await BenchRun(_plan(a.url, dataset=str(data)), tmp_path / "runs").run()
    rows = rd.read_records("requests")
    assert len(rows) == 3 and all(r["sched_ns"] is not None for r in rows)
    assert sorted(r["completion_tokens"] for r in rows) == [3, 8, 8]
    assert report.steps[0].bucket == "dataset"


async def test_rate_mode_runs_and_reports_send_rate(tmp_path):
    async with ZeroWorkServer(itl_s=0.0005) as a:
        report, _ = await BenchRun(
            _plan(a.url, concurrency=None, rates=[50.0, 100.0], arrival="poisson"), tmp_path
        ).run()
    assert [s.rate for s in report.steps] == [50.0, 100.0]
    assert all(s.steady is not None and s.steady.target == s.rate for s in report.steps)


async def test_chat_prompts_count_the_template_tokens_and_hit_the_target(tmp_path):
    async with ZeroWorkServer(itl_s=0.0005) as a:  # its chat template costs 3 tokens per message + BOS
        report, rd = await BenchRun(_plan(a.url, api="chat", concurrency=[1]), tmp_path).run()
    assert {r["prompt_tokens"] for r in rd.read_records("requests")} == {24}
    assert report.endpoints[0].length_fits[0].deviation == 0
    assert report.endpoints[0].chunk_stamps  # the run says where its chunk times came from
    assert (rd.path / "endpoints.json").read_text().count(report.endpoints[0].chunk_stamps) == 1
