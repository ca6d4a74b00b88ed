"""Where the request path's ledger rows go: the ledger file, with a failed write counted in `ledger_errors` and
logged (never raised into a request), and each mirror's shadow row written when the mirror ends."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from switchover.gateway.ledger import Ledger
from switchover.gateway.metrics import GatewayMetrics
from switchover.ledger_record import RequestRow, ShadowResult, ShadowRow

log = logging.getLogger("switchover.gateway")
Mirror = asyncio.Future[ShadowResult] | ShadowResult
"""A running mirror, or the result of one that never ran (dropped)."""


class LedgerSink:
    """Writes request rows now and shadow rows when their mirrors end."""

    def __init__(self, ledger: Ledger, metrics: GatewayMetrics) -> None:
        self.ledger = ledger
        self.metrics = metrics
        self._mirrors: set[asyncio.Future[ShadowResult]] = set()

    def write(self, row: RequestRow) -> None:
        """One request row (the row is not validated: RequestRow's fields are the schema's)."""
        try:
            self.ledger.write_row(row)
        except Exception:
            self.metrics.ledger_errors.inc()
            log.exception("ledger row %s could not be written", row.request_id)

    def shadow_later(self, mirror: Mirror, row: RequestRow) -> None:
        """Write the mirror's shadow row when it ends, with the primary's fields as `row` holds them now (its own
        row is already written)."""
        shadow = ShadowRow.of(row)
        if isinstance(mirror, asyncio.Future):
            self._mirrors.add(mirror)
            mirror.add_done_callback(lambda fut: self._ended(shadow, fut))
        else:
            self._write_shadow(shadow, mirror)

    def _ended(self, shadow: ShadowRow, fut: asyncio.Future[ShadowResult]) -> None:
        self._mirrors.discard(fut)
        result = None if fut.cancelled() or fut.exception() else fut.result()
        if result is None:
            result = ShadowResult(upstream="new", dropped=False, error="cancelled")
        self.metrics.child(self.metrics.shadow, "error" if result.error else "ok").inc()
        self._write_shadow(shadow, result)

    def _write_shadow(self, shadow: ShadowRow, result: ShadowResult) -> None:
        shadow.ts = time.time()
        shadow.shadow = result
        try:
            self.ledger.write_shadow(shadow)
        except Exception:
            self.metrics.ledger_errors.inc()
            log.exception("shadow row %s could not be written", shadow.request_id)

    async def settle(self) -> None:
        """Wait for the mirrors still running (the shadow closes them first at shutdown): their rows are written."""
        for fut in list(self._mirrors):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await fut
