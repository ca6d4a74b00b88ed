"""Requests in flight, and the drain at shutdown: wait for them up to a limit, then cut the rest honestly.

A request cut while its answer streams gets an SSE error event and `[DONE]` (the relay sees its upstream closed
with the cut flag set); one cut before its answer started gets a 503. Either way its ledger row says
`drain_cutoff`, never that the client left.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from switchover.gateway.relay import Cutoff

CUT_GRACE_S = 2.0  # after cutting, how long the cut requests get to write their last event and ledger row


class Ticket(Cutoff):
    """One request in flight: its task, and the upstream response it relays once streaming."""

    __slots__ = ("streaming", "task")

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        super().__init__()
        self.task = task
        self.streaming: Any = None  # the Opened upstream response while the relay streams it


class InFlight:
    """The set of running requests; `drain()` waits for it to empty. `draining` is set when shutdown begins: from
    then on new requests are refused."""

    def __init__(self) -> None:
        self.tickets: set[Ticket] = set()
        self.draining = False
        self._empty = asyncio.Event()
        self._empty.set()

    def __len__(self) -> int:
        return len(self.tickets)

    def enter(self) -> Ticket:
        ticket = Ticket(asyncio.current_task())
        self.tickets.add(ticket)
        self._empty.clear()
        return ticket

    def leave(self, ticket: Ticket) -> None:
        self.tickets.discard(ticket)
        if not self.tickets:
            self._empty.set()

    async def wait_empty(self, seconds: float) -> bool:
        """True when nothing is in flight (now, or before `seconds` passed)."""
        if not self.tickets:
            return True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._empty.wait()
        return not self.tickets

    async def drain(self, seconds: float) -> int:
        """Wait up to `seconds` for the requests in flight, then cut those left; returns how many were cut."""
        if await self.wait_empty(seconds):
            return 0
        cut = list(self.tickets)
        for t in cut:
            t.cut = True
            if t.streaming is not None:
                t.streaming.close()  # the relay ends the stream with an error event
            elif t.task is not None and not t.task.done():
                t.task.cancel()  # the handler answers 503 and writes its row
        await self.wait_empty(CUT_GRACE_S)
        return len(cut)
