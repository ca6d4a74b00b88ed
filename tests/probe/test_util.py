"""A refusal (an HTTP status) is an observation; no answer at all is a failed probe, never "rejected: HTTP None"."""

from __future__ import annotations

import pytest

from switchover.probe.catalog._util import not_answered, rejected
from switchover.wire import FailureKind, RequestRecord
from switchover.wire.records import Failure


def _rec(failure: Failure | None) -> RequestRecord:
    rec = RequestRecord(api="chat", stream=False, model="m", started_wall=0.0, send_ns=0)
    rec.failure = failure
    return rec


@pytest.mark.parametrize(("failure", "is_rejection", "is_lost"), [
    (None, False, False),
    (Failure(FailureKind.HTTP_STATUS, "HTTP 400", 400), True, False),
    (Failure(FailureKind.TOTAL_TIMEOUT, "total timeout after 5 s"), False, True),
    (Failure(FailureKind.CONNECT, "connection refused"), False, True),
    (Failure(FailureKind.DISCONNECTED, "server closed the connection mid-response", 200), False, True),
])
def test_refusal_and_no_answer_are_told_apart(failure: Failure | None, is_rejection: bool, is_lost: bool) -> None:
    rec = _rec(failure)
    assert (rejected(rec) is not None) is is_rejection
    lost = not_answered(rec, "n=3")
    assert (lost is not None) is is_lost
    if lost is not None:
        assert lost.status == "failed" and "no answer" in lost.summary
