"""Small helpers shared by the probe modules."""

from __future__ import annotations

from typing import Any

from switchover.probe.report import Observation
from switchover.wire import RequestRecord


def rejected(rec: RequestRecord) -> dict[str, Any] | None:
    """{'status': N, 'message': ...} when the server refused the request, else None."""
    if rec.failure is None:
        return None
    body = rec.failure.body
    return {"status": rec.failure.status, "kind": rec.failure.kind.value,
            "message": (body.message if body else rec.failure.message)[:200]}


def unusable(rec: RequestRecord, what: str) -> Observation | None:
    """A failed observation when a request that should have worked did not."""
    rej = rejected(rec)
    if rej is None:
        return None
    return Observation.failed(f"{what} failed: {rec.failure.message if rec.failure else ''}"[:240], **rej)


def status_text(rec: RequestRecord) -> str:
    return "accepted" if rec.failure is None else f"rejected (HTTP {rec.failure.status})"
