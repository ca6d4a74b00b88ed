"""Soak runs against zero-work servers: checkpoints leave a readable, consistent run directory; windows and the
drift table; a run killed with SIGKILL resumes from its last checkpoint without losing or repeating a request."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from switchover.bench.runner import BenchRun
from switchover.bench.soak import drift_table
from switchover.evidence.bench import BenchPlan, BenchReport, EndpointSpec
from switchover.evidence.bench_findings import DriftRow, Window
from switchover.evidence.bench_step import StepSummary
from switchover.runs import RunDir
from switchover.testing import await_until
from switchover.testing.zerowork import ZeroWorkServer


def _plan(url: str, **kw) -> BenchPlan:
    base = dict(
        buckets=[16],
        output_tokens=8,
        concurrency=[4],
        duration_s=3.0,
        checkpoint_s=1.0,
        window_s=1.0,
        calibrate=False,
        scrape_interval_s=0,
    )
    base.update(kw)
    return BenchPlan(endpoints=[EndpointSpec(label="target", url=url)], **base)


async def test_a_soak_checkpoints_into_closed_parts_and_reports_windows_and_drift(tmp_path):
    async with ZeroWorkServer(itl_s=0.001) as srv:
        report, rd = await BenchRun(_plan(srv.url), tmp_path).run()
    parts = sorted((rd.path / "requests").glob("part-*.parquet"))
    assert len(parts) >= 3 and not list((rd.path / "requests").glob(".part-*"))  # every part closed
    rows = rd.read_records("requests")
    step = report.steps[0]
    assert len(rows) == step.requests + step.warmup and len({r["index"] for r in rows}) == len(rows)
    assert rd.query("select count(*) as n from requests")[0]["n"] == len(rows)
    soak = report.soak
    assert soak is not None and soak.checkpoints >= 2
    assert len(soak.windows) >= 3 and sum(w.summary.requests for w in soak.windows) == step.requests
    assert all(w.client_rss_mb and w.client_rss_mb > 0 for w in soak.windows)
    tpot = next(d for d in soak.drift if d.metric == "TPOT p99 ms")
    assert tpot.first is not None and tpot.last is not None
    assert rd.read_json("checkpoint")["finished"] is True
    html = rd.file("report.html").read_text()
    assert "Soak" in html and "Drift" in html


def _window(index: int, tpot_p99: float, rss: float) -> Window:
    from switchover.measure.distribution import Dist

    d = Dist(count=10, mean=1, std=0, min=1, max=tpot_p99, p50=1, p90=1, p95=1, p99=tpot_p99)
    s = StepSummary(
        endpoint="new",
        step=0,
        requests=10,
        warmup=0,
        ok=10,
        failed=0,
        duration_s=10,
        req_per_s=1,
        out_tok_per_s=1,
        chunks_per_s=1,
        error_rate=0,
        tpot_ms=d,
        ttft_ms=d,
    )
    return Window(
        endpoint="new",
        index=index,
        start_s=index * 60.0,
        end_s=(index + 1) * 60.0,
        start_wall=0,
        summary=s,
        client_rss_mb=rss,
    )


def test_drift_flags_a_tail_that_grew_and_memory_that_crept():
    rows = {d.metric: d for d in drift_table([_window(0, 10, 200), _window(1, 11, 201), _window(2, 14, 260)], 60)}
    assert rows["TPOT p99 ms"].flagged and rows["TPOT p99 ms"].change_pct == pytest.approx(40)
    assert rows["client RSS MB"].flagged and not rows["TPOT p50 ms"].flagged
    assert "not measured" in rows["engine RSS MB"].note


def test_drift_needs_two_full_windows():
    (row,) = drift_table([_window(0, 10, 200)], 60)
    assert row == DriftRow(
        endpoint="new",
        metric="all",
        first=None,
        last=None,
        change_pct=None,
        flagged=False,
        note="1 full window(s): drift needs two",
    )


def _checkpoints(runs) -> int:
    for ck in runs.glob("*/checkpoint.json"):
        try:
            return int(json.loads(ck.read_text())["soak"]["checkpoints"])
        except (ValueError, KeyError):
            return 0
    return 0


async def test_a_killed_soak_resumes_from_its_last_checkpoint(tmp_path):
    async with ZeroWorkServer(itl_s=0.002) as srv:
        cmd = [
            sys.executable,
            "-m",
            "switchover",
            "bench",
            "--url",
            srv.url,
            "--buckets",
            "16",
            "--output-tokens",
            "8",
            "--concurrency",
            "4",
            "--duration",
            "6s",
            "--checkpoint-every",
            "1s",
            "--window",
            "2s",
            "--no-calibrate",
            "--scrape-interval",
            "0",
            "--runs-dir",
            str(tmp_path),
            "--name",
            "soak",
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            await await_until(
                lambda: _checkpoints(tmp_path) >= 2 or proc.poll() is not None, 60, "two checkpoints of the soak run"
            )
            assert _checkpoints(tmp_path) >= 2, "the run never checkpointed twice"
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait()
        (run_dir,) = tmp_path.glob("*-soak")
        before = json.loads((run_dir / "checkpoint.json").read_text())
        assert before["current"] is not None and not before.get("finished")
        report, rd = await BenchRun.resumed(run_dir).run()
    rows = rd.read_records("requests")
    step = report.steps[0]
    assert len(report.steps) == 1 and step.requests + step.warmup == len(rows)
    assert len({r["index"] for r in rows}) == len(rows)  # a resumed step numbers on: no request twice
    assert not list((rd.path / "requests").glob(".part-*"))  # the killed run's open part is gone, every part closed
    assert step.requests > before["current"]["measured"]
    assert report.soak is not None and len(report.soak.resumed) == 1
    assert any("resumed after" in n for n in report.soak.notes)
    assert step.duration_s is not None and step.duration_s < 6.5  # the outage is not measuring time
    assert RunDir.open(rd.path).read_json("summary", BenchReport).soak == report.soak


def test_part_writer_removes_a_crashed_runs_open_part_and_keeps_closed_ones(tmp_path):
    import pyarrow as pa

    from switchover.atomicfile import temp_path
    from switchover.bench.soak import PartWriter

    schema = pa.schema([("x", pa.int64())])
    w = PartWriter(tmp_path, schema)
    w.append([{"x": 1}])
    w.rotate()
    stale = temp_path(tmp_path / "part-00001.parquet")
    stale.write_bytes(b"PAR1 no footer")
    w2 = PartWriter(tmp_path, schema, first_part=1)
    assert not stale.exists() and (tmp_path / "part-00000.parquet").exists()
    w2.append([{"x": 2}])
    assert not (tmp_path / "part-00001.parquet").exists()  # hidden until the checkpoint closes it
    w2.close()
    assert sorted(p.name for p in tmp_path.glob("*.parquet")) == ["part-00000.parquet", "part-00001.parquet"]


async def test_resume_refuses_a_checkpoint_it_cannot_read_with_bad_input(tmp_path):
    from switchover.errors import BadInput

    async with ZeroWorkServer(itl_s=0.001) as srv:
        _, rd = await BenchRun(_plan(srv.url, duration_s=1.0, checkpoint_s=0.4), tmp_path).run()
    good = json.loads(rd.file("checkpoint.json").read_text())
    assert BenchRun.resumed(rd.path).resume is not None  # the checkpoint as written is accepted
    broken = [
        {k: v for k, v in good.items() if k != "soak"},  # a key missing
        {**good, "done": "two"},  # a wrong type
        {**good, "keys": {"no separator": {}}},
        {**good, "current": {"acc": {"samples": []}}},
        [1, 2, 3],  # JSON, but not an object
    ]
    for ck in broken:
        rd.file("checkpoint.json").write_text(json.dumps(ck))
        with pytest.raises(BadInput, match="not a usable bench checkpoint"):
            BenchRun.resumed(rd.path)
    config = json.loads(rd.file("config.json").read_text())
    rd.file("config.json").write_text(json.dumps({**config, "checkpoint_s": None}))
    rd.file("checkpoint.json").write_text(json.dumps(good))
    with pytest.raises(BadInput, match="not a soak run"):
        BenchRun.resumed(rd.path)


def _row(t_s: float) -> dict:
    """A finished request whose last byte came at t_s seconds."""
    s = 1_000_000_000
    end = int(t_s * s)
    return {
        "send_ns": end - s // 10,
        "end_ns": end,
        "chunk_ns": [end - s // 20, end],
        "chunk_text": ["a", "b"],
        "completion_tokens": 2,
        "failure_kind": None,
        "warmup": False,
    }


def test_a_stalled_window_is_a_window_with_no_requests_and_drift_flags_it():
    from switchover.bench.soak import Windows
    from switchover.evidence.bench_findings import Soak

    s = 1_000_000_000
    soak = Soak(window_s=10.0, checkpoint_s=5.0)
    w = Windows(soak, seed=0)
    w.start("new", 0, 0.0, {"endpoint": "new", "step": 0, "concurrency": 1})

    for t in (1, 2, 3, 4, 5, 6, 7, 8):
        w.add("new", _row(t), int(t * s))
    w.roll("new", int(35 * s))  # nothing finished from 8 s to 35 s: windows 1 and 2 are empty, 3 is open
    w.finish("new", int(36 * s))  # the open window has no request: a partial one is not shown
    assert [(x.index, x.summary.requests) for x in soak.windows] == [(0, 8), (1, 0), (2, 0)]
    rows = {d.metric: d for d in drift_table(soak.windows, 10.0)}
    assert rows["requests"].flagged and rows["requests"].change_pct == pytest.approx(-100)
    assert rows["TPOT p50 ms"].last is None and not rows["TPOT p50 ms"].flagged  # not measured, not 0


def test_the_last_window_cut_short_by_the_steps_end_is_marked_partial_and_left_out_of_the_timeline():
    from switchover.bench.report import soak_figure
    from switchover.bench.soak import Windows
    from switchover.evidence.bench_findings import Soak

    s = 1_000_000_000
    soak = Soak(window_s=10.0, checkpoint_s=5.0)
    w = Windows(soak, seed=0)
    w.start("new", 0, 0.0, {"endpoint": "new", "step": 0, "concurrency": 1})

    for t in (1, 2, 3, 11, 12, 20.01):  # a straggler just past the last whole window
        w.roll("new", int(t * s))
        w.add("new", _row(t), int(t * s))
    w.finish("new", int(20.02 * s))
    assert [(x.index, x.partial) for x in soak.windows] == [(0, False), (1, False), (2, True)]
    report = type("R", (), {"soak": soak})()
    xs = [list(tr.x) for tr in soak_figure(report).data]  # type: ignore[arg-type]
    assert all(len(x) == 2 for x in xs)  # only the two whole windows are plotted
