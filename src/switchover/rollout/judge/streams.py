"""Each arm's per-request observations in arrival order, per judged metric, read from ledger rows in one pass.

The judge pairs the k-th observation of old with the k-th of new (decide.py), so order is arrival order (the
row's ts) and every row counts once. Outcomes that say nothing about an arm (client mistakes, disconnects, drain
cut-offs, gateway errors) are left out of both arms, as the gates do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from switchover.config.rollout_judge import JUDGE_METRICS
from switchover.ledger_record import ARM_ERROR_OUTCOMES, NOT_AN_ARM_OUTCOMES, LedgerRecord, LedgerRow


@dataclass
class ArmStreams:
    """One arm: metric -> observations (floats; 1.0 / 0.0 for the rate metrics), at most `cap` each."""

    cap: int
    values: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in JUDGE_METRICS})
    halves: dict[str, list[int]] = field(default_factory=lambda: {m: [] for m in JUDGE_METRICS})
    dropped: int = 0  # observations past the cap (not judged)

    def put(self, metric: str, value: float, half: int = -1) -> None:
        kept = self.values[metric]
        if len(kept) < self.cap:
            kept.append(value)
            self.halves[metric].append(half)
        else:
            self.dropped += 1

    def array(self, metric: str) -> np.ndarray:
        return np.asarray(self.values[metric], dtype=float)

    def tenant_halves(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """The metric's observations from even and from odd tenant buckets (rows without a bucket in neither)."""
        x, h = self.array(metric), np.asarray(self.halves[metric], dtype=int)
        return x[h == 0], x[h == 1]

    def add(self, obs: Observation) -> None:
        """One request row of this arm (as `observe` kept it)."""
        half = -1 if obs[2] is None else int(obs[2])
        for metric, value in zip(OBSERVED, obs[3:], strict=True):
            if value is not None:
                self.put(metric, float(value), half)


OBSERVED = ("error", "fallback", "json_invalid", "truncated", "ttft_ms", "tpot_ms", "e2e_ms", "output_tokens")
Observation = tuple[
    float,
    bool,
    int | None,
    float | None,
    float | None,
    float | None,
    float | None,
    float | None,
    float | None,
    float | None,
    float | None,
]
"""(ts, routed to new, tenant bucket parity, then one value or None per OBSERVED metric): what the judge keeps of a
row (a few hundred bytes, not the row)."""


def observe(r: LedgerRecord) -> Observation:
    """A request row as the judge's observations: rates on every row (invalid JSON where JSON was asked), latencies,
    length and truncation on the arm's own ok answers, length only from the server's usage."""
    answered = r.outcome == "ok" and r.arm == r.routed
    return (
        r.ts,
        r.routed == "new",
        None if r.bucket is None else r.bucket % 2,
        float(r.outcome in ARM_ERROR_OUTCOMES),
        float(r.outcome == "fallback_ok"),
        None if r.json_valid is None else float(not r.json_valid),
        float(r.finish_reason == "length") if answered and r.finish_reason is not None else None,
        r.ttft_ms if answered else None,
        r.tpot_ms if answered else None,
        r.e2e_ms if answered else None,
        float(r.completion_tokens)
        if answered and r.completion_tokens is not None and r.tokens_source == "usage"
        else None,
    )


def arm_streams(rows: Iterable[LedgerRow], cap: int) -> tuple[ArmStreams, ArmStreams]:
    """Old's and new's streams from request rows (shadow rows are not arms), in arrival order. One pass; at most
    `cap` rows per arm are kept (the first in the ledger's order), so memory is bounded however long the stage."""
    kept: list[Observation] = []
    per_arm = {False: 0, True: 0}
    dropped = 0
    for r in rows:
        if not isinstance(r, LedgerRecord) or r.routed is None or r.outcome in NOT_AN_ARM_OUTCOMES:
            continue
        is_new = r.routed == "new"
        if per_arm[is_new] >= cap:
            dropped += 1
            continue
        per_arm[is_new] += 1
        kept.append(observe(r))
    kept.sort(key=lambda o: o[0])
    old, new = ArmStreams(cap), ArmStreams(cap)
    for obs in kept:
        (new if obs[1] else old).add(obs)
    old.dropped += dropped
    return old, new
