"""What a spot-check holds: a pair of answers to one prompt, a person's rating of it, and the summary per task type
with a confidence interval (pure)."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from switchover.fields import TASK_TYPE, FinishReason

Rating = Literal["better", "same", "worse", "broken"]
RATINGS: tuple[Rating, ...] = ("better", "same", "worse", "broken")
BAD: frozenset[str] = frozenset({"worse", "broken"})

# what a pair holds for each arm (old_* and new_*: the same field once per arm)
ArmAnswer = Annotated[
    str,
    Field(
        description="The arm's answer to its copy of the request (old_ or new_, as the field is named): choice 0's "
        "text, tool calls appended as JSON lines; redacted"
    ),
]
ArmStatus = Annotated[int | None, Field(description="HTTP status of the arm's copy; None: no response")]
ArmError = Annotated[
    str | None,
    Field(
        description="Why the arm's copy failed (the wire client's message, redacted, at most 300 characters); None: "
        "it did not fail"
    ),
]
BadShare = Annotated[float | None, Field(description="(worse + broken) / rated; None before any rating")]


class Pair(BaseModel):
    """One sampled request answered by both arms; texts are redacted before they are stored."""

    id: int | None = Field(default=None, description="The pair's id in the review database; None before it is stored")
    ts: float = Field(description="Wall-clock time the pair was sampled")
    day: str = Field(description="UTC day, YYYY-MM-DD")
    task_type: str = Field(description=TASK_TYPE)
    request_id: str
    path: str
    model: str | None = Field(default=None, description="The model the client asked for")
    prompt: str = Field(
        description="What the reviewer reads: each chat message as 'role: text', or the completion prompt; redacted"
    )
    old_answer: ArmAnswer
    new_answer: ArmAnswer
    old_status: ArmStatus = None
    new_status: ArmStatus = None
    old_error: ArmError = None
    new_error: ArmError = None
    old_finish_reason: FinishReason = None
    new_finish_reason: FinishReason = None


class RatingRow(BaseModel):
    """A person's judgement of the new answer against the old one."""

    pair_id: int
    rating: Rating
    note: str = ""
    rater: str = ""
    ts: float


class TypeSummary(BaseModel):
    """Ratings of one task type: counts and the worse-or-broken share with its 95 % Wilson interval."""

    task_type: str = Field(description="The task type; 'all' in the summary over every task type")
    pairs: int
    rated: int = Field(description="Pairs rated (a pair rated again counts once, with its latest rating)")
    counts: dict[str, int] = Field(description="Pairs per latest rating: better, same, worse, broken")
    bad_share: BadShare
    bad_low: float | None = Field(
        default=None, description="Lower bound of bad_share's 95 % Wilson interval; None before any rating"
    )
    bad_high: float | None = Field(
        default=None, description="Upper bound of bad_share's 95 % Wilson interval; None before any rating"
    )


class ReviewSummary(BaseModel):
    """All task types, and the same over every rating."""

    types: list[TypeSummary]
    total: TypeSummary


def wilson(bad: int, n: int, z: float = 1.959964) -> tuple[float, float] | None:
    """The 95 % Wilson score interval of a proportion bad / n (sound for small n and shares near 0 or 1)."""
    if n <= 0:
        return None
    p = bad / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def summarize(task_type: str, pairs: int, counts: dict[str, int]) -> TypeSummary:
    """One TypeSummary from its pair count and its counts per rating."""
    full: dict[str, int] = {r: int(counts.get(r, 0)) for r in RATINGS}
    rated = sum(full.values())
    bad = full["worse"] + full["broken"]
    interval = wilson(bad, rated)
    return TypeSummary(
        task_type=task_type,
        pairs=pairs,
        rated=rated,
        counts=full,
        bad_share=bad / rated if rated else None,
        bad_low=interval[0] if interval else None,
        bad_high=interval[1] if interval else None,
    )


class GateVerdict(BaseModel):
    """The rating gate: pass, hold (too few ratings) or fail (too many worse-or-broken)."""

    verdict: Literal["pass", "hold", "fail"]
    reason: str
    rated: int = Field(description="Pairs rated, over every task type")
    bad_share: BadShare = None


def rating_gate(summary: ReviewSummary, max_bad_share: float, min_ratings: int, per_type: bool = True) -> GateVerdict:
    """worse-or-broken ≤ max_bad_share with at least min_ratings ratings, overall and (with `per_type`) for every
    task type that has min_ratings ratings itself; too few ratings holds, never passes."""
    total = summary.total
    if total.rated < min_ratings:
        return GateVerdict(
            verdict="hold",
            rated=total.rated,
            bad_share=total.bad_share,
            reason=f"{total.rated} ratings, {min_ratings} needed",
        )
    judged = [total, *(t for t in summary.types if t.rated >= min_ratings)] if per_type else [total]
    over = [t for t in judged if t.bad_share is not None and t.bad_share > max_bad_share]
    if over:
        worst = ", ".join(f"{t.task_type} {t.bad_share:.0%} of {t.rated}" for t in over)
        return GateVerdict(
            verdict="fail",
            rated=total.rated,
            bad_share=total.bad_share,
            reason=f"worse-or-broken above {max_bad_share:.0%}: {worst}",
        )
    return GateVerdict(
        verdict="pass",
        rated=total.rated,
        bad_share=total.bad_share,
        reason=f"worse-or-broken {total.bad_share:.0%} of {total.rated} (≤ {max_bad_share:.0%})",
    )
