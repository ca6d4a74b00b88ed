"""Multi-process generation (`bench --workers N`): one step's load from N worker processes for rates one core
cannot drive. The schedule is central: every worker draws the same seeded arrival schedule and sends every N-th
arrival (request numbers interleave, so no prompt repeats), or holds its share of the concurrency, all from one
start time on the machine-wide `perf_counter` clock. Results merge exactly: each worker's accumulator (sketches,
counts, the in-flight integral) folds into the step's, and its rows are its own Parquet part in `requests/`.
Each worker's achieved load against its target is kept in the step summary (`workers`)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import TYPE_CHECKING, Any

import orjson

from switchover.bench.accumulate import StepAccumulator
from switchover.bench.worker import WorkerSpec, share
from switchover.errors import SwitchoverError
from switchover.evidence.bench_step import WorkerLoad

if TYPE_CHECKING:
    from pathlib import Path

    from switchover.bench.endpoints import Endpoint
    from switchover.bench.runner import BenchRun

READY_S = 120.0  # a worker imports numpy, pyarrow, ... and connects: it must be ready within this
LEAD_NS = 200_000_000  # the common start is this far after the last worker said ready
# a worker's answer is one line holding its accumulator: bounded by the sample limits (bench/accumulate.py: about
# 280k kept values, a few MB of JSON), far past asyncio's default 64 KiB line limit
ANSWER_LIMIT = 64 << 20


def step_bound_s(
    duration_s: float | None, requests: int, timeout_s: float, concurrency: int | None, rate: float | None
) -> float:
    """The longest a step can take when every request runs to its timeout: past it a worker is hung."""
    if duration_s:
        work = duration_s
    elif rate:
        work = requests / rate
    else:
        work = requests / max(1, concurrency or 1) * timeout_s
    return work + timeout_s + 60.0


async def _line(proc: asyncio.subprocess.Process, timeout: float | None) -> dict[str, Any]:
    assert proc.stdout is not None
    try:
        raw = await asyncio.wait_for(proc.stdout.readline(), timeout)
    except TimeoutError:
        raise SwitchoverError(f"a bench worker gave no answer within {timeout:g} s: it is hung") from None
    except ValueError:  # the line went past ANSWER_LIMIT
        raise SwitchoverError(f"a bench worker answered more than {ANSWER_LIMIT >> 20} MiB in one line") from None
    if not raw:
        raise SwitchoverError(f"a bench worker exited ({await proc.wait()}) before answering")
    return dict(orjson.loads(raw))


def _send(proc: asyncio.subprocess.Process, obj: Any) -> None:
    assert proc.stdin is not None
    proc.stdin.write((obj if isinstance(obj, bytes) else orjson.dumps(obj)) + b"\n")


async def run_step_workers(
    run: BenchRun,
    ep: Endpoint,
    bucket: str,
    step: int,
    repeat: int,
    concurrency: int | None,
    rate: float | None,
    acc: StepAccumulator,
    parts: Path,
    position: int,
) -> list[WorkerLoad]:
    """Run one step from `run.plan.workers` processes; their accumulators merge into `acc`."""
    plan = run.plan
    n = plan.workers
    specs = []
    for w in range(n):
        slots = share(concurrency, w, n) if concurrency else None
        if concurrency and not slots:
            continue  # more workers than streams: the extra ones have nothing to hold
        requests = None if plan.requests is None else share(plan.requests, w, n)
        if requests == 0:
            continue
        specs.append(
            WorkerSpec(
                plan=plan,
                url=ep.spec.url,
                api_key_env=ep.spec.api_key_env,
                model=ep.info.model,
                extra=ep.extra,
                min_field=ep.min_field,
                label=ep.spec.label,
                bucket=bucket,
                fit=run.fits.get(bucket),
                step=step,
                repeat=repeat,
                concurrency=concurrency,
                rate=rate,
                worker=w,
                workers=n,
                slots=slots,
                requests=requests,
                warmup_requests=share(plan.warmup_requests, w, n),
                out=str(parts / f"part-s{position:04d}-w{w:02d}.parquet"),
            )
        )
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "switchover.bench.worker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=ANSWER_LIMIT,
        )
        for _ in specs
    ]
    try:
        for proc, spec in zip(procs, specs, strict=True):
            _send(proc, spec.model_dump_json().encode())
        for proc in procs:
            await _line(proc, READY_S)
        start_ns = time.perf_counter_ns() + LEAD_NS
        for proc in procs:
            _send(proc, {"go": start_ns})
        bound = step_bound_s(
            plan.duration_s, (plan.requests or 0) + plan.warmup_requests, plan.timeout_s, concurrency, rate
        )
        results = [await _line(proc, bound) for proc in procs]
    except BaseException:
        for proc in procs:  # Ctrl-C or a broken worker: the others stop issuing and write what finished
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for proc in procs:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 10)
        raise
    for proc in procs:
        await proc.wait()
    loads = []
    for spec, res in zip(specs, results, strict=True):
        part = StepAccumulator.from_dict(res["acc"], plan.seed)
        st = part.steady()
        loads.append(
            WorkerLoad(
                worker=spec.worker,
                target=st.target,
                achieved=st.achieved,
                reached=st.reached,
                requests=part.measured,
                failed=part.measured - part.ok,
                stopped=res["stopped"],
            )
        )
        acc.merge(part)
        ep.finished += part.rows
        ep.failed += part.measured - part.ok
        if res.get("stamps"):
            run.worker_stamps.add(str(res["stamps"]))
    return loads


__all__ = ["run_step_workers"]
