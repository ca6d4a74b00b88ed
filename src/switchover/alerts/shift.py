"""How far the new engine moved each latency distribution in an A/B bench run: the factor a threshold tuned to
the old engine (e.g. TTFT p99 > 2 s) needs before it means the same thing on the new one (docs/alerts.md)."""

from __future__ import annotations

import statistics
from pathlib import Path

from pydantic import BaseModel, Field

from switchover.errors import BadInput
from switchover.evidence.bench import BenchReport
from switchover.runs import RunDir

# the profile intent -> the bench's per-step distribution of the same quantity (docs/metrics.md)
BENCH_METRIC = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2e": "e2e_ms"}
STATS = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}


class StepRatio(BaseModel):
    """new / old of one statistic at one step both endpoints ran."""

    bucket: str | None
    step: int
    load: float | None = Field(description="Concurrency or rate of the step")
    old: float
    new: float
    ratio: float


class Shift(BaseModel):
    """The measured factor for one metric and statistic, over every step."""

    metric: str
    stat: str
    median: float
    low: float
    high: float
    steps: list[StepRatio]
    old_endpoint: str
    new_endpoint: str


def stat_for(quantile: float | None) -> str:
    """The bench statistic nearest a histogram_quantile level (the mean when the rule takes none)."""
    if quantile is None:
        return "mean"
    return min(STATS, key=lambda k: abs(STATS[k] - quantile))


class BenchShifts:
    """Shifts read from one bench run directory (summary.json), old and new told apart by engine."""

    def __init__(self, run_dir: Path, old_engine: str, new_engine: str) -> None:
        rd = RunDir.open(run_dir)
        if not rd.has("summary.json"):
            raise BadInput(
                f"{run_dir}: no summary.json (not a bench run directory)",
                hint="pass the folder `switchover bench` wrote, e.g. runs/20250101T000000Z-bench",
            )
        try:
            self.report = rd.read_json("summary", BenchReport)
        except Exception as exc:  # a bad or foreign file: one line naming it
            raise BadInput(f"{run_dir}/summary.json: not a bench summary ({type(exc).__name__})") from None
        labels = [e.label for e in self.report.endpoints]
        if len(labels) != 2:
            raise BadInput(f"{run_dir}: an A/B run of two endpoints is needed, found {len(labels)}")
        by_engine = {e.engine: e.label for e in self.report.endpoints}
        self.notes: list[str] = []
        if old_engine in by_engine and new_engine in by_engine and old_engine != new_engine:
            self.old, self.new = by_engine[old_engine], by_engine[new_engine]
        else:
            self.old, self.new = labels
            self.notes.append(
                f"old/new taken in bench order ({self.old} → {self.new}): the endpoints' engines "
                f"{sorted(str(k) for k in by_engine)} do not name {old_engine} and {new_engine}"
            )

    def shift(self, intent: str, quantile: float | None) -> Shift | None:
        """The measured new/old factor for `intent` at the statistic nearest `quantile`, or None."""
        metric = BENCH_METRIC.get(intent)
        if metric is None:
            return None
        stat = stat_for(quantile)
        steps = {(s.endpoint, s.bucket, s.step): s for s in self.report.steps}
        ratios = []
        for (label, bucket, step), s in sorted(steps.items(), key=lambda kv: (str(kv[0][1]), kv[0][2])):
            other = steps.get((self.new, bucket, step))
            if label != self.old or other is None:
                continue
            a, b = getattr(s, metric), getattr(other, metric)
            if a is None or b is None or getattr(a, stat) <= 0:
                continue
            old_v, new_v = float(getattr(a, stat)), float(getattr(b, stat))
            ratios.append(
                StepRatio(
                    bucket=bucket, step=step, load=s.concurrency or s.rate, old=old_v, new=new_v, ratio=new_v / old_v
                )
            )
        if not ratios:
            return None
        values = [r.ratio for r in ratios]
        return Shift(
            metric=metric,
            stat=stat,
            median=statistics.median(values),
            low=min(values),
            high=max(values),
            steps=ratios,
            old_endpoint=self.old,
            new_endpoint=self.new,
        )
