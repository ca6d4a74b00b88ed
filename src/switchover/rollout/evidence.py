"""One read of the evidence for a window: ledger rows (or Prometheus), the built-in gates' stats, the row views
custom gates judge, and old's numbers from the baseline once old serves no traffic (holding at 100 %)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from switchover.gateway.ledger import LedgerSkips
from switchover.gateway.ledger_record import LedgerRecord, LedgerRow
from switchover.review.models import ReviewSummary
from switchover.rollout.baseline import Baseline
from switchover.rollout.custom_gates import CustomGateResult, Series, View, evaluate_custom, promql_vector
from switchover.rollout.custom_settings import CustomGate
from switchover.rollout.gates import WindowStats, read_ledger_rows, stats_from_ledger, stats_from_prometheus
from switchover.rollout.rows import TaskTyper, row_view
from switchover.rollout.settings import PrometheusSource, RolloutSettings

Query = Callable[[PrometheusSource, str], Series]


@dataclass
class Window:
    """The evidence of [since, now]."""

    since: float
    now: float
    stats: WindowStats
    rows: list[LedgerRow] = field(default_factory=list)
    skipped: LedgerSkips = field(default_factory=LedgerSkips)

    def views(self, typer: TaskTyper) -> list[View]:
        return [row_view(r, typer) for r in self.rows if isinstance(r, LedgerRecord)]


def read_window(
    settings: RolloutSettings,
    ledger: Callable[[], Path],
    *,
    since: float,
    now: float,
    with_shadow: bool,
    need_rows: bool = False,
) -> Window:
    """Stats (ledger or Prometheus) of [since, now]; rows too when asked (custom ledger gates need them)."""
    window_s = max(1.0, now - since)
    if settings.source == "prometheus":
        assert settings.prometheus is not None
        stats = stats_from_prometheus(settings.prometheus, window_s=window_s)
        if not need_rows:
            return Window(since, now, stats)
        got = read_ledger_rows(ledger(), since)
        return Window(since, now, stats, [r for r in got.rows if r.ts <= now], got.skipped)
    got = read_ledger_rows(ledger(), since)
    rows = [r for r in got.rows if r.ts <= now]
    stats = stats_from_ledger(rows, window_s=now - since, with_shadow=with_shadow, th=settings.gates,
                              skipped=got.skipped)
    return Window(since, now, stats, rows, got.skipped)


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
    note = (f"old's {' and '.join(used)} p99 come from the baseline taken before 100 % "
            f"(ledger {baseline.window_start or 0:.0f}–{baseline.window_end or 0:.0f})")
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
    """The custom gates over one window's rows (and the rows since the switch, for the cache check)."""
    if not gates:
        return []
    typer = TaskTyper(settings.task_types)
    views = window.views(typer)
    switch_views: Iterable[View] = ()
    if since_switch is not None and any(g.builtin == "cache_hits_after_switch" for g in gates):
        switch_views = _LazyViews(since_switch, typer)
    return evaluate_custom(gates, views, settings.gates, window_s=window.now - window.since,
                           prometheus=settings.prometheus, baseline=baseline, views_since_switch=switch_views,
                           query=query, review=review)
