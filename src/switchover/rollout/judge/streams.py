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
    dropped: int = 0  # observations past the cap (not judged)

    def put(self, metric: str, value: float) -> None:
        kept = self.values[metric]
        if len(kept) < self.cap:
            kept.append(value)
        else:
            self.dropped += 1

    def array(self, metric: str) -> np.ndarray:
        return np.asarray(self.values[metric], dtype=float)

    def add(self, r: LedgerRecord) -> None:
        """One request row of this arm."""
        self.put("error", float(r.outcome in ARM_ERROR_OUTCOMES))
        self.put("fallback", float(r.outcome == "fallback_ok"))
        if r.json_valid is not None:
            self.put("json_invalid", float(not r.json_valid))
        if r.outcome != "ok" or r.arm != r.routed:
            return
        if r.finish_reason is not None:
            self.put("truncated", float(r.finish_reason == "length"))
        for metric, value in (("ttft_ms", r.ttft_ms), ("tpot_ms", r.tpot_ms), ("e2e_ms", r.e2e_ms)):
            if value is not None:
                self.put(metric, float(value))
        if r.completion_tokens is not None and r.tokens_source == "usage":
            self.put("output_tokens", float(r.completion_tokens))


def arm_streams(rows: Iterable[LedgerRow], cap: int) -> tuple[ArmStreams, ArmStreams]:
    """Old's and new's streams from request rows (shadow rows are not arms), sorted by arrival."""
    kept = sorted(
        (r for r in rows if isinstance(r, LedgerRecord) and r.routed is not None and r.outcome not in
         NOT_AN_ARM_OUTCOMES),
        key=lambda r: r.ts,
    )
    old, new = ArmStreams(cap), ArmStreams(cap)
    for r in kept:
        (new if r.routed == "new" else old).add(r)
    return old, new
