"""Typed inputs and results of a bench run (config.json, endpoints.json and summary.json of a run)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from switchover.config.bench import BenchSlos
from switchover.evidence.bench_caps import StepLimit
from switchover.evidence.bench_findings import BucketFit, KneeResult, MetricDelta, SloCheck, Soak
from switchover.evidence.bench_step import (
    BucketLabel,
    ClientMemory,
    ClientQueue,
    EndpointLabel,
    RepeatIndex,
    StepIndex,
    StepSummary,
)

SUMMARY_MAX_BYTES = 64 << 20  # the largest summary.json a reader loads (plan, rollout: a bench run's summary)
DEFAULT_BUCKETS = [128, 512, 2048]
DEFAULT_LADDER = [1, 2, 4, 8, 16, 32, 64]


class EndpointSpec(BaseModel):
    """One endpoint to load: a label (old/new/...), where it is, what serves it."""

    label: str
    url: str
    engine: str | None = Field(default=None, description="engine profile name; None = plain OpenAI API")
    model: str | None = None
    api_key_env: str | None = None


class BenchPlan(BaseModel):
    """Everything that defines a run; saved as config.json so the run can be repeated."""

    model_config = ConfigDict(extra="forbid")

    name: str = "bench"
    endpoints: list[EndpointSpec]
    api: Literal["completions", "chat"] = "completions"
    buckets: list[int] = Field(default_factory=lambda: list(DEFAULT_BUCKETS))
    output_tokens: int = Field(default=128, gt=0)
    concurrency: list[int] | None = Field(default_factory=lambda: list(DEFAULT_LADDER))
    rates: list[float] | None = None
    arrival: Literal["constant", "poisson", "gamma"] = "constant"
    burstiness: float = Field(default=1.0, gt=0)
    max_inflight: int | None = Field(default=None, gt=0)
    requests: int | None = Field(default=None, gt=0, description="measured requests per step")
    duration_s: float | None = Field(default=None, gt=0, description="measuring time per step")
    warmup_requests: int = Field(default=1, ge=0)
    warmup_s: float = Field(default=0.0, ge=0)
    repeats: int = Field(default=1, ge=1, description="ABAB repetitions of each step")
    seed: int = 0
    allow_prefix_cache: bool = False
    dataset: str | None = None
    trace_speed: float = Field(default=1.0, gt=0)
    temperature: float = 0.0
    max_error_rate: float | None = Field(default=None, ge=0, le=1)
    slos: BenchSlos = Field(default_factory=BenchSlos)
    knee_metric: Literal["tpot", "ttft", "e2e", "itl"] = "tpot"
    knee_percentile: float = Field(default=99.0, gt=0, le=100)
    tokenizer: str | None = Field(default=None, description="HF folder with tokenizer.json, to cross-check N")
    scrape_interval_s: float = Field(default=1.0, ge=0, description="0 = do not scrape /metrics")
    use_tokenize: bool = True
    timeout_s: float = Field(default=300.0, gt=0)
    calibrate: bool = True
    checkpoint_s: float | None = Field(
        default=None,
        gt=0,
        description="soak: checkpoint every this many seconds "
        "(rows in closed Parquet parts, checkpoint.json, summary.json, report.html)",
    )
    window_s: float = Field(default=3600.0, gt=0, description="soak: drift window length, seconds")
    workers: int = Field(default=1, ge=1, le=64, description="load-generating processes per step (one schedule)")

    @model_validator(mode="after")
    def _one_load_shape(self) -> BenchPlan:
        if self.dataset is None and not self.buckets:
            raise ValueError("give ISL buckets or a dataset")
        if any(b < 1 for b in self.buckets):
            raise ValueError("buckets must be positive token counts")
        if self.concurrency and any(c < 1 for c in self.concurrency):
            raise ValueError("concurrency values must be at least 1")
        if self.rates and any(r <= 0 for r in self.rates):
            raise ValueError("rates must be positive")
        if self.requests is None and self.duration_s is None:
            raise ValueError("a step needs --requests or --duration")
        if self.workers > 1 and self.checkpoint_s is not None:
            raise ValueError("--workers and --checkpoint-every cannot be combined yet: a soak runs in one process")
        return self


class EndpointInfo(BaseModel):
    """Fingerprint of one endpoint as found at the start of the run."""

    label: str
    url: str
    engine: str | None
    engine_profile: str | None = Field(default=None, description="profile version read, when known")
    engine_version: str | None = Field(
        default=None,
        description="the release the endpoint reported (/version, llama.cpp /props build_info): the flag and metric "
        "spellings used are that release's; None: not reported (the newest are assumed, said in engine_version_note)",
    )
    engine_version_note: str | None = Field(
        default=None, description="what was assumed about the release's spellings; None: read exactly"
    )
    model: str
    served_models: list[str] = Field(default_factory=list)
    info: dict[str, Any] = Field(default_factory=dict, description="bodies of /version, /props ... (trimmed)")
    output_control: str = Field(description="how the output length is forced, or why it cannot be")
    length_fits: list[BucketFit] = Field(default_factory=list)
    token_count_method: str | None = None
    chunk_stamps: str | None = Field(
        default=None,
        description="where chunk arrival times came from (kernel or "
        "user space), as the wire client observed it; None if nothing was received",
    )


_TIMING_ERROR = "Delay from the zero-work server stamping an event to the client taking its arrival time"


class Calibration(BaseModel):
    """The client's own ceiling against a zero-work streaming server."""

    req_per_s: float = Field(description="Successful requests / duration_s: the client's ceiling")
    chunks_per_s: float = Field(description="Events carrying choices received by the successful requests / duration_s")
    us_per_chunk: float = Field(description="client wall time per chunk at the ceiling, µs")
    concurrency: int = Field(description="Requests kept in flight")
    chunks_per_request: int = Field(description="Events the zero-work server streams per request")
    requests: int = Field(description="Successful measured requests (warm-up excluded)")
    duration_s: float = Field(description="From the first measured send to the last end, s")
    errors: int = Field(default=0, description="Measured requests that failed")
    send_lag_p99_ms: float | None = Field(default=None, description="Not measured by the calibration: always null")
    timing_error_p50_us: float | None = Field(default=None, description=f"{_TIMING_ERROR}: median, µs; None: no stamps")
    timing_error_p99_us: float | None = Field(
        default=None, description=f"{_TIMING_ERROR}: 99th percentile, µs; None: no stamps"
    )
    chunk_stamps: str | None = Field(default=None, description="where the client's chunk times came from")
    note: str = ""


class AbStep(BaseModel):
    """new vs old at one step of one bucket."""

    bucket: BucketLabel
    step: StepIndex
    concurrency: int | float | None = Field(
        description="The step's load: its concurrency, or its rate (req/s) in rate mode"
    )
    deltas: list[MetricDelta] = Field(
        description="new vs old for TTFT, TPOT and E2E at p50 and p99 (those both endpoints measured)"
    )


class StepTime(BaseModel):
    """When one step of one endpoint ran (kept for the report, and to line /metrics scrapes up with steps)."""

    endpoint: EndpointLabel
    bucket: BucketLabel
    step: StepIndex
    repeat: RepeatIndex
    start_ns: int = Field(description="Its start, perf_counter_ns of the bench process (the clock of the request rows)")
    end_ns: int = Field(description="Its end, perf_counter_ns")
    start_wall: float = Field(description="Its start, wall-clock time")


class BenchReport(BaseModel):
    """summary.json: the typed result of a run."""

    name: str
    created_wall: float
    run_dir: str | None = None
    plan: BenchPlan
    endpoints: list[EndpointInfo]
    calibration: Calibration | None = None
    steps: list[StepSummary] = Field(default_factory=list)
    step_times: list[StepTime] = Field(default_factory=list)
    knees: dict[str, KneeResult] = Field(default_factory=dict, description="'<endpoint>/<bucket>' -> knee")
    ab: list[AbStep] = Field(default_factory=list)
    checks: list[SloCheck] = Field(default_factory=list)
    passed: bool | None = Field(default=None, description="None when no SLO was set")
    soak: Soak | None = Field(default=None, description="windows, drift and checkpoints of a soak run")
    interrupted: bool = False
    stopped_reason: str | None = None
    notes: list[str] = Field(default_factory=list)
    client: list[ClientQueue] = Field(
        default_factory=list,
        description="Per step: requests on the wire vs waiting in the client, and the send lag (bench/clientload.py)",
    )
    client_memory: ClientMemory | None = Field(default=None, description="The bench process's idle and peak RSS")
    limits: list[StepLimit] = Field(
        default_factory=list,
        description="Per step: which cap bound (request count or "
        "token budget, from /metrics) and the out-of-memory answers (bench/capbind.py)",
    )
