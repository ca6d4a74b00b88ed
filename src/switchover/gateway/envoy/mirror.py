"""Envoy's mirrored copies, measured as the built-in gateway measures its shadow: in the live plane Envoy mirrors
to switchover's control endpoint (not to new), which replays the copy on new through the same Shadow the built-in
gateway uses (streamed, timed by the bench's formulas, credentials left out, max_tokens clamped, at most
shadow.max_concurrency at once) and writes a shadow row of the same schema once the primary's access-log line has
said how the primary went. Envoy mirrors every request of the route; a copy whose primary was routed to new is
dropped here (cancelled if running), as the built-in gateway never mirrors those.

A copy and its primary's log line meet by request id in either order; each side waits in a bounded table.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any

import orjson

from switchover.config.gateway import ShadowConfig
from switchover.gateway.ledger import Ledger
from switchover.gateway.shadow import GENERATION_PATHS, Shadow, shadow_body
from switchover.ledger_record import RequestRow, ShadowResult, ShadowRow

MAX_WAITING = 10_000  # primaries and mirror results held for their other half, each


def _bounded_put(table: OrderedDict[str, Any], key: str, value: Any) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > MAX_WAITING:
        table.popitem(last=False)


class MirrorJoin:
    """Runs the mirrored copies on new and pairs each result with its primary's row."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.shadow = Shadow()
        self.running: dict[str, asyncio.Task[ShadowResult]] = {}
        self.results: OrderedDict[str, ShadowResult] = OrderedDict()
        self.primaries: OrderedDict[str, ShadowRow] = OrderedDict()  # the primary's side of its shadow row
        self.written = 0

    def copy(
        self,
        cfg: ShadowConfig,
        new_url: str,
        model: str | None,
        path: str,
        request_id: str,
        body: bytes,
        connect_timeout_s: float,
    ) -> str:
        """Start the mirror of one copy Envoy sent; returns what happened (for logs and tests)."""
        if path.partition("?")[0] not in GENERATION_PATHS:
            return "not a generation path"
        primary = self.primaries.get(request_id)
        if primary is not None and primary.routed == "new":
            return "primary went to new"
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            return "not JSON"
        if not isinstance(obj, dict):
            return "not a JSON object"
        result = self.shadow.start(
            cfg,
            new_url + path,
            "new",
            shadow_body(obj, cfg.model or model, cfg.max_tokens_clamp),
            {"Content-Type": "application/json"},
            connect_timeout_s,
        )
        if isinstance(result, ShadowResult):
            self._done(request_id, result)
            return "dropped"
        self.running[request_id] = result
        result.add_done_callback(lambda task: self._finished(request_id, task))
        return "started"

    def _finished(self, request_id: str, task: asyncio.Task[ShadowResult]) -> None:
        self.running.pop(request_id, None)
        if task.cancelled():
            return  # dropped on purpose (its primary went to new)
        exc = task.exception()
        self._done(request_id, ShadowResult(upstream="new", dropped=False, error="cancelled") if exc else task.result())

    def _done(self, request_id: str, result: ShadowResult) -> None:
        primary = self.primaries.pop(request_id, None)
        if primary is None:
            _bounded_put(self.results, request_id, result)
        elif primary.routed != "new":
            self._write(primary, result)

    def primary(self, row: RequestRow) -> bool:
        """The primary's row, before it is written: True (set `shadowed`) when a mirror of it ran or runs."""
        rid = row.request_id
        if row.routed == "new":
            task = self.running.pop(rid, None)
            if task is not None:
                task.cancel()
            self.results.pop(rid, None)
            _bounded_put(self.primaries, rid, ShadowRow.of(row))  # a copy arriving later is dropped
            return False
        side = ShadowRow.of(row)
        result = self.results.pop(rid, None)
        if result is not None:
            self._write(side, result)
            return True
        _bounded_put(self.primaries, rid, side)
        return rid in self.running

    def _write(self, primary: ShadowRow, result: ShadowResult) -> None:
        primary.ts, primary.shadow = time.time(), result
        self.ledger.write_shadow(primary)
        self.written += 1

    async def close(self) -> None:
        await self.shadow.close()
