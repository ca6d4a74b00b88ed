"""The large stage's cost-per-request gate: a bench's measured throughput of old and new priced by the GPU-hour.

Per bucket both endpoints measured, each endpoint's step with the most output tokens per second (and no more than
MAX_STEP_ERRORS failures) is its throughput at full use; one request then costs price × GPUs / 3600 / requests per
second. New's cost may be at most rollout.cost.max_ratio times old's in every bucket.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from switchover.config.rollout_entry import CostSettings
from switchover.errors import BadInput
from switchover.evidence.bench import SUMMARY_MAX_BYTES, BenchReport
from switchover.evidence.bench_step import StepSummary
from switchover.rollout.entry import COST, EntryItem
from switchover.textfile import load_json

MAX_STEP_ERRORS = 0.01  # a step where more than 1 % failed is not a throughput anyone can sell


class ArmCost(BaseModel):
    """One endpoint's cost per request in one bucket, at its best step."""

    endpoint: str
    bucket: int | str | None
    load: float | None = Field(description="The step's concurrency (or rate)")
    req_per_s: float
    out_tok_per_s: float
    tokens_per_request: float
    cost_per_request: float = Field(description="price × GPUs / 3600 / req_per_s")
    cost_per_1k_tokens: float


class BucketCost(BaseModel):
    bucket: int | str | None
    old: ArmCost
    new: ArmCost
    ratio: float = Field(description="new's cost per request / old's")


def best_step(steps: list[StepSummary], endpoint: str, bucket: int | str | None) -> StepSummary | None:
    """The endpoint's step of `bucket` with the most output tokens per second among those with few failures."""
    ok = [
        s
        for s in steps
        if s.endpoint == endpoint
        and s.bucket == bucket
        and s.out_tok_per_s
        and s.req_per_s
        and (s.error_rate or 0.0) <= MAX_STEP_ERRORS
    ]
    return max(ok, key=lambda s: s.out_tok_per_s or 0.0) if ok else None


def arm_cost(step: StepSummary, price: float, gpus: int) -> ArmCost:
    rps, tps = step.req_per_s or 0.0, step.out_tok_per_s or 0.0
    hourly = price * gpus
    return ArmCost(
        endpoint=step.endpoint,
        bucket=step.bucket,
        load=step.concurrency or step.rate,
        req_per_s=rps,
        out_tok_per_s=tps,
        tokens_per_request=tps / rps,
        cost_per_request=hourly / 3600 / rps,
        cost_per_1k_tokens=hourly / 3600 / tps * 1000,
    )


def bucket_costs(report: BenchReport, cost: CostSettings) -> list[BucketCost]:
    """Old and new's cost per request in every bucket both measured."""
    assert cost.gpu_hour_price is not None
    old_price = cost.old_gpu_hour_price or cost.gpu_hour_price
    out = []
    buckets = list(dict.fromkeys(s.bucket for s in report.steps))
    for b in buckets:
        o, n = best_step(report.steps, "old", b), best_step(report.steps, "new", b)
        if o is None or n is None:
            continue
        co, cn = arm_cost(o, old_price, cost.gpus_old), arm_cost(n, cost.gpu_hour_price, cost.gpus_new)
        out.append(BucketCost(bucket=b, old=co, new=cn, ratio=cn.cost_per_request / co.cost_per_request))
    return out


def judge_cost(cost: CostSettings, report: BenchReport | None, problem: str | None) -> EntryItem:
    """pass when new's cost per request is within max_ratio of old's in every bucket; missing without a price or
    a bench measuring both."""
    base = dict(id=COST, title="cost per request of new at the large stage")
    cmd = (
        "rollout.cost.gpu_hour_price: PRICE and a bench of old and new (switchover check's bench part, or "
        "switchover bench ... with rollout.cost.bench: RUN_DIR)"
    )
    if cost.gpu_hour_price is None:
        return EntryItem(**base, status="missing", reason="rollout.cost.gpu_hour_price is not stated", command=cmd)
    if report is None:
        return EntryItem(**base, status="missing", reason=problem or "no bench run to price", command=cmd)
    rows = bucket_costs(report, cost)
    if not rows:
        return EntryItem(
            **base,
            status="missing",
            reason="the bench has no bucket where both old and new have a "
            f"step with output tokens per second and ≤ {MAX_STEP_ERRORS:.0%} failures",
            command=cmd,
        )
    worst = max(rows, key=lambda r: r.ratio)
    text = (
        f"bucket {worst.bucket}: new {worst.new.cost_per_request:.3g} per request "
        f"({worst.new.out_tok_per_s:.0f} tok/s at load {_load(worst.new)}) vs old {worst.old.cost_per_request:.3g} "
        f"({worst.old.out_tok_per_s:.0f} tok/s at load {_load(worst.old)}): ratio {worst.ratio:.2f}, "
        f"max {cost.max_ratio:g}"
    )
    if worst.ratio > cost.max_ratio:
        return EntryItem(**base, status="fail", reason=text)
    return EntryItem(**base, status="pass", reason=text)


def _load(arm: ArmCost) -> str:
    return "?" if arm.load is None else f"{arm.load:g}"


def read_bench(path: Path) -> tuple[BenchReport | None, str | None]:
    """A bench run's summary.json, or why it cannot be read."""
    file = path / "summary.json" if path.is_dir() else path
    try:
        return BenchReport.model_validate(load_json(file, max_bytes=SUMMARY_MAX_BYTES, what="bench summary.json")), None
    except BadInput as exc:
        return None, exc.message
    except ValidationError as exc:
        return None, f"{file}: not a bench summary.json ({exc.error_count()} problems)"
