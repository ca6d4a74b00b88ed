"""One read of the evidence for a window: ledger rows (or Prometheus) streamed once into the built-in gates'
stats and what the custom ledger gates need (a LedgerTally), and old's numbers from the baseline once old serves
no traffic (holding at 100 %). Memory is flat in the number of rows, but for the latencies a p99 needs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from switchover.config.rollout import PrometheusSource, RolloutSettings
from switchover.config.rollout_custom import CustomGate
from switchover.evidence.review import ReviewSummary
from switchover.ledger_files import LedgerSkips, stream_ledger_rows
from switchover.ledger_record import LedgerRecord, LedgerRow
from switchover.rollout.baseline import Baseline
from switchover.rollout.custom_gates import CustomGateResult, LedgerTally, Series, View, evaluate_custom, promql_vector
from switchover.rollout.gates import WindowStats, stats_from_ledger
from switchover.rollout.prometheus_window import stats_from_prometheus
from switchover.rollout.rows import TaskTyper, row_view

Query = Callable[[PrometheusSource, str], Series]


@dataclass
class Window:
    """The evidence of [since, now]: stats, and what the custom ledger gates named when it was read gathered."""

    since: float
    now: float
    stats: WindowStats
    skipped: LedgerSkips = field(default_factory=LedgerSkips)
    tally: LedgerTally = field(default_factory=lambda: LedgerTally(()))


def window_rows(ledger: Path, since: float, now: float, skipped: LedgerSkips | None = None) -> Iterator[LedgerRow]:
    """The ledger rows of [since, now], streamed."""
    return (r for r in stream_ledger_rows(ledger, since, skipped) if r.ts <= now)


def _feeding(rows: Iterable[LedgerRow], tally: LedgerTally, typer: TaskTyper) -> Iterator[LedgerRow]:
    """`rows` passed on, each request row's view handed to `tally` on the way."""
    for r in rows:
        if isinstance(r, LedgerRecord):
            tally.add(row_view(r, typer))
        yield r


def read_window(
    settings: RolloutSettings,
    ledger: Callable[[], Path],
    *,
    since: float,
    now: float,
    with_shadow: bool,
    gates: Sequence[CustomGate] = (),
) -> Window:
    """Stats (ledger or Prometheus) of [since, now], and what `gates` (the custom gates to be judged on this
    window) need from its rows, in one pass over the ledger; the ledger is not read when nothing needs it."""
    window_s = max(1.0, now - since)
    tally = LedgerTally(gates)
    typer = TaskTyper(settings.task_types)
    skipped = LedgerSkips()
    if settings.source == "prometheus":
        assert settings.prometheus is not None
        stats = stats_from_prometheus(settings.prometheus, window_s=window_s)
        if tally.needs_rows:
            for _ in _feeding(window_rows(ledger(), since, now, skipped), tally, typer):
                pass
        return Window(since, now, stats, skipped, tally)
    rows = window_rows(ledger(), since, now, skipped)
    if tally.needs_rows:
        rows = _feeding(rows, tally, typer)
    stats = stats_from_ledger(rows, window_s=now - since, with_shadow=with_shadow, th=settings.gates, skipped=skipped)
    return Window(since, now, stats, skipped, tally)


def with_baseline(stats: WindowStats, baseline: Baseline | None, min_samples: int) -> WindowStats:
    """Old's TTFT/TPOT tails from the baseline where the window has too few old answers (weight 100)."""
    if baseline is None:
        return stats
    old = stats.old.model_copy()
    used = []
    if old.ttft_n < min_samples and baseline.ttft_n >= min_samples:
        old.ttft_p99_ms, old.ttft_n = baseline.ttft_p99_ms, baseline.ttft_n
        used.append("TTFT")
    if old.tpot_n < min_samples and baseline.tpot_n >= min_samples:
        old.tpot_p99_ms, old.tpot_n = baseline.tpot_p99_ms, baseline.tpot_n
        used.append("TPOT")
    if not used:
        return stats
    note = (
        f"old's {' and '.join(used)} p99 come from the baseline taken before 100 % "
        f"(ledger {baseline.window_start or 0:.0f}–{baseline.window_end or 0:.0f})"
    )
    return stats.model_copy(update={"old": old, "notes": [*stats.notes, note]})


class _LazyViews:
    """Row views read afresh from `rows()` on each iteration, never all held at once."""

    def __init__(self, rows: Callable[[], Iterable[LedgerRow]], typer: TaskTyper) -> None:
        self.rows, self.typer = rows, typer

    def __iter__(self) -> Iterator[View]:
        return (row_view(r, self.typer) for r in self.rows() if isinstance(r, LedgerRecord))


def judge_custom(
    gates: Sequence[CustomGate],
    settings: RolloutSettings,
    window: Window,
    *,
    baseline: Baseline | None = None,
    since_switch: Callable[[], Iterable[LedgerRow]] | None = None,
    query: Query = promql_vector,
    review: Callable[[], ReviewSummary | None] | None = None,
) -> list[CustomGateResult]:
    """The custom gates over one window (read with these gates) and the rows since the switch (cache check)."""
    if not gates:
        return []
    typer = TaskTyper(settings.task_types)
    switch_views: Iterable[View] = ()
    if since_switch is not None and any(g.builtin == "cache_hits_after_switch" for g in gates):
        switch_views = _LazyViews(since_switch, typer)
    return evaluate_custom(
        gates,
        window.tally,
        settings.gates,
        window_s=window.now - window.since,
        prometheus=settings.prometheus,
        baseline=baseline,
        views_since_switch=switch_views,
        query=query,
        review=review,
    )
