"""Small helpers shared by the probe modules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from switchover.probe.registry import ProbeEnded
from switchover.probe.report import Observation
from switchover.probe.values import rejected_value
from switchover.wire import FailureKind, RequestRecord

if TYPE_CHECKING:
    from switchover.probe.context import ProbeContext


def _failure_detail(rec: RequestRecord) -> dict[str, Any]:
    assert rec.failure is not None
    body = rec.failure.body
    return {
        "status": rec.failure.status,
        "kind": rec.failure.kind.value,
        "message": (body.message if body else rec.failure.message)[:200],
    }


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


def refusal(rec: RequestRecord, what: str) -> Observation | None:
    """No answer (a failed observation), or the server's refusal as what was observed (`rejected <status>`);
    None when the server answered."""
    if (lost := not_answered(rec, what)) is not None:
        return lost
    if (rej := rejected(rec)) is not None:
        return Observation(
            value=rejected_value(rej["status"]), summary=f"HTTP {rej['status']}: {rej['message'][:80]}", detail=rej
        )
    return None


def end_if(observation: Observation | None) -> None:
    """End the probe with this observation when there is one (what `not_answered`, `unusable` or `refusal` found):
    the runner records it as the probe's observation."""
    if observation is not None:
        raise ProbeEnded(observation)


async def send_ok(ctx: ProbeContext, what: str, prompt: str | None = None, **params: Any) -> RequestRecord:
    """Send a request that should work; when it did not, the probe ends with the failed observation."""
    rec = await ctx.send(prompt, **params)
    end_if(unusable(rec, what))
    return rec
