"""A refusal (an HTTP status) is an observation; no answer at all is a failed probe, never "rejected: HTTP None".
A helper that ends a probe early hands the runner exactly the observation it found; a crash stays a probe error."""

from __future__ import annotations

from typing import Any, cast

import pytest

from switchover.probe import Observation, Probe, Target, run_probes
from switchover.probe.catalog._util import end_if, not_answered, rejected, send_ok, unusable
from switchover.probe.context import ProbeContext
from switchover.probe.registry import ProbeEnded
from switchover.testing import Persona
from switchover.wire import FailureKind, RequestRecord
from switchover.wire.records import Failure
from tests.probe.conftest import serve


def _rec(failure: Failure | None) -> RequestRecord:
    rec = RequestRecord(api="chat", stream=False, model="m", started_wall=0.0, send_ns=0)
    rec.failure = failure
    return rec


@pytest.mark.parametrize(
    ("failure", "is_rejection", "is_lost"),
    [
        (None, False, False),
        (Failure(FailureKind.HTTP_STATUS, "HTTP 400", 400), True, False),
        (Failure(FailureKind.TOTAL_TIMEOUT, "total timeout after 5 s"), False, True),
        (Failure(FailureKind.CONNECT, "connection refused"), False, True),
        (Failure(FailureKind.DISCONNECTED, "server closed the connection mid-response", 200), False, True),
    ],
)
def test_refusal_and_no_answer_are_told_apart(failure: Failure | None, is_rejection: bool, is_lost: bool) -> None:
    rec = _rec(failure)
    assert (rejected(rec) is not None) is is_rejection
    lost = not_answered(rec, "n=3")
    assert (lost is not None) is is_lost
    if lost is not None:
        assert lost.status == "failed" and "no answer" in lost.summary


class _Ctx:
    """Answers every request with the given record."""

    def __init__(self, rec: RequestRecord) -> None:
        self.rec = rec

    async def send(self, prompt: str | None = None, **params: Any) -> RequestRecord:
        return self.rec


async def test_send_ok_returns_the_record_or_ends_the_probe_with_what_unusable_found() -> None:
    ok = _rec(None)
    assert await send_ok(cast(ProbeContext, _Ctx(ok)), "stream") is ok
    failed = _rec(Failure(FailureKind.HTTP_STATUS, "HTTP 500", 500))
    with pytest.raises(ProbeEnded) as ended:
        await send_ok(cast(ProbeContext, _Ctx(failed)), "stream")
    assert ended.value.observation == unusable(failed, "stream")
    assert ended.value.observation.summary == "stream failed: HTTP 500"
    assert end_if(None) is None


async def test_a_probe_ended_early_is_recorded_as_its_observation_and_a_crash_as_a_probe_error() -> None:
    answer = Observation(value="rejected 400", summary="HTTP 400: no", detail={"status": 400})

    async def ends(ctx: ProbeContext) -> Observation:
        raise ProbeEnded(answer)

    async def crashes(ctx: ProbeContext) -> Observation:
        raise KeyError("x")

    runs = {"t.ends": ends, "t.crash": crashes}
    probes = [
        Probe(id=pid, title=pid, category="request", request="r", observes="o", breaking=True, breaks="b", run=run)
        for pid, run in runs.items()
    ]
    async with serve(Persona()) as url:
        report = await run_probes(Target(url), None, probes)
    by = {r.id: r.old for r in report.results}
    assert by["t.ends"] == answer and by["t.ends"].status == "observed"
    assert by["t.crash"].status == "failed" and by["t.crash"].summary == "probe error: KeyError: 'x'"
