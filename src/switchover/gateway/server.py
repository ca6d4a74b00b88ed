"""Running a Gateway: bind, then take the run directory, handle SIGHUP (reload) and SIGTERM/SIGINT (drain, then
exit), publish its address."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator
from pathlib import Path

from switchover.config import Migration
from switchover.errors import BadInput
from switchover.gateway.app import Gateway
from switchover.gateway.state import ADDRESS_FILE, LogFile, write_gateway_file
from switchover.gctune import quiet_gc
from switchover.httpfront.listener import serve_front
from switchover.redaction import RedactFilter

log = logging.getLogger("switchover.gateway")


@contextlib.asynccontextmanager
async def running(gateway: Gateway, host: str | None = None, port: int | None = None) -> AsyncIterator[str]:
    """Serve `gateway` in this event loop; yields its base URL. The port is bound before any file of the run
    directory is touched, so a gateway that cannot bind changes nothing."""
    gw = gateway.live.gw
    listen_host, listen_port = host or gw.listen.host, gw.listen.port if port is None else port
    ctx = serve_front(gateway.dispatch, listen_host, listen_port, gw.limits, gateway.on_refused, gateway.budget)
    try:
        server, front = await ctx.__aenter__()
    except OSError as exc:
        raise BadInput(f"gateway.listen: cannot bind {listen_host}:{listen_port}: {exc.strerror or exc}") from None
    try:
        await gateway.start(front)
    except BaseException:
        await ctx.__aexit__(None, None, None)
        raise
    try:
        bound = server.sockets[0].getsockname()
        yield f"http://{bound[0]}:{bound[1]}"
    finally:
        try:
            await ctx.__aexit__(None, None, None)
        finally:
            await gateway.stop()


def setup_logging(run_dir: Path, verbose: bool = False) -> None:
    """Log lines to <run_dir>/gateway.log (appended through safefile: a planted link is refused) and stderr (never
    headers, bodies or keys)."""
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger("switchover")
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for h in (LogFile(run_dir), logging.StreamHandler()):
        h.setFormatter(fmt)
        h.addFilter(RedactFilter())  # a secret that reached a message by accident is masked before it is written
        root.addHandler(h)


async def serve(migration: Migration, config_path: Path, *, log_prompts: bool = False, verbose: bool = False) -> int:
    """Run until SIGTERM/SIGINT; then drain. Returns the number of requests cut off by the drain limit.

    `migration` is the file at `config_path`, loaded by the caller; the path is where hot reload reads it again."""
    if migration.gateway is None:
        raise BadInput(f"{config_path}: no `gateway:` section", hint="see docs/gateway.md for an example")
    gateway = Gateway(migration, config_path, log_prompts=log_prompts)
    setup_logging(gateway.run_dir, verbose)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    state = gateway.run_dir / ADDRESS_FILE
    async with running(gateway) as url:
        loop.add_signal_handler(signal.SIGHUP, gateway.reload)
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        quiet_gc()  # the proxied path allocates hundreds of objects per request (gctune.py)
        write_gateway_file(gateway.run_dir, url, config_path)
        g = gateway.live.gw
        log.info(
            "gateway on %s: old %s, new %s, weight %g%%, rollback %s, shadow %g%%; ledger %s",
            url,
            gateway.live.urls["old"],
            gateway.live.urls["new"],
            g.weight,
            g.rollback,
            g.shadow.percent,
            gateway.run_dir,
        )
        try:
            await stop.wait()
            cut = await gateway.drain()
            if not cut:
                log.info("drained; exiting")
        finally:
            with contextlib.suppress(OSError):
                state.unlink()
    return cut
