"""What old looked like just before 100 %: the reference the holding window's old-vs-new gates use once old
serves no traffic (at weight 100 a window has no old-arm rows to compare with).

Taken from the last stage's window when the rollout enters 100 % and kept as baseline.json next to the state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from switchover.ledger_record import LedgerRecord, LedgerRow
from switchover.measure.percentiles import percentile
from switchover.rollout.rows import TaskTyper, row_view


class Baseline(BaseModel):
    """Old-arm tails and output lengths (by task type) from the window before 100 %."""

    model_config = ConfigDict(allow_inf_nan=False)  # a NaN tail would make every ratio gate pass

    taken_at: float
    window_start: float | None = None
    window_end: float | None = None
    ttft_p99_ms: float | None = None
    ttft_n: int = 0
    tpot_p99_ms: float | None = None
    tpot_n: int = 0
    output_tokens: dict[str, list[float]] = Field(
        default_factory=dict, description="Task type -> completion tokens of old's answers (a seeded sample)"
    )

    def lengths(self, task_type: str | None = None) -> list[float]:
        """Output lengths of one task type, or of all."""
        if task_type is not None:
            return self.output_tokens.get(task_type, [])
        return [x for v in self.output_tokens.values() for x in v]


def take_baseline(
    rows: Iterable[LedgerRow], *, now: float, max_samples: int, typer: TaskTyper | None = None
) -> Baseline:
    """Old's ok answers in `rows` (one pass; a stream will do): TTFT/TPOT p99 and up to `max_samples` output
    lengths (seeded, reproducible)."""
    ttft: list[float] = []
    tpot: list[float] = []
    lengths: dict[str, list[float]] = defaultdict(list)
    first: float | None = None
    last: float | None = None
    for r in rows:
        first = r.ts if first is None or r.ts < first else first
        last = r.ts if last is None or r.ts > last else last
        if not isinstance(r, LedgerRecord) or r.routed != "old" or r.arm != "old" or r.outcome != "ok":
            continue
        if r.ttft_ms is not None:
            ttft.append(r.ttft_ms)
        if r.tpot_ms is not None:
            tpot.append(r.tpot_ms)
        if r.completion_tokens is not None:
            lengths[row_view(r, typer)["task_type"]].append(float(r.completion_tokens))
    total = sum(len(v) for v in lengths.values())
    if total > max_samples:  # keep each task type's share
        rng = np.random.default_rng(0)
        kept: dict[str, list[float]] = {}
        for k, v in lengths.items():
            n = max(1, round(len(v) * max_samples / total))
            kept[k] = [v[i] for i in sorted(rng.choice(len(v), size=min(n, len(v)), replace=False))]
        lengths = kept
    return Baseline(
        taken_at=now,
        window_start=first,
        window_end=last,
        ttft_p99_ms=percentile(ttft, 99) if ttft else None,
        ttft_n=len(ttft),
        tpot_p99_ms=percentile(tpot, 99) if tpot else None,
        tpot_n=len(tpot),
        output_tokens=dict(lengths),
    )
