"""What a bench run tells as it goes (notes, steps started and done, each request): the CLI's progress display
implements it; library callers and tests pass NullReporter."""

from __future__ import annotations

from typing import Protocol

from switchover.evidence.bench_step import StepSummary


class Reporter(Protocol):
    """The progress a bench run reports."""

    def note(self, msg: str) -> None: ...
    def step_started(self, label: str, total: int | None) -> None: ...
    def request_done(self, ok: bool) -> None: ...
    def step_done(self, summary: StepSummary) -> None: ...


class NullReporter:
    """Reports nothing."""

    def note(self, msg: str) -> None:
        pass

    def step_started(self, label: str, total: int | None) -> None:
        pass

    def request_done(self, ok: bool) -> None:
        pass

    def step_done(self, summary: StepSummary) -> None:
        pass
