"""switchover.yaml `bench:` section (kept import-light: only pydantic, so loading the config stays fast)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from switchover.inputs import Count, Seconds, Tokens


class BenchSlos(BaseModel):
    """Objectives a bench run is judged against (switchover.yaml `bench.slos`); all optional."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    ttft_p99_ms: float | None = Field(default=None, gt=0, description="p99 TTFT limit per step, ms")
    tpot_p99_ms: float | None = Field(default=None, gt=0, description="p99 TPOT limit per step, ms")
    e2e_p99_ms: float | None = Field(default=None, gt=0, description="p99 E2E limit per step, ms")
    max_error_rate: float | None = Field(default=None, ge=0, le=1, description="Error-rate limit per step")
    max_regression_pct: float | None = Field(
        default=None, ge=0, description="New may be at most this % worse than old on a p99 (only when significant)"
    )


class BenchSection(BaseModel):
    """switchover.yaml `bench:` — workload defaults and the SLOs a run is judged against."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    buckets: list[Tokens] | None = Field(default=None, max_length=64, description="Input-length buckets in tokens")
    output_tokens: Tokens | None = Field(default=None, description="Output tokens per request")
    concurrency: list[Count] | None = Field(default=None, max_length=64, description="Concurrency ladder")
    requests: Count | None = Field(default=None, description="Measured requests per step")
    duration_s: Seconds | None = Field(default=None, description="Measuring time per step, s")
    seed: int | None = None
    slos: BenchSlos = Field(default_factory=BenchSlos)
