"""The wire client's own cost per streamed chunk, at 1 and 256 concurrent streams.

The server is switchover.testing zero in its own process (pinned to another core when there is one), so
what is measured is the client: CPU time of this process per chunk received (µs), plus chunks/s and req/s.
Later benchmarks quote these as the client's ceiling.

    python bench/wire_overhead.py [--seconds 5] [--chunks 64] [--concurrency 1,256]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time

from switchover.gctune import quiet_gc
from switchover.subproc import stop
from switchover.wire import EngineClient, Timeouts


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _measure(url: str, concurrency: int, seconds: float, max_requests: int) -> dict[str, float]:
    body = {"model": "zero", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    chunks = requests = errors = 0
    stop_at = time.perf_counter() + seconds
    async with EngineClient(
        url, timeouts=Timeouts(connect=2, first_byte=10, idle=10, total=30), max_connections=concurrency
    ) as client:
        await client.chat(**{"messages": body["messages"], "model": "zero", "stream": True})  # warm the pool

        async def worker() -> None:
            nonlocal chunks, requests, errors
            while time.perf_counter() < stop_at and requests < max_requests:
                rec = await client.generate("chat", body)
                requests += 1
                if rec.failure is not None:
                    errors += 1
                chunks += len(rec.chunk_ns)

        cpu0, wall0 = _cpu_s(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        cpu, wall = _cpu_s() - cpu0, time.perf_counter() - wall0
    return {
        "concurrency": concurrency,
        "requests": requests,
        "errors": errors,
        "chunks": chunks,
        "wall_s": wall,
        "cpu_s": cpu,
        "us_per_chunk": cpu / max(chunks, 1) * 1e6,
        "chunks_per_s": chunks / wall,
        "req_per_s": requests / wall,
        "cpu_util": cpu / wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0, help="duration of each step")
    ap.add_argument("--chunks", type=int, default=64, help="content chunks per response")
    ap.add_argument("--concurrency", default="1,256", help="comma-separated stream counts")
    ap.add_argument("--max-requests", type=int, default=200_000, help="hard cap per step")
    args = ap.parse_args()

    cores = sorted(os.sched_getaffinity(0))
    server = subprocess.Popen(
        [sys.executable, "-m", "switchover.testing", "zero", "--port", "0", "--chunks", str(args.chunks)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())  # the server prints its port when it listens
        if len(cores) >= 2:  # client on one core, server on another
            os.sched_setaffinity(server.pid, {cores[-1]})
            os.sched_setaffinity(0, {cores[0]})
        try:
            import uvloop

            runner = uvloop.run
        except ImportError:
            runner = asyncio.run
        url = f"http://127.0.0.1:{port}"
        quiet_gc()  # as `switchover bench` runs (gctune.py)
        print(
            f"wire client overhead vs a zero-work SSE server ({args.chunks} chunks/response, "
            f"{args.seconds:g} s per step, client pinned to core {cores[0]}, server to core {cores[-1]})"
        )
        print(
            f"{'streams':>8} {'requests':>9} {'errors':>6} {'chunks/s':>10} {'req/s':>8} {'µs/chunk':>9} "
            f"{'client CPU':>10}"
        )
        for c in (int(x) for x in args.concurrency.split(",")):
            r = runner(_measure(url, c, args.seconds, args.max_requests))
            print(
                f"{c:>8} {r['requests']:>9.0f} {r['errors']:>6.0f} {r['chunks_per_s']:>10.0f} "
                f"{r['req_per_s']:>8.0f} {r['us_per_chunk']:>9.2f} {r['cpu_util']:>9.0%}"
            )
    finally:
        stop(server, grace_s=5)


if __name__ == "__main__":
    main()
