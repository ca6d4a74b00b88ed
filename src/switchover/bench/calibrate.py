"""The client's own ceiling: switchover's load generator (same scheduler, same wire client) against the
zero-work server. A step that used more than 70% of this ceiling measured the client as much as the engine,
so the report flags it."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator

from switchover.bench.scheduler import StepBounds, StopFlag, run_concurrency
from switchover.errors import SwitchoverError
from switchover.evidence.bench import Calibration
from switchover.measure.percentiles import percentile
from switchover.subproc import stop
from switchover.testing.zerowork import ZeroWorkServer
from switchover.wire import EngineClient, RequestRecord, Timeouts


@contextlib.asynccontextmanager
async def zero_server(*, in_process: bool, chunks: int, itl_ms: float = 0.0) -> AsyncIterator[str]:
    """Yield the base URL of a zero-work server, in this event loop or in a child process."""
    if in_process:
        async with ZeroWorkServer(chunks, itl_ms / 1000) as srv:
            yield srv.url
        return
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "switchover.testing",
            "zero",
            "--port",
            "0",
            "--chunks",
            str(chunks),
            "--itl-ms",
            str(itl_ms),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), timeout=30)
        if not line.strip().isdigit():
            raise SwitchoverError("the zero-work server did not start")
        yield f"http://127.0.0.1:{int(line)}"
    finally:
        stop(proc, grace_s=5)


def timing_errors_us(records: list[RequestRecord]) -> list[float]:
    """Client arrival minus the server's send stamp (the event text), per chunk, in µs."""
    out = []
    for r in records:
        for t, s in zip(r.chunk_ns, r.chunk_text, strict=False):
            head = s.strip()
            if head.isdigit():
                out.append((t - int(head)) / 1000)
    return out


async def measure(
    url: str, *, concurrency: int, chunks: int, duration_s: float, warmup_s: float = 0.3, api: str = "completions"
) -> Calibration:
    """Drive `url` at `concurrency` for `duration_s` and report what the client sustained."""
    stop = StopFlag()
    async with EngineClient(
        url, timeouts=Timeouts(connect=5, first_byte=30, idle=30, total=60), max_connections=max(concurrency, 1)
    ) as client:
        body = {"model": "zero", "prompt": "x", "max_tokens": chunks, "stream": True}

        async def send(_: int) -> RequestRecord:
            return await client.generate(api, body)  # type: ignore[arg-type]

        sent = await run_concurrency(send, concurrency, StepBounds(duration_s=duration_s, warmup_s=warmup_s), stop)
        stamps = client.chunk_stamps()
    measured = [s.record for s in sent if not s.warmup]
    ok = [r for r in measured if r.ok]
    if not ok:
        first = next((r.failure.message for r in measured if r.failure), "no request finished")
        raise SwitchoverError(f"calibration failed: {first}")
    t0 = min(r.send_ns for r in measured)
    t1 = max(r.end_ns or r.send_ns for r in measured)
    window = (t1 - t0) / 1e9
    n_chunks = sum(len(r.chunk_ns) for r in ok)
    errs = timing_errors_us(ok)
    cps = n_chunks / window
    return Calibration(
        req_per_s=len(ok) / window,
        chunks_per_s=cps,
        us_per_chunk=1e6 / cps if cps else float("nan"),
        concurrency=concurrency,
        chunks_per_request=chunks,
        requests=len(ok),
        duration_s=window,
        errors=len(measured) - len(ok),
        timing_error_p50_us=percentile(errs, 50) if errs else None,
        timing_error_p99_us=percentile(errs, 99) if errs else None,
        chunk_stamps=stamps,
    )


async def calibrate(
    *, concurrency: int = 64, chunks: int = 128, duration_s: float = 3.0, in_process: bool = False, itl_ms: float = 0.0
) -> Calibration:
    """Ceiling of this client on this machine (zero-work server in a child process unless `in_process`)."""
    t = time.monotonic()
    async with zero_server(in_process=in_process, chunks=chunks, itl_ms=itl_ms) as url:
        cal = await measure(url, concurrency=concurrency, chunks=chunks, duration_s=duration_s)
    if not itl_ms:  # all events of a response leave in one write: their stamps say nothing about timing
        cal.timing_error_p50_us = cal.timing_error_p99_us = None
    where = "in this process" if in_process else "in a child process"
    cal.note = (
        f"zero-work server {where}{f', {itl_ms:g} ms between events' if itl_ms else ''}; "
        f"took {time.monotonic() - t:.1f} s"
    )
    return cal
