"""`rollout.entry` and `rollout.cost`: the evidence a stage needs before it is entered (docs/rollout.md, entry gates).

Entering the first stage that sends traffic to new (shadow, or the first weighted stage) needs a passing `check`;
entering the first weighted stage (the canary) also needs the pre-canary evidence (memory for both copies on a
shared GPU, drain grace, a versioned cache key, a rollback window, the review sampler for a strong SLA); entering
the large stage needs new's cost per request within its limit. A missing piece is refused with the command that
produces it; `rollout advance --waive ITEM --reason TEXT` records an override in the audit log.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from switchover.inputs import MAX_SECONDS

DAY_S = 86400.0


class EntrySettings(BaseModel):
    """`rollout.entry`: what entering shadow and the canary requires."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    enabled: bool = Field(
        default=True,
        description="Refuse to enter shadow / canary / the large stage without the evidence below "
        "(false: reported by `rollout gates`, never enforced)",
    )
    check_max_age_s: float = Field(
        default=7 * DAY_S,
        gt=0,
        le=MAX_SECONDS,
        description="A passing `switchover check` older than this does not count (engines and configs move on)",
    )
    sla: Literal["standard", "strong"] = Field(
        default="standard",
        description="strong: a hot switch needs the human spot-check sampler (gateway.review.pairs_per_day > 0)",
    )
    shared_gpu: bool | None = Field(
        default=None,
        description="Old and new share GPUs during the canary (then canary_plan is needed); "
        "unset: not stated, the memory item is missing",
    )
    canary_plan: str | None = Field(
        default=None, description="The JSON `switchover plan canary ... --json` wrote (relative to switchover.yaml)"
    )
    cache_key: Literal["versioned", "no_cache", "unversioned"] | None = Field(
        default=None,
        description="How caches in front of the engine are keyed: versioned (model id + weights, "
        "tokenizer and template hashes, `switchover cachekey`), no_cache, or unversioned (refused); unset: missing",
    )


class CostSettings(BaseModel):
    """`rollout.cost`: the cost-per-request gate of the large stage (from a bench's throughput and a GPU-hour price)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    gpu_hour_price: float | None = Field(
        default=None, gt=0, description="Price of one GPU-hour of new's hardware (any currency; unset: missing)"
    )
    old_gpu_hour_price: float | None = Field(
        default=None, gt=0, description="Old's GPU-hour price (default: gpu_hour_price)"
    )
    gpus_new: int = Field(default=1, ge=1, le=4096, description="GPUs one new replica uses")
    gpus_old: int = Field(default=1, ge=1, le=4096, description="GPUs one old replica uses")
    bench: str | None = Field(
        default=None,
        description="A bench run directory measuring old and new (relative to switchover.yaml); "
        "default: the bench of the newest passing check",
    )
    max_ratio: float = Field(default=1.0, gt=0, description="New's cost per request may be at most this times old's")
    large_weight: int = Field(
        default=50, ge=1, le=100, description="The first stage with at least this weight is the large stage"
    )
