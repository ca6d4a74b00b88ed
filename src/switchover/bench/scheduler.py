"""Load shapes: a fixed number of requests in flight, or sends at given offsets (constant, Poisson, gamma
rates and trace replay); each step is bounded by a request count and/or a duration, warm-up is marked by
count and by time, and a shared stop flag ends the run early (error rate, Ctrl-C)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from switchover.errors import BadInput
from switchover.wire import RequestRecord

Send = Callable[[int], Awaitable[RequestRecord]]


@dataclass(slots=True)
class Sent:
    """One finished request of a step."""

    index: int
    sched_ns: int | None  # when it could be sent: its scheduled time (rate/trace), or when its slot freed (concurrency)
    warmup: bool
    record: RequestRecord


@dataclass(slots=True)
class StopFlag:
    """Set once, read by every scheduler loop; the reason ends up in the run summary."""

    reason: str | None = None
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def set(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.event.set()

    @property
    def is_set(self) -> bool:
        return self.reason is not None


@dataclass(frozen=True, slots=True)
class StepBounds:
    """When a step stops issuing requests, and what counts as warm-up."""

    requests: int | None = None  # measured requests (warm-up comes on top)
    duration_s: float | None = None  # measuring time after warm-up
    warmup_requests: int = 0
    warmup_s: float = 0.0

    def __post_init__(self) -> None:
        if self.requests is None and self.duration_s is None:
            raise BadInput("a step needs a request count or a duration (--requests / --duration)")
        if self.requests is not None and self.requests < 1:
            raise BadInput(f"--requests must be at least 1, got {self.requests}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise BadInput(f"--duration must be positive, got {self.duration_s:g}")
        if self.warmup_requests < 0 or self.warmup_s < 0:
            raise BadInput("warm-up count and time must not be negative")

    @property
    def max_requests(self) -> int | None:
        return None if self.requests is None else self.requests + self.warmup_requests


class _Step:
    def __init__(
        self,
        bounds: StepBounds,
        stop: StopFlag,
        on_done: Callable[[Sent], None] | None,
        keep: bool = True,
        start_ns: int | None = None,
    ) -> None:
        self.bounds = bounds
        self.keep = keep  # False: finished requests go to on_done only (memory flat in the request count)
        self.stop = stop
        self.on_done = on_done
        self.start_ns = time.perf_counter_ns() if start_ns is None else start_ns  # a shared start (workers)
        self.warm_until_ns = self.start_ns + int(bounds.warmup_s * 1e9)
        self.issue_until_ns = None if bounds.duration_s is None else self.warm_until_ns + int(bounds.duration_s * 1e9)
        self.issued = 0
        self.done: list[Sent] = []

    def may_issue(self) -> bool:
        if self.stop.is_set:
            return False
        if self.bounds.max_requests is not None and self.issued >= self.bounds.max_requests:
            return False
        return self.issue_until_ns is None or time.perf_counter_ns() < self.issue_until_ns

    async def one(self, send: Send, index: int, sched_ns: int | None) -> RequestRecord:
        rec = await send(index)
        warm = index < self.bounds.warmup_requests or rec.send_ns < self.warm_until_ns
        sent = Sent(index, sched_ns, warm, rec)
        if self.keep:
            self.done.append(sent)
        if self.on_done is not None:
            self.on_done(sent)
        return rec


async def run_concurrency(
    send: Send,
    concurrency: int,
    bounds: StepBounds,
    stop: StopFlag,
    on_done: Callable[[Sent], None] | None = None,
    keep: bool = True,
    start_ns: int | None = None,
) -> list[Sent]:
    """Keep `concurrency` requests in flight until the bounds are met; returns them in completion order (none
    with keep=False: then `on_done` sees each once and nothing is held). `start_ns`: the step's start on the
    perf_counter clock (the worker processes of one step share it)."""
    if concurrency < 1:
        raise BadInput(f"concurrency must be at least 1, got {concurrency}")
    st = _Step(bounds, stop, on_done, keep, start_ns)

    async def worker() -> None:
        free_ns = time.perf_counter_ns()  # when this slot could send: its sched_ns (send − sched: the client's lag)
        while st.may_issue():
            index = st.issued
            st.issued += 1
            rec = await st.one(send, index, free_ns)
            free_ns = rec.end_ns or time.perf_counter_ns()

    tasks = [asyncio.create_task(worker()) for _ in range(concurrency)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return st.done


async def run_schedule(
    send: Send,
    offsets_s: Iterable[float],
    bounds: StepBounds,
    stop: StopFlag,
    on_done: Callable[[Sent], None] | None = None,
    max_inflight: int | None = None,
    keep: bool = True,
    start_ns: int | None = None,
) -> list[Sent]:
    """Send request i at step start + offsets_s[i] (rate modes, trace replay); `max_inflight` caps concurrency
    (a capped send goes late, and the lag shows as send_ns − sched_ns). `offsets_s` may be any iterable (a
    generator for long runs); keep=False holds no finished request; `start_ns` as in run_concurrency."""
    st = _Step(bounds, stop, on_done, keep, start_ns)
    gate = asyncio.Semaphore(max_inflight) if max_inflight else None
    tasks: set[asyncio.Task[None]] = set()

    async def fire(index: int, sched_ns: int) -> None:
        if gate is None:
            await st.one(send, index, sched_ns)
            return
        async with gate:
            await st.one(send, index, sched_ns)

    try:
        for index, off in enumerate(offsets_s):
            sched_ns = st.start_ns + int(off * 1e9)
            delay = (sched_ns - time.perf_counter_ns()) / 1e9
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.event.wait(), timeout=delay)
            if not st.may_issue():
                break
            st.issued += 1
            task = asyncio.create_task(fire(index, sched_ns))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
    finally:
        for t in list(tasks):
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return st.done
