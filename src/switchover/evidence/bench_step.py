"""What one bench step measured, as summary.json keeps it: the step summary (latencies, throughput, lengths,
steadiness) and the client's own share of the step; bench writes these, check, plan and rollout read them."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from switchover.measure.distribution import Dist

STEADY_FRACTION = 0.9  # a step is steady when it held >= 90% of its target concurrency (or rate)
# the labels that place a step in a run: its summary, its start and end, its A/B comparison
EndpointLabel = Annotated[str, Field(description="The endpoint's label (old, new, ...: the plan's endpoints)")]
StepIndex = Annotated[
    int, Field(description="The load level: its index in the plan's concurrency (or rates) list; 0 for a trace")
]
RepeatIndex = Annotated[int, Field(description="Which repetition of the step (0 up to the plan's repeats - 1)")]
BucketLabel = Annotated[
    str | None,
    Field(description="The input-length bucket: its target prompt tokens (one of the plan's buckets), or 'dataset'"),
]


class Steady(BaseModel):
    """Whether the step held its target load while it measured."""

    reached: bool | None
    achieved: float | None = Field(description="Mean in-flight requests (concurrency mode) or sent req/s (rate mode)")
    target: float | None
    note: str = ""


class LengthCheck(BaseModel):
    """Achieved vs wanted token counts (ISL from usage.prompt_tokens; N vs re-tokenized and max_tokens)."""

    isl_target: int | None = None
    isl_mean: float | None = None
    isl_min: int | None = None
    isl_max: int | None = None
    isl_off_by_more_than_1: int = 0
    isl_unreported: int = 0
    osl_target: int | None = None
    n_below_target: int = 0
    n_above_target: int = 0
    n_usage_missing: int = 0
    retok_compared: int = 0
    retok_mismatch: int = 0
    retok_mean_abs_diff: float | None = None


class WorkerLoad(BaseModel):
    """One worker process's share of a multi-process step: its target and what it achieved."""

    worker: int
    target: float | None = Field(description="its streams (concurrency mode) or req/s (rate mode)")
    achieved: float | None
    reached: bool | None
    requests: int
    failed: int
    stopped: str | None = None


class StepSummary(BaseModel):
    """Everything measured in one step of one endpoint (latencies in ms)."""

    endpoint: EndpointLabel
    step: StepIndex
    repeat: RepeatIndex = 0
    concurrency: int | None = Field(
        default=None, description="Requests kept in flight (concurrency mode); None in rate or trace mode"
    )
    rate: float | None = Field(default=None, description="Target arrival rate, req/s (rate mode); None otherwise")
    bucket: BucketLabel = None
    requests: int = Field(description="Measured requests (warm-up excluded)")
    warmup: int = Field(description="Warm-up requests (not measured)")
    ok: int
    failed: int
    duration_s: float | None = Field(
        description="From the first measured send to the last end, s (a resumed step's outage left out); None: no span"
    )
    req_per_s: float | None = Field(description="Successful requests / duration_s")
    out_tok_per_s: float | None = Field(
        description="Output tokens (N) of the successful requests / duration_s; None unless every one of them has N"
    )
    chunks_per_s: float | None = Field(
        description="Events carrying choices received by the successful requests / duration_s"
    )
    goodput_req_per_s: float | None = Field(
        default=None, description="Requests meeting every SLO / duration_s; None without SLOs"
    )
    slo_attainment: float | None = Field(
        default=None, description="Share of the measured requests meeting every SLO; None without SLOs"
    )
    error_rate: float | None = Field(description="failed / requests; None: no measured request")
    errors: dict[str, int] = Field(default_factory=dict, description="Failed requests by failure kind")
    ttft_ms: Dist | None = None
    tpot_ms: Dist | None = None
    itl_ms: Dist | None = None
    e2e_ms: Dist | None = None
    ntpot_ms: Dist | None = None
    missing: dict[str, dict[str, int]] = Field(default_factory=dict, description="metric -> reason -> requests")
    lengths: LengthCheck = Field(default_factory=LengthCheck)
    steady: Steady | None = None
    one_read: int = Field(
        default=0,
        description="Successful requests (N > 1) whose tokens all arrived in one read: "
        "TPOT 0 and TTFT = E2E (the server flushed them together, or the client read late)",
    )
    itl_zero: int = Field(
        default=0,
        description="ITL gaps of 0: events that arrived in the same read (coalesced by the server or the network); "
        "they pull the ITL percentiles down, so the step says how many of `itl_ms.count` they are",
    )
    workers: list[WorkerLoad] = Field(default_factory=list, description="bench --workers: each process's load")
    client_load: float | None = Field(default=None, description="Share of the calibrated client ceiling used")
    client_flag: bool = False


class ClientQueue(BaseModel):
    """One step's requests on the wire vs waiting in the client."""

    endpoint: str
    step: int
    repeat: int = 0
    bucket: str | None = None
    concurrency: int | None = Field(default=None, description="Requests asked to be in flight (concurrency mode)")
    rate: float | None = None
    on_wire: float | None = Field(default=None, description="Mean requests out at the server: req/s × mean E2E")
    in_client: float | None = Field(
        default=None, description="Mean slots waiting in the client: concurrency − on_wire (concurrency mode)"
    )
    send_lag_ms_mean: float | None = Field(
        default=None,
        description="Mean time from when a request could go (its slot freed, or its scheduled time) to its send, ms",
    )
    send_lag_ms_max: float | None = None
    client_bound: bool | None = Field(
        default=None,
        description="The client held back load: on the wire below "
        f"{STEADY_FRACTION:.0%} of the concurrency asked, or sends late in rate mode",
    )


class ClientMemory(BaseModel):
    """The bench process's memory: before the first step (dataset and prompts loaded) and at its peak."""

    idle_rss_mb: float | None = Field(default=None, description="Resident memory before the first step, MB")
    peak_rss_mb: float | None = Field(default=None, description="Peak resident memory of the process, MB")
    open_files_limit: int | None = Field(default=None, description="RLIMIT_NOFILE soft limit the run had")

    @property
    def growth_mb(self) -> float | None:
        return None if self.idle_rss_mb is None or self.peak_rss_mb is None else self.peak_rss_mb - self.idle_rss_mb
