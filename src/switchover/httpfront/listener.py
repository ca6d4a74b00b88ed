"""Listening for clients: the state all connections share (limits and the counts they are checked against) and
the server's life (start, and on exit: stop listening, close connections, cancel what still runs)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
from typing import Any

from switchover.config.gateway import LimitsConfig
from switchover.httpfront.budget import MemoryBudget
from switchover.httpfront.front import FrontConnection, Handler, RefusedHook
from switchover.httpfront.messages import FrontRequest

log = logging.getLogger("switchover.httpfront")
FD_RESERVE = 64  # file descriptors kept for upstream connections' peaks, the ledger, logs


def fd_budget(wanted: int) -> int:
    """Client connections the process can hold: `wanted`, capped so that each may also hold an upstream
    connection within the file-descriptor limit (the soft limit is raised to the hard one first)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, (soft - FD_RESERVE) // 2))


class Front:
    """What all connections share: the handler, the limits, and the counts the limits are checked against."""

    def __init__(
        self,
        handler: Handler,
        limits: LimitsConfig,
        on_refused: RefusedHook | None = None,
        budget: MemoryBudget | None = None,
    ) -> None:
        self.handler = handler
        self.limits = limits
        self.on_refused = on_refused
        self.max_connections = fd_budget(limits.max_connections)
        if self.max_connections < limits.max_connections:
            log.warning(
                "limits.max_connections %d lowered to %d by the file-descriptor limit",
                limits.max_connections,
                self.max_connections,
            )
        self.conns: set[FrontConnection] = set()
        self.per_peer: dict[str, int] = {}
        self.budget = budget or MemoryBudget(limits.memory_budget_bytes)  # request bodies draw from it
        self.closing_all = False

    def refused(self, reason: str, status: int, request: FrontRequest | None = None) -> None:
        if self.on_refused is not None:
            try:
                self.on_refused(reason, status, request)
            except Exception:  # counting must never take the front down
                log.exception("refusal hook failed")


@contextlib.asynccontextmanager
async def serve_front(
    handler: Handler,
    host: str,
    port: int,
    limits: LimitsConfig | None = None,
    on_refused: RefusedHook | None = None,
    budget: MemoryBudget | None = None,
) -> Any:
    """Listen on host:port; yields (server, front). On exit: stop listening, close connections, cancel what
    still runs."""
    loop = asyncio.get_running_loop()
    front = Front(handler, limits or LimitsConfig(), on_refused, budget)
    server = await loop.create_server(lambda: FrontConnection(front), host, port, backlog=2048)
    try:
        yield server, front
    finally:
        server.close()
        front.closing_all = True
        conns = list(front.conns)
        tasks = [c.task for c in conns if c.task is not None and not c.task.done()]
        for c in conns:
            if c.transport is not None:
                c.transport.close()
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
