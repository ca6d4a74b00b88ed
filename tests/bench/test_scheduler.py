"""Load shapes with a fake send: in-flight limits, bounds, warm-up marking, stop flag (no timing asserts)."""

from __future__ import annotations

import asyncio
import time

import pytest

from switchover.bench.scheduler import StepBounds, StopFlag, run_concurrency, run_schedule
from switchover.errors import BadInput
from switchover.wire import RequestRecord


class FakeSend:
    def __init__(self, delay: float = 0.001) -> None:
        self.inflight = 0
        self.peak = 0
        self.delay = delay
        self.calls: list[int] = []

    async def __call__(self, index: int) -> RequestRecord:
        self.calls.append(index)
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        rec = RequestRecord(
            api="completions", stream=True, model="m", started_wall=time.time(), send_ns=time.perf_counter_ns()
        )
        await asyncio.sleep(self.delay)  # the scenario: the request's duration
        rec.end_ns = time.perf_counter_ns()
        self.inflight -= 1
        return rec


async def test_concurrency_is_held_and_never_exceeded():
    send = FakeSend()
    done = await run_concurrency(send, 4, StepBounds(requests=20, warmup_requests=2), StopFlag())
    assert send.peak == 4
    assert len(done) == 22
    assert sorted(send.calls) == list(range(22))


async def test_warmup_by_count_marks_the_first_indices():
    done = await run_concurrency(FakeSend(), 2, StepBounds(requests=5, warmup_requests=3), StopFlag())
    assert sorted(s.index for s in done if s.warmup) == [0, 1, 2]


async def test_warmup_by_time_marks_requests_sent_early():
    done = await run_concurrency(FakeSend(0.005), 1, StepBounds(requests=3, warmup_s=10.0), StopFlag())
    assert all(s.warmup for s in done)


async def test_duration_bound_stops_issuing():
    done = await run_concurrency(FakeSend(0.002), 2, StepBounds(duration_s=0.05), StopFlag())
    assert 0 < len(done) < 1000


async def test_stop_flag_ends_the_step_early():
    stop = StopFlag()

    def on_done(s):
        if s.index >= 3:
            stop.set("enough")

    done = await run_concurrency(FakeSend(), 1, StepBounds(requests=1000), stop, on_done)
    assert len(done) < 10 and stop.reason == "enough"


async def test_schedule_sends_every_offset_in_order_with_intended_times():
    send = FakeSend()
    done = await run_schedule(send, [0.0, 0.001, 0.002, 0.003], StepBounds(requests=4), StopFlag())
    assert send.calls == [0, 1, 2, 3]
    scheds = [s.sched_ns for s in sorted(done, key=lambda s: s.index)]
    assert all(a is not None for a in scheds) and scheds == sorted(scheds)


async def test_schedule_cap_limits_inflight():
    send = FakeSend(0.01)
    await run_schedule(send, [0.0] * 10, StepBounds(requests=10), StopFlag(), max_inflight=3)
    assert send.peak == 3


def test_bounds_need_a_count_or_a_duration():
    with pytest.raises(BadInput, match="request count or a duration"):
        StepBounds()
    with pytest.raises(BadInput):
        StepBounds(requests=0)


async def test_a_concurrency_slot_schedules_each_request_when_its_previous_response_ended():
    send = FakeSend(delay=0.002)
    done = await run_concurrency(send, 2, StepBounds(requests=10), StopFlag())
    assert all(s.sched_ns is not None and s.sched_ns <= s.record.send_ns for s in done)
    ends = {s.record.end_ns for s in done}
    later = [s for s in done if s.sched_ns in ends]  # every request after a slot's first waited for an end
    assert len(later) == 10 - 2
