"""The gateway's fault matrix: many requests through a gateway whose two fake upstreams fail at random (bounded in
count and time), for tests/gateway/test_reliability.py and bench/gateway_reliability.py."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import orjson

from switchover.testing.engine import FakeEngine

DEFAULT_MIX: dict[str, float] = {
    "ok": 40,
    "status:503": 8,
    "status:500": 4,
    "status:400": 2,
    "refuse": 6,
    "hang:1.5": 4,
    "die_mid:0": 4,
    "die_mid:2": 6,
    "drip:5": 6,
    "malformed:0": 3,
    "malformed:2": 5,
    "error_event:1": 4,
    "truncate:2": 4,
    "hang:0.05": 4,
}


async def fault_matrix(
    run_dir: Any, n: int, concurrency: int = 32, seed: int = 1, mix: dict[str, float] | None = None
) -> dict[str, Any]:
    """Send `n` requests (stream and not, chat and completions) through a gateway whose two upstreams fail at
    random; returns counts to check that every request got exactly one ledger row and none hung."""
    import aiohttp

    from switchover.config import Migration
    from switchover.gateway.app import Gateway
    from switchover.gateway.server import running as running_gateway
    from switchover.ledger_files import read_requests

    mix = mix or DEFAULT_MIX
    old, new = FakeEngine("old"), FakeEngine("new")
    old.script(weights=mix, seed=seed)
    new.script(weights=mix, seed=seed + 1)
    timeouts = {"connect_ms": 500, "first_byte_ms": 1000, "idle_ms": 500}
    bound_s = (300 + 1000 + 500 * 2) / 1000 + 1.0  # fallback wait + old first byte + idle gaps + 1 s slack
    rng = random.Random(seed)
    async with old.running() as old_url, new.running() as new_url:
        m = Migration.model_validate(
            {
                "old": {"url": old_url, "engine": "vllm"},
                "new": {"url": new_url, "engine": "llamacpp"},
                "gateway": {
                    "weight": 50,
                    "run_dir": str(run_dir),
                    "fallback": {"on_timeout_ms": 300},
                    "timeouts": timeouts,
                    "kill_switch": {"enabled": False},
                    "shadow": {"percent": 10, "max_concurrency": 4, "timeout_ms": 1500},
                },
            }
        )
        gw = Gateway(m, None, run_dir=run_dir)
        durations: list[float] = []
        statuses: dict[int, int] = {}
        sent: list[str] = []
        sem = asyncio.Semaphore(concurrency)
        lag = 0.0

        async def watch_lag() -> None:  # CPU starvation delays everything; measure it to judge the bound
            nonlocal lag
            while True:
                t = time.perf_counter()
                await asyncio.sleep(0.01)
                lag = max(lag, time.perf_counter() - t - 0.01)

        watcher = asyncio.ensure_future(watch_lag())
        t_start = time.perf_counter()
        async with (
            running_gateway(gw, port=0) as url,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as http,
        ):

            async def one(i: int) -> None:
                rid = f"req-{i:06d}"
                sent.append(rid)
                stream = rng.random() < 0.6
                chat = rng.random() < 0.5
                path = "/v1/chat/completions" if chat else "/v1/completions"
                body: dict[str, Any] = {"model": "fake-model", "max_tokens": rng.randint(1, 6), "stream": stream}
                body["messages" if chat else "prompt"] = [{"role": "user", "content": "hi"}] if chat else "hi"
                async with sem:
                    t0 = time.perf_counter()
                    try:
                        async with http.post(
                            url + path,
                            data=orjson.dumps(body),
                            timeout=aiohttp.ClientTimeout(total=bound_s + 5),
                            headers={"X-Request-Id": rid, "x-tenant-id": f"t{i % 97}"},
                        ) as r:
                            await r.read()
                            statuses[r.status] = statuses.get(r.status, 0) + 1
                    except (aiohttp.ClientError, TimeoutError) as exc:
                        key = -1 if not isinstance(exc, TimeoutError) else -2
                        statuses[key] = statuses.get(key, 0) + 1
                    durations.append(time.perf_counter() - t0)

            await asyncio.gather(*(one(i) for i in range(n)))
            elapsed = time.perf_counter() - t_start
            for _ in range(100):  # rows of requests with a mirror still running are written when it ends
                if gw.ledger.written >= n:
                    break
                await asyncio.sleep(0.05)
        watcher.cancel()
        rows = list(read_requests(run_dir))  # request rows only: shadow rows repeat a request_id
    ids = [r.request_id for r in rows]  # max_duration_s below: None when no request was sent (nothing measured)
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
    return {
        "requests": n,
        "rows": len(rows),
        "missing": len(set(sent) - set(ids)),
        "duplicates": len(ids) - len(set(ids)),
        "outcomes": outcomes,
        "client_statuses": statuses,
        "max_duration_s": max(durations, default=None),
        "bound_s": bound_s,
        "elapsed_s": elapsed,
        "max_loop_lag_s": lag,
        "over_bound": sum(d >= bound_s for d in durations),
        "fallbacks": sum(1 for r in rows if r.fallback_reason),
    }
