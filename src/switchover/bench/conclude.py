"""After the steps: the knee of each endpoint's ladder and the A/B deltas, from bounded per-step samples."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from switchover.bench.ab import compare_samples
from switchover.bench.knee import knee_with_ci
from switchover.bench.samples import Samples
from switchover.evidence.bench import AbStep, BenchPlan
from switchover.evidence.bench_findings import KneeResult
from switchover.evidence.bench_step import StepSummary
from switchover.measure.percentiles import percentile

KNEE_LIMIT = 10_000  # per-request values per step kept for the knee's bootstrap and the A/B tests (then a sample)


@dataclass
class StepValues:
    """What the knee and the A/B comparison need of one (endpoint, bucket, step), over its repeats: the load and
    bounded per-request samples of each metric."""

    x: float
    samples: dict[str, Samples] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"x": self.x, "samples": {k: v.to_dict() for k, v in self.samples.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any], seed: int = 0) -> StepValues:
        return cls(x=float(d["x"]), samples={k: Samples.from_dict(v, seed) for k, v in d["samples"].items()})


Keys = dict[tuple[str, str, int], StepValues]


def knees(keys: Keys, plan: BenchPlan) -> dict[str, KneeResult]:
    """The knee of every (endpoint, bucket) ladder (docs/metrics.md, Knee)."""
    out = {}
    for ep_label, bucket in sorted({(e, b) for (e, b, _) in keys}):
        steps = sorted((k[2], v) for k, v in keys.items() if k[0] == ep_label and k[1] == bucket)
        x, samples, ttft50, tpot50 = [], [], [], []
        for _, v in steps:
            x.append(v.x)
            samples.append(v.samples[plan.knee_metric].values().tolist())
            tt, tp = v.samples["ttft"].values(), v.samples["tpot"].values()
            ttft50.append(percentile(tt, 50) if tt.size else None)
            tpot50.append(percentile(tp, 50) if tp.size else None)
        if not any(x):
            continue
        out[f"{ep_label}/{bucket}"] = knee_with_ci(
            x,
            samples,
            q=plan.knee_percentile,
            metric=f"{plan.knee_metric} p{plan.knee_percentile:g}",
            seed=plan.seed,
            ttft_p50=ttft50,
            tpot_p50=tpot50,
        )
    return out


def ab_steps(keys: Keys, steps: list[StepSummary], labels: list[str], seed: int) -> list[AbStep]:
    """new vs old at every step both ran (two endpoints only)."""
    if len(labels) != 2:
        return []
    a, b = labels
    out = []
    for (label, bucket, step), va in sorted(keys.items()):
        if label != a or (b, bucket, step) not in keys:
            continue
        vb = keys[(b, bucket, step)]
        deltas = []
        for metric in ("ttft", "tpot", "e2e"):
            for stat in ("p50", "p99"):
                d = compare_samples(
                    metric,
                    va.samples[metric].values().tolist(),
                    vb.samples[metric].values().tolist(),
                    stat=stat,
                    seed=seed,
                )
                if d is not None:
                    deltas.append(d)
        conc = next(
            (s.concurrency or s.rate for s in steps if s.endpoint == a and s.bucket == bucket and s.step == step), None
        )
        out.append(AbStep(bucket=bucket, step=step, concurrency=conc, deltas=deltas))
    return out
