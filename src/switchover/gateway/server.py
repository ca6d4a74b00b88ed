"""Running a Gateway: bind, handle SIGHUP (reload) and SIGTERM/SIGINT (drain, then exit), publish its address."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
from aiohttp import web

from switchover.config import load_migration
from switchover.errors import BadInput
from switchover.gateway.app import MAX_BODY, Gateway
from switchover.gateway.front import serve_front
from switchover.gctune import quiet_gc

log = logging.getLogger("switchover.gateway")
STATE_FILE = "gateway.json"


@contextlib.asynccontextmanager
async def running(gateway: Gateway, host: str | None = None, port: int | None = None) -> AsyncIterator[str]:
    """Serve `gateway` in this event loop on its own HTTP/1.1 front (gateway/front.py; `front: aiohttp` in the
    config serves through aiohttp instead); yields its base URL. Disconnecting clients cancel their handler."""
    if gateway.live.gw.front == "raw":
        async with _running_raw(gateway, host, port) as url:
            yield url
        return
    listen = gateway.live.gw.listen
    runner = web.AppRunner(gateway.app(), access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, host or listen.host, listen.port if port is None else port, backlog=2048)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise BadInput(f"gateway.listen: cannot bind {listen.host}:{listen.port}: {exc.strerror}") from None
    server = site._server
    assert server is not None
    bound = server.sockets[0].getsockname()  # type: ignore[attr-defined]
    url = f"http://{bound[0]}:{bound[1]}"
    try:
        yield url
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def _running_raw(gateway: Gateway, host: str | None, port: int | None) -> AsyncIterator[str]:
    listen = gateway.live.gw.listen
    await gateway._startup(None)
    try:
        try:
            front = serve_front(gateway.dispatch, host or listen.host, listen.port if port is None else port,
                                max_body=MAX_BODY)
            server = await front.__aenter__()
        except OSError as exc:
            raise BadInput(f"gateway.listen: cannot bind {listen.host}:{listen.port}: {exc.strerror}") from None
        try:
            bound = server.sockets[0].getsockname()
            yield f"http://{bound[0]}:{bound[1]}"
        finally:
            await front.__aexit__(None, None, None)
    finally:
        await gateway._cleanup(None)


def setup_logging(run_dir: Path, verbose: bool = False) -> None:
    """Log lines to <run_dir>/gateway.log and stderr (never headers, bodies or keys)."""
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger("switchover")
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for h in (logging.FileHandler(run_dir / "gateway.log"), logging.StreamHandler()):
        h.setFormatter(fmt)
        root.addHandler(h)


async def serve(config_path: Path, *, log_prompts: bool = False, verbose: bool = False) -> int:
    """Run until SIGTERM/SIGINT; then drain. Returns the number of requests cut off by the drain limit."""
    migration = load_migration(config_path)
    if migration.gateway is None:
        raise BadInput(f"{config_path}: no `gateway:` section", hint="see docs/gateway.md for an example")
    gateway = Gateway(migration, config_path, log_prompts=log_prompts)
    setup_logging(gateway.run_dir, verbose)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, gateway.reload)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    state = gateway.run_dir / STATE_FILE
    async with running(gateway) as url:
        quiet_gc()  # the proxied path allocates hundreds of objects per request (gctune.py)
        state.write_bytes(orjson.dumps({"url": url, "pid": os.getpid(), "config": str(config_path.resolve()),
                                        "ledger_dir": str(gateway.run_dir)}))
        g = gateway.live.gw
        log.info("gateway on %s: old %s, new %s, weight %g%%, rollback %s, shadow %g%%; ledger %s",
                 url, gateway.live.urls["old"], gateway.live.urls["new"], g.weight, g.rollback, g.shadow.percent,
                 gateway.run_dir)
        await stop.wait()
        left = await gateway.drain()
        if left:
            log.warning("drain limit reached with %d requests in flight; they are cut off", left)
        else:
            log.info("drained; exiting")
    for path in (state, gateway.run_dir / "admin.token"):
        with contextlib.suppress(OSError):
            path.unlink()
    return left
