"""Small helpers shared by the probe modules."""

from __future__ import annotations

from typing import Any

from switchover.probe.report import Observation
from switchover.wire import FailureKind, RequestRecord


def _failure_detail(rec: RequestRecord) -> dict[str, Any]:
    assert rec.failure is not None
    body = rec.failure.body
    return {"status": rec.failure.status, "kind": rec.failure.kind.value,
            "message": (body.message if body else rec.failure.message)[:200]}


def rejected(rec: RequestRecord) -> dict[str, Any] | None:
    """{'status': N, 'message': ...} when the server refused the request with an HTTP status, else None.
    A request that got no answer (timeout, refused connection, cut stream) is not a refusal: see `not_answered`."""
    if rec.failure is None or rec.failure.kind != FailureKind.HTTP_STATUS:
        return None
    return _failure_detail(rec)


def not_answered(rec: RequestRecord, what: str) -> Observation | None:
    """A failed observation when the request got no usable answer at all (timeout, connection, protocol, cut
    stream): nothing was observed, so nothing may be compared."""
    if rec.failure is None or rec.failure.kind == FailureKind.HTTP_STATUS:
        return None
    return Observation.failed(f"{what}: no answer ({rec.failure.message})"[:240], **_failure_detail(rec))


def unusable(rec: RequestRecord, what: str) -> Observation | None:
    """A failed observation when a request that should have worked did not."""
    if rec.failure is None:
        return None
    return Observation.failed(f"{what} failed: {rec.failure.message}"[:240], **_failure_detail(rec))


def status_text(rec: RequestRecord) -> str:
    return "accepted" if rec.failure is None else f"rejected (HTTP {rec.failure.status})"
