"""The pass-through pool does not hold a burst's connections forever: idle ones past keepalive_s are dropped when
another goes idle, and at most max_idle per origin are kept."""

from __future__ import annotations

import asyncio

from switchover.testing import await_until
from switchover.wire.passthrough import H1Pool
from tests.wire.test_passthrough import Scripted, serve

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


async def _burst(pool: H1Pool, url, n: int) -> None:  # type: ignore[no-untyped-def]
    async def one() -> None:
        resp = await pool.request("GET", url, [], None, 2.0)
        assert await resp.read() == b"ok"
        resp.release()

    await asyncio.gather(*(one() for _ in range(n)))


async def test_at_most_max_idle_connections_are_kept_per_origin():
    script = Scripted([([OK], False)] * 40)
    pool = H1Pool(max_idle=3)
    async with serve(script) as url:
        await _burst(pool, url, 10)
        assert script.connections == 10 and pool.idle_count() <= 3
        await await_until(lambda: script.closed >= 7, 5, "the server seeing the extra idle connections closed")
    pool.close()


async def test_idle_connections_past_keepalive_are_dropped_when_another_goes_idle():
    script = Scripted([([OK], False)] * 40)
    pool = H1Pool(keepalive_s=30.0)
    async with serve(script) as url:
        await _burst(pool, url, 6)
        assert pool.idle_count() == 6
        for conns in pool._idle.values():
            for c in conns[:-1]:
                c.used -= 60.0  # five went idle a minute ago (no sleep: the clock is the conn's own stamp)
        await _burst(pool, url, 1)  # reuses the freshest; going idle again sweeps the stale five
        assert pool.idle_count() == 1
        await await_until(lambda: script.closed >= 5, 5, "the server seeing the stale connections closed")
    pool.close()
