"""Checkpoints of a soak run (`--checkpoint-every`): what `bench --resume RUN` needs to carry on, written so that
the run directory is consistent at every checkpoint: every row summarised in checkpoint.json is in a closed
Parquet part, and summary.json/report.html show the run so far."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from switchover.bench.accumulate import StepAccumulator
from switchover.bench.conclude import StepValues
from switchover.bench.soak import drift_table
from switchover.errors import BadInput
from switchover.evidence.bench import BenchReport, Calibration, StepTime
from switchover.evidence.bench_findings import BucketFit, Soak
from switchover.evidence.bench_step import StepSummary
from switchover.runs import RunDir

if TYPE_CHECKING:
    from switchover.bench.rows import RowSink
    from switchover.bench.runner import BenchRun
    from switchover.bench.soak import PartWriter

_SEP = "\x1f"  # joins (endpoint, bucket, step) into one JSON key


def write_checkpoint(run: BenchRun, rd: RunDir, report: BenchReport, sink: RowSink, writer: PartWriter) -> None:
    """Close the open Parquet parts, then record the state that matches them, then the report so far."""
    sink.flush()
    writer.rotate()
    run._scraped()
    run.metrics_writer.rotate()
    now = time.perf_counter_ns()
    soak = report.soak
    assert soak is not None
    soak.checkpoints += 1
    windows = run.windows
    if windows is not None:
        for label in list(windows.open):
            windows.roll(label, now)
    cur = run.current
    current: dict[str, Any] | None = None
    partial: list[StepSummary] = []
    if cur is not None:
        acc = cur["acc"]
        label = acc.labels.get("endpoint")
        w = windows.open.get(label) if windows is not None else None
        current = {
            "acc": acc.to_dict(),
            "issued": run.current_issued,
            "measured": acc.measured,
            "measured_s": cur["measured0"] + max(0.0, (now - cur["t_resume"]) / 1e9 - cur["warm_s"]),
            "elapsed_s": (now - cur["t0"]) / 1e9,
            "window": None if w is None else {"index": w[0], "acc": w[1].to_dict()},
        }
        if acc.rows:
            partial = [acc.summary()]
    rd.write_json(
        "checkpoint",
        {
            "written_wall": time.time(),
            "created_wall": report.created_wall,
            "calibration": None if report.calibration is None else report.calibration.model_dump(),
            "done": run.done,
            "current": current,
            "steps": [s.model_dump() for s in run.state.steps],
            "times": [t.model_dump() for t in run.state.times],
            "keys": {_SEP.join(map(str, k)): v.to_dict() for k, v in run.state.keys.items()},
            "soak": soak.model_dump(),
            "fits": {b: f.model_dump() for b, f in run.fits.items()},
            "length_fits": {ep.spec.label: [f.model_dump() for f in ep.info.length_fits] for ep in run.eps},
            "parts": writer.part,
            "metrics_parts": run.metrics_writer.part,
        },
    )
    soak.drift = drift_table(soak.windows, soak.window_s)
    so_far = report.model_copy(update={"steps": run.state.steps + partial, "step_times": list(run.state.times)})
    rd.write_json("summary", so_far)
    from switchover.bench.report import write_report

    write_report(rd, so_far)


def check_checkpoint(ck: Any, where: str, seed: int = 0) -> dict[str, Any]:
    """`ck` when every part `bench --resume` reads is there and of its type; else BadInput naming the first that
    is not (a checkpoint.json edited, truncated to valid JSON, or from another version)."""
    try:
        int(ck["done"]), float(ck["created_wall"]), float(ck["written_wall"])
        int(ck["parts"]), int(ck["metrics_parts"])
        if ck["calibration"] is not None:
            Calibration(**ck["calibration"])
        Soak(**ck["soak"])
        for s in ck["steps"]:
            StepSummary(**s)
        for t in ck["times"]:
            StepTime(**t)
        for key, v in ck["keys"].items():
            _, _, step = key.split(_SEP)
            int(step)
            StepValues.from_dict(v, seed)
        for f in [*ck["fits"].values(), *(f for fs in ck["length_fits"].values() for f in fs)]:
            BucketFit(**f)
        cur = ck["current"]
        if cur is not None:
            StepAccumulator.from_dict(cur["acc"], seed)
            int(cur["issued"]), int(cur["measured"]), float(cur["measured_s"]), float(cur["elapsed_s"])
            if cur["window"] is not None:
                int(cur["window"]["index"])
                StepAccumulator.from_dict(cur["window"]["acc"], seed)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise BadInput(
            f"{where}: not a usable bench checkpoint ({type(exc).__name__}: {str(exc)[:200]})",
            hint="resume needs the checkpoint.json the run wrote; rerun the soak otherwise",
        ) from None
    return dict(ck)


def restore(run: BenchRun, ck: dict[str, Any]) -> None:
    """Put a runner back in the state of checkpoint `ck`: finished steps, their knee samples, step times."""
    seed = run.plan.seed
    run.done = int(ck["done"])
    run.state.steps = [StepSummary(**s) for s in ck["steps"]]
    run.state.times = [StepTime(**t) for t in ck["times"]]
    for key, v in ck["keys"].items():
        label, bucket, step = key.split(_SEP)
        run.state.keys[(label, bucket, int(step))] = StepValues.from_dict(v, seed)


def resumed_step(run: BenchRun, cont: dict[str, Any], report: BenchReport) -> StepAccumulator:
    """The step a resumed soak run was in, with the outage (by the wall clock: perf_counter restarts with the
    machine) left out of its duration."""
    assert run.resume is not None
    acc = StepAccumulator.from_dict(cont["acc"], run.plan.seed)
    gap = max(time.time() - float(run.resume["written_wall"]), 0.0)
    acc.paused_ns += int(gap * 1e9)
    if report.soak is not None:
        report.soak.notes.append(
            f"resumed after {gap:.0f} s without load; the step's duration, rates and "
            "steadiness leave that time out; rows after the last checkpoint were lost"
        )
    return acc


__all__ = ["check_checkpoint", "restore", "resumed_step", "write_checkpoint"]
