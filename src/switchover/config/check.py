"""switchover.yaml `check:` section: which parts of the pre-flight run, with what inputs and thresholds.
Import-light (pydantic only) so that loading the config stays fast."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from switchover.inputs import MAX_GIB, MAX_SECONDS, Count, Seconds, Tokens


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ProbePart(_Strict):
    enabled: bool = True
    api: str = Field(default="chat", pattern="^(chat|completions)$")
    only: list[str] | None = Field(default=None, description="probe ids or categories to run (default: all)")
    skip: list[str] | None = Field(default=None, description="probe ids or categories to skip")
    budget_s: Seconds = Field(default=30.0, description="time cap of an open-ended generation")


class VerifyPart(_Strict):
    enabled: bool = True
    prompts: str | None = Field(default=None, description="JSONL prompts (default: the built-in set)")
    max_prompts: int | None = Field(default=6, ge=1, description="use at most this many prompts")
    structured: int = Field(default=3, ge=0, le=100, description="JSON-schema prompts per side")
    long_inputs: bool = True


class BenchPart(_Strict):
    enabled: bool = True
    concurrency: list[Count] = Field(default=[1, 2, 4], max_length=64, description="short A/B ladder")
    buckets: list[Tokens] = Field(default=[128], max_length=64, description="input-length buckets, tokens")
    output_tokens: Tokens = Field(default=32)
    requests: Count = Field(default=12, description="measured requests per step")
    api: str = Field(default="completions", pattern="^(chat|completions)$")
    timeout_s: Seconds = Field(default=120.0)


class PlanPart(_Strict):
    enabled: bool = True
    model_dir: str | None = Field(default=None, description="HF folder (config.json) or GGUF of the new model")
    gpu: str | None = Field(default=None, description="GPU name from the catalog, e.g. 'H100 80GB'")
    gpu_memory_gib: float | None = Field(default=None, gt=0, le=MAX_GIB, description="instead of a catalog GPU")
    old_launch: str | None = Field(default=None, description="the old engine's launch command, to translate")


class DiffModelPart(_Strict):
    enabled: bool = True
    old: str | None = Field(default=None, description="old model folder (HF) or GGUF file")
    new: str | None = Field(default=None, description="new model folder (HF) or GGUF file")


class LiveModelPart(_Strict):
    enabled: bool = True
    texts: list[str] | None = Field(default=None, description="texts whose token counts are compared")


class MetricsPart(_Strict):
    enabled: bool = True


class GracePart(_Strict):
    enabled: bool = True
    max_tokens: Tokens | None = Field(default=None, description="the longest generation the API allows")
    drain_grace_s: float | None = Field(
        default=None, ge=0, le=MAX_SECONDS, description="orchestrator grace period, seconds"
    )
    deploy_dir: str | None = Field(default=None, description="deploy YAML to scan for grace periods and timeouts")
    client_timeout_s: Seconds | None = Field(default=None)
    margin_s: float | None = Field(
        default=None, ge=0, le=MAX_SECONDS, description="default: 10% of the generation, >= 5 s"
    )


class RollbackPart(_Strict):
    """The way back (docs/checklist.md#rollout.rollback): the last drill, the rollback prerequisites checked now, the
    holding window."""

    enabled: bool = True


class ClientsPart(_Strict):
    """What the clients send through the gateway, and which of their defaults differ on new
    (docs/checklist.md#rollout.client_defaults): read from the gateway ledger."""

    enabled: bool = True
    since_s: Seconds | None = Field(default=None, description="only ledger rows of the last N seconds (default: all)")


class Thresholds(_Strict):
    """Limits the rules use; a None falls back to `bench.slos`, then to the default shown in docs/check.md."""

    max_error_rate: float | None = Field(default=None, ge=0, le=1)
    max_regression_pct: float | None = Field(default=None, ge=0)
    structured_drop: float = Field(default=0.2, ge=0, le=1, description="allowed drop of the valid-JSON rate")
    longest_input_tolerance: float = Field(default=0.1, ge=0, le=1, description="allowed shrink of the longest input")
    tokenizer_shift_pct: float = Field(default=5.0, ge=0, description="allowed token-count change per text, %")


class CheckSection(_Strict):
    """`check:` in switchover.yaml (every field optional)."""

    name: str = "check"
    runs_dir: str = Field(default="runs", description="where the run directory goes; relative to the config file")
    probe: ProbePart = Field(default_factory=ProbePart)
    verify: VerifyPart = Field(default_factory=VerifyPart)
    bench: BenchPart = Field(default_factory=BenchPart)
    plan: PlanPart = Field(default_factory=PlanPart)
    diff_model: DiffModelPart = Field(default_factory=DiffModelPart)
    live_model: LiveModelPart = Field(default_factory=LiveModelPart)
    metrics: MetricsPart = Field(default_factory=MetricsPart)
    grace: GracePart = Field(default_factory=GracePart)
    rollback: RollbackPart = Field(default_factory=RollbackPart)
    clients: ClientsPart = Field(default_factory=ClientsPart)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    waive: dict[str, str] = Field(
        default_factory=dict, description="item id -> why a not-run of this item is acceptable"
    )
