"""bench against the real engines: ladder 1..4 on vLLM CPU (old) vs llama-server (new), tiny model.

Done-when of issue 3: a complete run directory and a report whose numbers are consistent (TTFT < E2E,
N equals usage, ISL within ±1 token of the target or the deviation reported, knee found or "no knee in range").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess

import pytest

from switchover.bench.runner import BenchRun
from switchover.bench.stats import first_token_ns, last_chunk_ns
from switchover.evidence.bench import BenchPlan, BenchReport, EndpointSpec
from switchover.testbed import processes
from switchover.testbed.layout import bed_models
from switchover.testing import await_until

pytestmark = pytest.mark.engines


async def test_ladder_1_to_4_vllm_vs_llamacpp_is_complete_and_consistent(bed, tmp_path):
    plan = BenchPlan(
        name="real",
        endpoints=[
            EndpointSpec(label="old", url=bed.old_url, engine="vllm", model=bed.model),
            EndpointSpec(label="new", url=bed.new_url, engine="llamacpp", model=bed.model),
        ],
        buckets=[32, 128],
        output_tokens=16,
        concurrency=[1, 2, 3, 4],
        requests=4,
        warmup_requests=1,
        tokenizer=str(bed.layout.tiny_hf(1)),
        scrape_interval_s=0.5,
        timeout_s=60,
        calibrate=False,
    )
    report, rd = await BenchRun(plan, tmp_path).run()

    assert {
        "config.json",
        "endpoints.json",
        "summary.json",
        "requests.parquet",
        "metrics.parquet",
        "report.html",
    } <= set(rd.files())
    assert rd.read_json("summary", BenchReport).steps == report.steps
    assert len(report.steps) == 2 * 2 * 4
    rows = rd.read_records("requests")
    ok = [r for r in rows if not r["failure_kind"]]
    assert len(ok) >= 0.95 * len(rows)
    for r in ok:
        first, last = first_token_ns(r), last_chunk_ns(r)
        assert first is not None and last is not None
        assert r["send_ns"] < first <= last  # TTFT <= E2E; equal only when all tokens came in one read
        assert r["completion_tokens"] == 16  # N from usage equals the forced output length
    for s in report.steps:
        assert s.ttft_ms is not None and s.e2e_ms is not None
        # TTFT < E2E, except for requests whose tokens all came in one read: those are counted and flagged
        assert s.ttft_ms.p50 < s.e2e_ms.p50 or s.one_read * 2 >= s.ok
        step_rows = [
            r
            for r in rows
            if r["endpoint"] == s.endpoint
            and r["bucket"] == s.bucket
            and r["step"] == s.step
            and not r["warmup"]
            and r["prompt_tokens"] is not None
        ]
        one_read = sum(1 for r in step_rows if not r["failure_kind"] and first_token_ns(r) == last_chunk_ns(r))
        assert s.one_read == one_read  # the flagged count is exactly the requests whose tokens came in one read
        off = sum(1 for r in step_rows if abs(r["prompt_tokens"] - int(s.bucket or 0)) > 1)
        assert off == s.lengths.isl_off_by_more_than_1  # within ±1, or every deviation is reported
        assert s.lengths.isl_mean is not None and abs(s.lengths.isl_mean - int(s.bucket or 0)) <= 1
        assert s.lengths.n_usage_missing == 0
        assert s.lengths.retok_compared == s.ok  # re-tokenized cross-check ran (differences reported, not used)
    assert set(report.knees) == {"old/32", "old/128", "new/32", "new/128"}
    for k in report.knees.values():
        assert k.found or k.message.startswith("no knee in range")
        assert k.bootstrap_found is not None, k.message  # the fit and its bootstrap ran (4 steps with data)
    scraped = rd.query("select endpoint, count(distinct name) n from metrics group by endpoint order by endpoint")
    assert {r["endpoint"] for r in scraped} == {"new", "old"}
    html = rd.file("report.html").read_text()
    assert "TPOT" in html and "new vs old".lower() in html.lower()
    assert len(report.ab) == 2 * 4 and all(a.deltas for a in report.ab)  # new vs old at every step of both buckets
    assert {e.chunk_stamps for e in report.endpoints} == {"kernel receive time (SO_TIMESTAMPNS)"}
    # the spellings of the release each engine reports: vLLM's /version is read exactly; the bed's llama-server is
    # built without its git history (build_info b0-unknown), so the newest spellings are assumed, and said
    old, new = report.endpoints
    assert (old.engine_version, old.engine_version_note) == ("0.32.0", None)
    assert new.engine_version is None and "no release number" in (new.engine_version_note or "")
    kv = rd.query("select distinct name from metrics where endpoint = 'old' and intent = 'kv_usage'")
    assert [r["name"] for r in kv] == ["vllm:kv_cache_usage_perc"]


async def test_chat_prompts_hit_the_target_length_through_the_real_chat_templates(bed, tmp_path):
    """The chat template's tokens count (issue 3): each engine applies its own template to the same messages."""
    plan = BenchPlan(
        name="chat",
        api="chat",
        endpoints=[
            EndpointSpec(label="old", url=bed.old_url, engine="vllm", model=bed.model),
            EndpointSpec(label="new", url=bed.new_url, engine="llamacpp", model=bed.model),
        ],
        buckets=[64],
        output_tokens=8,
        concurrency=[1],
        requests=3,
        warmup_requests=1,
        scrape_interval_s=0,
        timeout_s=60,
        calibrate=False,
    )
    report, rd = await BenchRun(plan, tmp_path).run()
    rows = [r for r in rd.read_records("requests") if not r["warmup"] and not r["failure_kind"]]
    assert len(rows) == 6
    for ep in report.endpoints:
        [fit] = ep.length_fits
        got = {r["prompt_tokens"] for r in rows if r["endpoint"] == ep.label}
        assert fit.deviation == fit.achieved - fit.target == fit.achieved - 64
        # within ±1 of 64, or off by exactly the deviation the run reports for that endpoint
        assert all(abs(n - 64) <= 1 for n in got) or all(abs(n - fit.achieved) <= 1 for n in got), (ep.label, got, fit)


async def test_engine_killed_mid_run_gives_recorded_errors_and_stops_by_error_rate(bed, tmp_path):
    model = bed_models(bed.layout)["tiny"]
    port = processes.free_port()
    log = (tmp_path / "llama.log").open("wb")
    proc = subprocess.Popen(
        processes.llama_command(bed.layout, model, port, threads=1),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        from switchover.wire.readiness import check_ready

        for _ in range(120):
            if (await check_ready(f"http://127.0.0.1:{port}", max_ms=5000, connect_timeout_s=1)).ready:
                break
            await asyncio.sleep(0.25)  # a bounded poll
        plan = BenchPlan(
            endpoints=[EndpointSpec(label="new", url=f"http://127.0.0.1:{port}", engine="llamacpp")],
            buckets=[32],
            output_tokens=16,
            concurrency=[1, 2, 2, 2, 2],
            requests=20,
            max_error_rate=0.3,
            scrape_interval_s=0,
            timeout_s=20,
            calibrate=False,
        )
        run = BenchRun(plan, tmp_path / "runs")
        task = asyncio.create_task(run.run())
        await await_until(lambda: any(ep.finished >= 8 for ep in run.eps), 120, "8 requests finished on new")
        os.killpg(proc.pid, signal.SIGKILL)
        report, rd = await asyncio.wait_for(task, timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
    assert report.stopped_reason is not None and "error rate" in report.stopped_reason
    kinds = {r["failure_kind"] for r in rd.read_records("requests") if r["failure_kind"]}
    assert kinds & {"connect", "disconnected", "truncated"}
    assert any(s.ok > 0 for s in report.steps)


async def test_short_soak_on_both_engines_checkpoints_windows_and_a_flat_client(bed, tmp_path):
    """Issue 13 soak on the test bed: 50 s per engine at c=2, checkpoints and drift windows every 20 s."""
    plan = BenchPlan(
        name="soak",
        endpoints=[
            EndpointSpec(label="old", url=bed.old_url, engine="vllm", model=bed.model),
            EndpointSpec(label="new", url=bed.new_url, engine="llamacpp", model=bed.model),
        ],
        buckets=[32],
        output_tokens=16,
        concurrency=[2],
        duration_s=50,
        warmup_requests=1,
        scrape_interval_s=2,
        timeout_s=60,
        calibrate=False,
        checkpoint_s=20,
        window_s=20,
    )
    report, rd = await BenchRun(plan, tmp_path).run()
    soak = report.soak
    assert soak is not None and soak.checkpoints >= 4  # 100 s of load, a checkpoint every 20 s
    parts = sorted((rd.path / "requests").glob("part-*.parquet"))
    assert len(parts) >= 4 and not list((rd.path / "requests").glob(".part-*"))
    rows = rd.read_records("requests")
    assert len(rows) == sum(s.requests + s.warmup for s in report.steps)
    assert {s.endpoint for s in report.steps} == {"old", "new"} and all(s.ok > 0 for s in report.steps)
    for label in ("old", "new"):
        ws = [w for w in soak.windows if w.endpoint == label]
        assert len(ws) == 3 and [w.index for w in ws] == [0, 1, 2]  # 0-20, 20-40, 40-50 s
        assert sum(w.summary.requests for w in ws) == next(s.requests for s in report.steps if s.endpoint == label)
        rss = [w.client_rss_mb for w in ws]
        assert all(r is not None for r in rss) and max(rss) - min(rss) < 50  # client memory flat (MB)
        drift = {d.metric: d for d in soak.drift if d.endpoint == label}
        assert drift["TPOT p99 ms"].first is not None and drift["TPOT p99 ms"].last is not None
    # vLLM's /metrics has the process collector: its memory is followed window by window
    assert all(w.engine_rss_mb and w.engine_rss_mb > 0 for w in soak.windows if w.endpoint == "old")
    assert rd.read_json("checkpoint")["finished"] is True
    assert "Drift" in rd.file("report.html").read_text()


async def test_workers_split_one_step_on_the_real_engine_and_merge_exactly(bed, tmp_path):
    """`bench --workers 2` against llama-server: one schedule, no request twice, every row counted once."""
    plan = BenchPlan(
        name="workers",
        endpoints=[EndpointSpec(label="new", url=bed.new_url, engine="llamacpp", model=bed.model)],
        buckets=[32],
        output_tokens=16,
        concurrency=[4],
        requests=16,
        warmup_requests=0,
        scrape_interval_s=0,
        timeout_s=60,
        calibrate=False,
        workers=2,
    )
    report, rd = await BenchRun(plan, tmp_path).run()
    (step,) = report.steps
    rows = rd.read_records("requests")
    assert step.requests == len(rows) == 16 and len({r["index"] for r in rows}) == 16
    assert step.ok == 16 and [(w.worker, w.requests) for w in step.workers] == [(0, 8), (1, 8)]
    assert all(r["completion_tokens"] == 16 for r in rows) and step.lengths.n_usage_missing == 0
    assert step.ttft_ms is not None and step.ttft_ms.count == 16 and step.e2e_ms is not None
