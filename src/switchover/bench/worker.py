"""One load-generating worker process of a multi-process step (`bench --workers N`, bench/workers.py).

Protocol on stdin/stdout, one JSON object per line: the parent sends the step (`WorkerSpec`); the worker connects,
answers {"ready": true}, waits for {"go": start_ns} (a `perf_counter_ns` time, the same clock in every process of
the machine), sends its share of the step's one schedule from then on, writes its rows to its own Parquet file and
answers with its accumulator ({"acc": ..., "stamps": ..., "stopped": ...}). SIGTERM (the parent's Ctrl-C) stops
issuing; what finished is still written.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from switchover.bench.accumulate import StepAccumulator
from switchover.bench.rows import DICT_COLUMNS, ROW_SCHEMA, STAT_COLUMNS, RowSink, row_from_record
from switchover.bench.scheduler import Sent, StepBounds, StopFlag, run_concurrency, run_schedule
from switchover.bench.stats import Slo
from switchover.bench.workload import PromptMaker, iter_arrival_offsets, load_dataset, request_body
from switchover.evidence.bench import BenchPlan
from switchover.evidence.bench_findings import BucketFit
from switchover.runs import RecordWriter
from switchover.wire import EngineClient, RequestRecord, Timeouts


class WorkerSpec(BaseModel):
    """Everything a worker needs for its share of one step."""

    plan: BenchPlan
    url: str
    api_key_env: str | None
    model: str
    extra: dict[str, Any]
    min_field: str | None
    label: str
    bucket: str
    fit: BucketFit | None
    step: int
    repeat: int
    concurrency: int | None  # the step's total (labels); this worker keeps `slots` in flight
    rate: float | None  # the step's total; this worker sends every `workers`-th arrival of the one schedule
    worker: int
    workers: int
    slots: int | None
    requests: int | None  # this worker's share of the measured requests
    warmup_requests: int
    out: str  # its Parquet file


def share(total: int, worker: int, workers: int) -> int:
    """Worker `worker`'s part of `total` split as evenly as possible (the first ones get the remainder)."""
    return total // workers + (1 if worker < total % workers else 0)


async def run_worker(spec: WorkerSpec, go: Any) -> dict[str, Any]:
    """Connect, report ready through `go` (an async callable returning the start time), run, summarise."""
    plan = spec.plan
    t = Timeouts(connect=5, first_byte=plan.timeout_s, idle=min(60.0, plan.timeout_s), total=plan.timeout_s)
    client = EngineClient(
        spec.url, api_key_env=spec.api_key_env, timeouts=t, max_connections=(spec.slots or plan.max_inflight or 256) + 8
    )
    dataset = load_dataset(plan.dataset, plan.output_tokens) if plan.dataset else None
    trace = dataset is not None and dataset[0].at_s is not None
    slo = Slo(ttft_ms=plan.slos.ttft_p99_ms, tpot_ms=plan.slos.tpot_p99_ms, e2e_ms=plan.slos.e2e_p99_ms)
    labels = {
        "endpoint": spec.label,
        "step": spec.step,
        "repeat": spec.repeat,
        "bucket": spec.bucket,
        "concurrency": spec.slots if spec.concurrency else None,
        "rate": spec.rate / spec.workers if spec.rate else None,
    }
    acc = StepAccumulator(slo=slo, labels=labels, seed=plan.seed + spec.worker)
    writer = RecordWriter(Path(spec.out), ROW_SCHEMA, redacted=False, statistics=STAT_COLUMNS, dictionary=DICT_COLUMNS)
    sink = RowSink(writer)
    stop = StopFlag()
    n, w = spec.workers, spec.worker
    prompts: dict[int, Any] = {}
    retok = None
    if plan.tokenizer:
        from switchover.bench.endpoints import load_tokenizer

        retok = load_tokenizer(plan.tokenizer)

    make = PromptMaker(plan, spec.fit, dataset, (spec.bucket, spec.step, spec.repeat))

    async def send(j: int) -> RequestRecord:
        i = w + n * j  # request numbers interleave: worker w sends w, w + N, w + 2N ... of the one schedule
        p = make(i)
        prompts[j] = p
        return await client.generate(p.api, request_body(plan, p, spec.model, spec.extra, spec.min_field))

    def on_done(s: Sent) -> None:
        p = prompts.pop(s.index, None)
        row = row_from_record(
            s.record,
            endpoint=spec.label,
            step=spec.step,
            repeat=spec.repeat,
            concurrency=spec.concurrency,
            rate=spec.rate,
            bucket=spec.bucket,
            isl_target=p.isl_target if p else None,
            osl_target=p.max_tokens if p else None,
            index=w + n * s.index,
            warmup=s.warmup,
            sched_ns=s.sched_ns,
        )
        if retok is not None and s.record.ok:
            row["retok_tokens"] = len(retok.encode(row["output_text"] or "", add_special_tokens=False).ids)
        acc.add(row)
        sink.add(row)

    bounds = StepBounds(
        requests=spec.requests,
        duration_s=None if trace else plan.duration_s,
        warmup_requests=0 if trace else spec.warmup_requests,
        warmup_s=0.0 if trace else plan.warmup_s,
    )
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set, "interrupted (Ctrl-C)")
    try:
        start_ns = int(await go())
        await asyncio.sleep(max(start_ns - time.perf_counter_ns(), 0) / 1e9)
        if spec.concurrency:
            await run_concurrency(send, spec.slots or 1, bounds, stop, on_done, keep=False, start_ns=start_ns)
        else:
            offsets: Iterable[float]
            if trace and dataset:
                offsets = [(p.at_s or 0.0) / plan.trace_speed for p in dataset]
            else:
                assert spec.rate is not None
                offsets = iter_arrival_offsets(plan.arrival, spec.rate, plan.seed, plan.burstiness)
            mine = itertools.islice(offsets, w, None, n)  # the one central schedule, every N-th arrival
            cap = None if plan.max_inflight is None else max(1, share(plan.max_inflight, w, n))
            await run_schedule(send, mine, bounds, stop, on_done, cap, keep=False, start_ns=start_ns)
    finally:
        sink.flush()
        writer.close()
        stamps = client.chunk_stamps()
        await client.close()
    return {"acc": acc.to_dict(), "stamps": stamps, "stopped": stop.reason}


def main() -> None:
    """`python -m switchover.bench.worker`: one spec line in, ready, go, one result line out."""
    from switchover.gctune import quiet_gc

    spec = WorkerSpec.model_validate_json(sys.stdin.readline())

    def say(obj: dict[str, Any]) -> None:
        sys.stdout.buffer.write(orjson.dumps(obj) + b"\n")
        sys.stdout.flush()

    async def go() -> int:
        say({"ready": True})
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        return int(orjson.loads(line)["go"])

    quiet_gc()
    try:
        import uvloop

        result = uvloop.run(run_worker(spec, go))
    except ImportError:  # pragma: no cover
        result = asyncio.run(run_worker(spec, go))
    say(result)


if __name__ == "__main__":
    main()
