"""What a bench run found besides its step summaries, as summary.json keeps it: the A/B deltas and SLO checks,
the knee, a soak's windows and drift, and each bucket's fitted prompt length."""

from __future__ import annotations

from pydantic import BaseModel, Field

from switchover.evidence.bench_step import StepSummary


class MetricDelta(BaseModel):
    """new vs old on one metric at one step."""

    metric: str
    stat: str
    old: float
    new: float
    delta_pct: float | None
    p_value: float | None = Field(description="Mann-Whitney U, two-sided, on per-request samples")
    ci_low: float | None = Field(default=None, description="Bootstrap 95% CI of new − old for the stat")
    ci_high: float | None = None
    significant: bool
    n_old: int
    n_new: int


class SloCheck(BaseModel):
    name: str
    endpoint: str
    step: int
    concurrency: int | float | None
    value: float | None
    limit: float
    passed: bool
    note: str = ""


class KneeResult(BaseModel):
    """Where (and whether) the curve bends, with a bootstrap CI and what happens past it."""

    metric: str = Field(description="e.g. tpot p99")
    found: bool
    concurrency: float | None = Field(default=None, description="Fitted knee (may fall between ladder steps)")
    step_concurrency: int | float | None = Field(default=None, description="Highest ladder value at or below it")
    ci_low: float | None = None
    ci_high: float | None = None
    bootstrap_found: float | None = Field(default=None, description="Share of resamples that found a knee")
    slope_before: float | None = None
    slope_after: float | None = None
    verdict: str | None = Field(default=None, description="queue | slow | both | unclear (past the knee)")
    ttft_growth: float | None = None
    tpot_growth: float | None = None
    message: str
    notes: list[str] = Field(default_factory=list)


class Window(BaseModel):
    """One window of a soak step: its requests (by completion time) summarised, and memory when it closed."""

    endpoint: str
    index: int
    start_s: float = Field(description="seconds since the step started")
    end_s: float
    start_wall: float
    summary: StepSummary
    client_rss_mb: float | None = Field(default=None, description="this process's resident memory at the close")
    engine_rss_mb: float | None = Field(default=None, description="engine /metrics process_resident_memory_bytes")
    partial: bool = Field(
        default=False,
        description="the step's last window, cut short by the step's end: its "
        "rates are over a shorter span (the drift table and the timeline leave it out)",
    )


class DriftRow(BaseModel):
    """First vs last full window of one endpoint on one quantity."""

    endpoint: str
    metric: str
    first: float | None
    last: float | None
    change_pct: float | None
    flagged: bool
    note: str = ""


class Soak(BaseModel):
    """summary.json `soak`: how the run was checkpointed, its windows and the drift between them."""

    window_s: float
    checkpoint_s: float
    checkpoints: int = 0
    resumed: list[float] = Field(default_factory=list, description="wall times at which the run was resumed")
    windows: list[Window] = Field(default_factory=list)
    drift: list[DriftRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


# Short, common words: one token each in most BPE vocabularies, so a prompt grows about one token per word.
_FILLER_TEXT = (
    "the of and to in is it for on with as by at from this that be or are not all can new one use "
    "data value name list file path line type time text key item test code call read write open close "
    "start end first last next set get add run load save find make show keep move send hold turn pick "
    "red blue green black white small large short long high low left right over under near far good"
)
FILLER: list[str] = _FILLER_TEXT.split()


class BucketFit(BaseModel):
    """How a bucket's prompt length was fitted on one server."""

    bucket: str
    target: int
    words: int
    achieved: int
    deviation: int
    method: str
    probes: int
    vocab: list[str] = Field(default_factory=lambda: list(FILLER), description="words prompts are made of")
