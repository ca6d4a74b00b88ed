"""The `gateway:` section of switchover.yaml: routing weight, rollback line, fallback, kill switch, shadow."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FallbackConfig(_Strict):
    """When a request routed to new is replayed on old (only before any byte reached the client)."""

    statuses: list[int] = Field(default=[500, 502, 503, 504], description="Statuses from new that fall back to old")
    on_timeout_ms: float = Field(
        default=5000, gt=0,
        description="No first SSE event (streaming) or no complete body (non-streaming) from new within this → old",
    )

    @field_validator("statuses")
    @classmethod
    def _statuses(cls, value: list[int]) -> list[int]:
        bad = [s for s in value if not 100 <= s <= 599]
        if bad:
            raise ValueError(f"HTTP statuses are 100-599, got {bad}")
        return value


class KillSwitchConfig(_Strict):
    """Latch the weight to 0 when new fails too often; cleared only by `switchover gateway reset`."""

    enabled: bool = True
    window: float = Field(default=60.0, gt=0, description="Sliding window, seconds")
    min_samples: int = Field(default=20, ge=1, description="New-arm requests needed in the window before it can trip")
    max_fallback_ratio: float = Field(
        default=0.2, gt=0, le=1, description="Trip when (fallbacks + errors) / new-arm requests exceeds this"
    )


class ShadowConfig(_Strict):
    """Sampled mirroring to new (or a third upstream); responses are consumed and measured, never returned."""

    percent: float = Field(default=0.0, ge=0, le=100, description="Share of requests mirrored, percent")
    upstream: str = Field(default="new", description="'new', or the base URL of a third upstream")
    model: str | None = Field(default=None, description="Model name for a third upstream (default: as asked)")
    max_concurrency: int = Field(default=4, ge=1, description="Mirrors in flight at most; beyond it, dropped")
    max_tokens_clamp: int | None = Field(default=None, ge=1, description="Cap max_tokens of mirrored requests")
    timeout_ms: float = Field(default=60000, gt=0, description="A mirror running longer than this is abandoned")

    @field_validator("upstream")
    @classmethod
    def _upstream(cls, value: str) -> str:
        if value != "new" and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be 'new' or an http(s):// URL, got {value!r}")
        return value.rstrip("/")


class ListenConfig(_Strict):
    """Where the gateway accepts clients."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)


class TimeoutsConfig(_Strict):
    """Upstream timeouts that bound every request (no request can hang past them)."""

    connect_ms: float = Field(default=2000, gt=0)
    first_byte_ms: float = Field(default=120000, gt=0, description="Old arm: no first event / body within this")
    idle_ms: float = Field(default=60000, gt=0, description="Gap between two reads of a streamed response")


class GatewayConfig(_Strict):
    """`gateway:` in switchover.yaml. `weight` and `rollback` are the lines a rollout edits (hot-reloaded)."""

    weight: float = Field(default=0.0, ge=0, le=100, description="Percent of tenant buckets routed to new")
    rollback: bool = Field(default=False, description="true: everything to old, at once, without a restart")
    tenant_header: str = Field(default="x-tenant-id", description="Header naming the tenant; else the API key")
    max_context_tokens: int | None = Field(
        default=None, ge=1, description="Requests with more estimated prompt tokens stay on old"
    )
    tokenizer: str | None = Field(
        default=None, description="tokenizer.json used to count prompt tokens; default: the bytes/4 estimate"
    )
    bytes_per_token: float = Field(default=4.0, gt=0, description="The byte estimate used without a tokenizer")
    bypass_paths: list[str] = Field(default=["/v1/embeddings"], description="Path prefixes always sent to old")
    override_header_enabled: bool = Field(
        default=False, description="Honour `X-Switchover-Route: old|new` (for testing only)"
    )
    expose_arm_header: bool = Field(default=False, description="Add `X-Switchover-Arm` to responses (debugging)")
    fallback: FallbackConfig = Field(default_factory=FallbackConfig)
    kill_switch: KillSwitchConfig = Field(default_factory=KillSwitchConfig)
    shadow: ShadowConfig = Field(default_factory=ShadowConfig)
    timeouts: TimeoutsConfig = Field(default_factory=TimeoutsConfig)
    drain_seconds: float = Field(default=30.0, ge=0, description="On SIGTERM, how long in-flight requests may run")
    listen: ListenConfig = Field(default_factory=ListenConfig)
    front: Literal["raw", "aiohttp"] = Field(
        default="raw", description="HTTP server: the gateway's own asyncio front (raw) or aiohttp's; read at start"
    )
    run_dir: str = Field(
        default="runs/gateway",
        description="Ledger (ledger-NNNNN.jsonl), log and kill-switch state; relative to the config file",
    )
    ledger_rotate_mb: float = Field(default=64.0, gt=0, description="Start a new ledger file past this size")
    reload_poll_s: float = Field(default=1.0, gt=0, description="How often the config file is checked for changes")

    @field_validator("bypass_paths")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        bad = [p for p in value if not p.startswith("/")]
        if bad:
            raise ValueError(f"paths start with '/', got {bad}")
        return value

    @field_validator("tenant_header")
    @classmethod
    def _header(cls, value: str) -> str:
        if not value or any(c in value for c in " :\r\n"):
            raise ValueError(f"not a header name: {value!r}")
        return value.lower()

    @model_validator(mode="after")
    def _sane(self) -> GatewayConfig:
        if self.fallback.on_timeout_ms > self.timeouts.first_byte_ms:
            raise ValueError("fallback.on_timeout_ms must not exceed timeouts.first_byte_ms")
        return self

    def resolved_run_dir(self, config_path: Path | None) -> Path:
        """run_dir, relative to the directory of the config file."""
        p = Path(self.run_dir).expanduser()
        if not p.is_absolute() and config_path is not None:
            p = config_path.resolve().parent / p
        return p
