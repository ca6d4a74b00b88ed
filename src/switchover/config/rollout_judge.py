"""The `rollout.judge:` section: the anytime-valid canary judge (rollout/judge/, docs/rollout.md "Judge").

Off by default: existing configs keep today's gates (rollout/gates.py) unchanged. On, the judge's decisions are
judged at every gate tick on all of the stage's requests so far, and a decisive result ends the stage early either
way (regression: roll back; no regression on every judged metric: the stage may advance).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

JudgeMetric = Literal["tpot_ms", "ttft_ms", "e2e_ms", "output_tokens", "error", "fallback", "truncated", "json_invalid"]
JUDGE_METRICS: tuple[JudgeMetric, ...] = get_args(JudgeMetric)
LATENCY_METRICS: tuple[JudgeMetric, ...] = ("tpot_ms", "ttft_ms", "e2e_ms")
RATE_METRICS: tuple[JudgeMetric, ...] = ("error", "fallback", "truncated", "json_invalid")
DEFAULT_METRICS: tuple[JudgeMetric, ...] = (
    "tpot_ms",
    "ttft_ms",
    "output_tokens",
    "error",
    "fallback",
    "truncated",
    "json_invalid",
)


class JudgeConfig(BaseModel):
    """Error level per rollout and the practical floors below which a difference does not matter."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    enabled: bool = Field(default=False, description="Judge stages with the anytime-valid judge (beside the gates)")
    alpha: float = Field(
        default=0.01,
        gt=0,
        lt=0.5,
        description="Chance, per metric and test over a whole stage watched at every tick, that a wrong "
        "decision is ever declared",
    )
    shift_floor: float = Field(
        default=0.02,
        gt=0,
        lt=1,
        description="Latency and length: a shift of the bulk (median of new/old) smaller than this share is no "
        "regression",
    )
    tail_floor: float = Field(
        default=0.10, gt=0, lt=10, description="Latency p99: new/old - 1 smaller than this is no regression"
    )
    rate_floor: float = Field(
        default=0.001,
        gt=0,
        lt=1,
        description="Errors, fallbacks, truncations, invalid JSON: a rise (new minus old) smaller than this "
        "absolute share is no regression",
    )
    metrics: list[JudgeMetric] = Field(
        default_factory=lambda: list(DEFAULT_METRICS),
        description="Metrics judged; latency metrics get both the bulk-shift and the p99 test",
    )
    end_early: bool = Field(
        default=True,
        description="Let a stage advance before min_samples and its window when every judged test says no "
        "regression (entry conditions such as min_duration_s still hold)",
    )
    hard: bool = Field(default=True, description="A regression rolls back (false: it only holds)")
    max_pairs: int = Field(
        default=20_000,
        ge=100,
        le=1_000_000,
        description="Pairs of requests judged per metric at most (bounds memory and each tick's CPU: the interval "
        "of one bulk test took 1.0 s at 20,000 pairs, 4.4 s at 50,000); later requests are not read",
    )
