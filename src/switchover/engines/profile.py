"""Engine profiles: what each engine's flags, API, metrics, readiness and memory knobs mean, as cited data.

Every fact lives in `engines/data/<engine>.yaml` with a `source:` (file and version read). Logic elsewhere
looks facts up here instead of branching on the engine name (DESIGN.md principle 2).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any, Literal

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from switchover.engines.cited import CitedFact
from switchover.engines.launch_spec import FlagSpec, LaunchSyntax
from switchover.engines.names import ALIASES, ENGINES
from switchover.engines.versions import check_release_form, release_key, version_matches
from switchover.errors import BadInput

MetricType = Literal["counter", "gauge", "histogram", "summary"]
MetricUnit = Literal["seconds", "ratio", "tokens", "requests", "tokens_per_second", "blocks"]

#: Metric intents every consumer may ask for; a profile omits the ones its engine lacks.
METRIC_INTENTS: tuple[str, ...] = (
    "ttft",
    "itl",
    "tpot",
    "e2e",
    "queue_time",
    "running",
    "waiting",
    "kv_usage",
    "prompt_tokens",
    "generation_tokens",
    "preemptions",
    "prefix_cache_hits",
    "prefix_cache_queries",
    "prefix_cache_hit_rate",
    "request_success",
    "request_failure",
    "generation_throughput",
    "kv_capacity",
)


class _Cited(CitedFact):
    source: str = Field(description="file and line in the version read, e.g. 'vllm 0.33.0: vllm/x.py'")
    verified: bool = Field(default=True, description="False when the fact was inferred, not read")
    note: str | None = None


class MetricSpec(_Cited):
    """One Prometheus series as scraped (counters carry `_total` where prometheus_client appends it)."""

    name: str
    type: MetricType
    unit: MetricUnit
    buckets: list[float] | None = None
    labels: list[str] = Field(default_factory=list)
    versions: str | None = Field(
        default=None,
        description="release range this spelling holds for ('>=0.9.2', "
        "'<0.10.2'), read in the release data; None = every release the profile covers",
    )

    @model_validator(mode="before")
    @classmethod
    def _newest_variant(cls, data: Any) -> Any:
        """An intent's list of variants read without a release (a raw profile) is its newest, the last listed: what
        load_profile keeps when no version is given."""
        if isinstance(data, list) and data:
            return data[-1]
        return data


class MetricsEndpoint(_Cited):
    """Where the metrics are and how they are switched on."""

    path: str
    enabled_by_default: bool
    enable: str | None = Field(default=None, description="flag or YAML key that turns metrics on")
    identity_labels: list[str] = Field(
        default_factory=list,
        description="labels that say which deployment a series is from (the model served, an engine-core index), "
        "not which subset of requests: `alerts translate` may drop a matcher on one (with a warning)",
    )
    identity_source: str | None = Field(default=None, description="where the identity labels are defined")

    @model_validator(mode="after")
    def _identity_cited(self) -> MetricsEndpoint:
        if self.identity_labels and not self.identity_source:
            raise ValueError("identity_labels need identity_source (the file that defines them)")
        return self


class ApiSemantics(BaseModel):
    """OpenAI-compatible API behaviour of one engine; `sources` cites every field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ignore_eos_field: str | None = Field(description="request field that makes generation ignore EOS")
    min_tokens_field: str | None = Field(description="request field forcing a minimum output length")
    tokenize_path: str | None = Field(description="path of the tokenize endpoint")
    max_stop_strings: int | None = Field(description="None = no documented limit")
    stop_matching: Literal["text", "token_ids", "text_suffix_regex"]
    stop_string_in_output: bool
    finish_reasons: list[str]
    unknown_field_policy: Literal["ignore", "reject", "passthrough"]
    unknown_model_policy: Literal["reject_404", "accept", "lora_adapter_fallback", "ignore"]
    seed_per_request: Literal["honored", "needs_flag", "unverified"]
    n_gt_1: Literal["supported", "ignored", "limited"]
    default_sampling: dict[str, Any]
    generation_config_applied: bool = Field(description="model generation_config.json applied by default")
    validation_status: int
    overload_status: int | None
    error_body: Literal["openai_nested", "openai_flat", "tgi", "llamacpp_nested"]
    streaming_usage: bool = Field(description="stream_options.include_usage honoured")
    cached_tokens_reported: Literal["always", "with_flag", "never", "field_present"]
    max_tokens_omitted: str
    context_overflow: Literal["clamp", "reject_400", "reject_422", "finish_length"]
    openai_json_schema: bool = Field(description="OpenAI-shaped response_format json_schema accepted")
    sources: dict[str, str]
    unverified: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _every_field_cited(self) -> ApiSemantics:
        facts = set(type(self).model_fields) - {"sources", "unverified"}
        missing = sorted(facts - set(self.sources))
        if missing:
            raise ValueError(f"api facts without a source: {', '.join(missing)}")
        bad = sorted(set(self.unverified) - facts)
        if bad:
            raise ValueError(f"unverified lists unknown api facts: {', '.join(bad)}")
        return self


class Readiness(_Cited):
    """What the engine answers while loading, and when it is ready."""

    loading: Literal["connection_refused", "http_503"]
    loading_body: dict[str, Any] | None = None
    warmup_status: int | None = Field(default=None, description="health status after load, before ready")
    ready_path: str = "/health"
    ready_status: int = 200
    health_runs_generation: bool = False
    unhealthy_status: int | None = None
    other_paths: list[str] = Field(default_factory=list)

    @property
    def loading_message(self) -> str | None:
        """The error message of the engine's loading answer (`loading_body.error.message`), when it has one."""
        error = (self.loading_body or {}).get("error")
        message = error.get("message") if isinstance(error, dict) else None
        return str(message) if message else None

    def is_loading_answer(self, status: int | None, text: str) -> bool:
        """Whether an HTTP answer is this engine's "still loading" answer: its status (503) and, when the profile
        records one, its loading message in the body. An engine that refuses connections while it loads has none."""
        if self.loading != "http_503" or status != 503:
            return False
        message = self.loading_message
        return message is None or message.lower() in text.lower()


class ContextLengthSource(_Cited):
    """Where a running server reports the context length a request may use (tokens): a field of its `/v1/models`
    entry for the model, or of another GET path's JSON object; `versions` is the release range it holds for."""

    path: str = Field(pattern=r"^/[A-Za-z0-9_./-]*$", description="GET path, e.g. /v1/models or /props")
    field: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
        description="dotted key: in the model's entry of /v1/models' `data`, else in the whole object",
    )
    versions: str | None = Field(
        default=None, description="PEP 440 range (build tags for llama.cpp); None: all releases read"
    )

    @field_validator("versions")
    @classmethod
    def _range_parses(cls, value: str | None) -> str | None:
        if value is not None:
            _range(value)  # InvalidSpecifier: refused when the profile loads
        return value

    @property
    def where(self) -> str:
        """The field as a user reads it, e.g. '/v1/models max_model_len'."""
        return f"{self.path} {self.field}"

    def holds_at(self, version: str | None) -> bool:
        """Whether this source holds at a release (None: any release read)."""
        return self.versions is None or version is None or in_range(self.versions, version)


class RequestCapSource(ContextLengthSource):
    """Where a running server reports its request-count cap (the requests it runs at once: llama.cpp's /props
    total_slots), a field of a GET path's JSON object; `versions` is the release range it holds for."""


class Overhead(_Cited):
    """A memory cost the engine pays outside the KV pool, with a default from real logs."""

    gib: float
    at_batched_tokens: int | None = Field(
        default=None, description="measured at this max batched tokens; scaled linearly for other values"
    )


class ActivationModel(BaseModel):
    """Transient peak of the start-up profiling pass, from what drives it (plan/overhead.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile_tokens: Literal["max_batched_tokens", "max_model_len_unless_chunked"] = Field(
        description="tokens in the dummy forward: the step budget (V1) or a full max_model_len prefill (V0)"
    )
    chunked_above: int | None = Field(default=None, description="V0 turns chunked prefill on above this mml")
    chunked_tokens: int | None = Field(default=None, description="V0 step budget once chunked prefill is on")
    forward_bytes_per_token_element: float = Field(
        description="bytes per token per element of (hidden + 3 x intermediate/TP): MLP and residual tensors"
    )
    sampler_bytes_per_seq_vocab: dict[int, float] = Field(
        default_factory=dict,
        description="sampler warm-up bytes per (sequence x vocab entry), by max_num_seqs; "
        "log-interpolated between keys",
    )
    sampler_combines: Literal["max", "sum"] = Field(
        default="max", description="max: the forward's tensors are freed before the sampler runs"
    )
    base_gib: float = 0.0


class LoadOverheadModel(BaseModel):
    """Memory a weight load holds beyond the parameter bytes when the engine sizes its pool (plan/overhead.py):
    buffers built at model construction (rotary cos/sin cache) and the caching allocator's rounding of each
    parameter block, plus a fitted remainder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rope_cache_bytes_per_element: float = Field(
        default=0.0, description="bytes per (max_position x rotary dim) element of the cos/sin cache the model keeps"
    )
    allocator_round_mib: float = Field(
        default=0.0,
        description="blocks of at least allocator_large_mib are rounded up to a multiple of this (0: no rounding)",
    )
    allocator_large_mib: float = Field(default=10.0, description="smallest block rounded that way")
    base_gib: float = Field(default=0.0, description="fitted remainder (kernel images, small buffers)")


class OverheadBand(_Cited):
    """Overheads of one range of engine versions, each coefficient cited to the logs it was fitted on."""

    versions: str = Field(description="e.g. '>=0.8,<0.21' (numeric comparison, missing parts are 0)")
    default_fraction: float | None = None
    activation: ActivationModel | None = None
    non_torch_gib_by_tp: dict[int, float] = Field(default_factory=dict, description="largest key <= TP applies")
    cuda_graph_subtracted: bool = False
    cuda_graph_gib: float = 0.0
    baseline_held_gib_by_tp: dict[int, float] = Field(
        default_factory=dict,
        description="memory the process holds when the engine takes its free-memory baseline "
        "(CUDA context, distributed init), largest key <= TP; free at start = total "
        "- this (instead of memory.cuda_context_gib)",
    )
    weight_load: LoadOverheadModel | None = Field(
        default=None, description="memory the weight load holds beyond the parameter bytes (counted with non-torch)"
    )
    fitted_on: list[str] = Field(default_factory=list, description="calibration point ids (bench/data)")

    @field_validator("versions")
    @classmethod
    def _versions_parse(cls, value: str) -> str:
        """A spec the planner cannot read would fail at plan time; refuse it when the profile loads."""
        version_matches(value, (0,))
        return value


class Fp8KvBelow(_Cited):
    """What the engine does with an fp8 KV cache on a GPU below `min_sm` (hardware/capability.py warns with it)."""

    min_sm: int = Field(description="compute capability (e.g. 89) from which the engine reads fp8 KV natively")
    pool_bytes_per_element: float = Field(
        description="bytes per KV element the pool is sized with below min_sm "
        "(1: still fp8; 2: the engine falls back to 16-bit KV)"
    )
    consequence: str = Field(description="what the user gets below min_sm, from the engine's source")


class MemorySemantics(_Cited):
    """How the engine turns its memory knob into a KV pool (docs/plan.md, Capacity)."""

    budget: Literal[
        "fraction_of_total",  # vLLM: util x total, minus weights, activations, non-torch, graphs
        "fraction_of_free_at_start",  # SGLang: weights + KV = mfs x memory free at start
        "fraction_of_free_after_load",  # TRT-LLM: KV = fraction x (free after weights and peak)
        "cap_with_wiggle",  # TGI: KV = free after warm-up - (1 - wiggle x fraction) x total
        "explicit_context",  # llama.cpp: KV sized by -c, no fraction
    ]
    default_fraction: float | None = None
    wiggle_room: float | None = None
    page_tokens: int = Field(description="tokens per KV block/page by default")
    sliding_window_slack: Literal["none", "max_batched_tokens"] = Field(
        default="none", description="extra tokens a sliding-window layer keeps beyond the window"
    )
    overheads: dict[str, Overhead] = Field(default_factory=dict)
    overhead_model: list[OverheadBand] = Field(default_factory=list, description="by engine version, newest last")
    mla_kv_bytes_per_layer: dict[str, float] = Field(
        default_factory=dict,
        description="bytes per token per layer of an MLA latent, by KV cache dtype, where the "
        "engine stores scales with it (vLLM fp8_ds_mla, SGLang fp8)",
    )
    hybrid_page_unification: bool = Field(
        default=False,
        description="the attention block grows until one attention page holds a Mamba/GDN state page (vLLM)",
    )
    hybrid_state_pages_per_request: int = Field(
        default=1,
        description="state pages a running request holds per "
        "linear/Mamba layer (2 in vLLM's prefix-caching align mode)",
    )
    refuses_below_one_request: bool = Field(
        default=False, description="start-up fails when the pool cannot hold one request of max_model_len"
    )
    cuda_context_gib: float | None = Field(
        default=None,
        description="memory a fresh process holds before loading (CUDA context): free at start = total - this",
    )
    fp8_kv_below: Fp8KvBelow | None = Field(
        default=None,
        description="fp8 KV cache on GPUs without native fp8 support in this engine (None: not read from its source)",
    )

    @model_validator(mode="after")
    def _budget_has_its_numbers(self) -> MemorySemantics:
        """Each budget's formula needs its numbers from the engine's source: none is made up at plan time."""
        need = {
            "fraction_of_total": ["default_fraction"],
            "fraction_of_free_after_load": ["default_fraction"],
            "cap_with_wiggle": ["default_fraction", "wiggle_room"],
        }.get(self.budget, [])
        missing = [name for name in need if getattr(self, name) is None]
        if missing:
            raise ValueError(f"budget {self.budget} needs {' and '.join(missing)}")
        return self

    def fraction(self) -> float:
        """The default memory fraction (present for every budget that uses one: checked on load)."""
        if self.default_fraction is None:
            raise ValueError(f"budget {self.budget} has no default_fraction")
        return self.default_fraction


class DefaultValue(_Cited):
    """A default the engine applies that the user may not know about."""

    value: Any


class EngineProfile(BaseModel):
    """Everything switchover knows about one engine version, each fact cited."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    display_name: str
    version_read: str
    resolved_version: str | None = Field(
        default=None,
        description="the release this view of the profile was "
        "resolved for (flags and metrics whose `versions` hold there); None = "
        "the variants without a range, or the newest",
    )
    release_scheme: Literal["release", "build"] = Field(
        default="release",
        description="how the engine numbers its releases: dotted releases (0.6.3, v2.0.2) or build tags (b3995)",
    )
    metric_prefix: str
    metrics_endpoint: MetricsEndpoint
    metrics: dict[str, MetricSpec]
    api: ApiSemantics
    readiness: Readiness
    context_length: list[ContextLengthSource] = Field(
        default_factory=list,
        description="where the running server reports its context length, tried in order; "
        "empty: not read from this engine's source (the length is unknown)",
    )
    request_cap: list[RequestCapSource] = Field(
        default_factory=list,
        description="where the running server reports its request-count cap, tried in order; empty: it reports none "
        "that was read in its source (bench infers the cap)",
    )
    flags: dict[str, FlagSpec]
    defaults: dict[str, DefaultValue] = Field(default_factory=dict)
    memory: MemorySemantics
    launch: LaunchSyntax

    @model_validator(mode="after")
    def _intents_known(self) -> EngineProfile:
        unknown = sorted(set(self.metrics) - set(METRIC_INTENTS))
        if unknown:
            raise ValueError(f"unknown metric intents: {', '.join(unknown)}")
        if (
            self.memory.budget == "fraction_of_free_at_start"
            and self.memory.default_fraction is None
            and "mem_fraction_reserve" not in self.defaults
        ):
            raise ValueError(
                "memory: budget fraction_of_free_at_start needs default_fraction or "
                "defaults.mem_fraction_reserve (the engine's auto fraction)"
            )
        return self

    def metric(self, intent: str) -> MetricSpec | None:
        """The series for a metric intent, or None when this engine has none."""
        return self.metrics.get(intent)

    def context_sources(self) -> list[ContextLengthSource]:
        """The context-length sources that hold at the release this view was resolved for (all, when None)."""
        return [c for c in self.context_length if c.holds_at(self.resolved_version)]

    def flag(self, intent: str) -> FlagSpec | None:
        """The launch knob for an intent, or None when the profile does not list it."""
        return self.flags.get(intent)


_DATA = "data"


def list_profiles() -> list[str]:
    """Names of the engines that have a profile, sorted (engines/names.py; a test holds it to the data files)."""
    return sorted(ENGINES)


_BUILD_TAG = re.compile(r"(?<=[<>=!~,])\s*[bB](\d+)")
_NEWEST = Version("99999")  # above any release: a range that holds here is open above (the newest release)


def _range(spec: str) -> SpecifierSet:
    """A release range as PEP 440 specifiers; llama.cpp build tags ('>=b4529') are read as build numbers. A range
    that does not parse is a packaging bug, refused when the profile loads (InvalidSpecifier)."""
    return SpecifierSet(_BUILD_TAG.sub(r"\1", "," + spec.strip())[1:])


def in_range(spec: str, version: str) -> bool:
    """Whether a release (0.8.5.post1, 1.2.0rc1, b3995) lies in a range such as '>=0.8,<0.10.2' (PEP 440
    comparisons, pre-releases included)."""
    return _range(spec).contains(release_key(version), prereleases=True)


def _resolve_variants(raw: dict[str, Any], section: str, version: str | None) -> None:
    """A `flags` or `metrics` entry may be a list of variants, each with its `versions` range: keep the one that
    holds at `version` (no version: the newest, i.e. a variant whose range is open above), drop the intent when
    none does (a spelling or series the engine no longer has)."""
    table = raw.get(section)
    if not isinstance(table, dict):
        return
    for intent, entry in list(table.items()):
        variants = entry if isinstance(entry, list) else [entry]
        if version is None:
            held = [
                v
                for v in variants
                if not v.get("versions") or _range(str(v["versions"])).contains(_NEWEST, prereleases=True)
            ]
        else:
            held = [v for v in variants if not v.get("versions") or in_range(str(v["versions"]), version)]
        if held:
            table[intent] = held[-1]
        else:
            del table[intent]


@cache
def _profile_text(key: str) -> str:
    return resources.files("switchover.engines").joinpath(_DATA, f"{key}.yaml").read_text(encoding="utf-8")


def profile_key(name: str) -> str:
    """The profile name of an engine as a user may write it (llama-server, TensorRT-LLM ...); BadInput (exit 2) for
    an unknown engine, naming the known ones."""
    key = name.strip().lower().replace("-", "").replace("_", "").replace(".", "")
    key = ALIASES.get(key, key)
    if key not in ENGINES:
        raise BadInput(f"unknown engine {name!r}", hint=f"known engines: {', '.join(ENGINES)}")
    return key


@cache
def load_profile(name: str, version: str | None = None) -> EngineProfile:
    """The profile of engine `name`, with the flag and metric spellings that hold at `version` (a release such as
    0.6.3 or b3995; None: the newest variants); BadInput (exit 2) for an unknown engine or a malformed version."""
    key = profile_key(name)
    if version is not None:
        try:
            release_key(version)
        except ValueError as exc:
            raise BadInput(f"{name} version: {exc}") from None
    raw = yaml.safe_load(_profile_text(key))
    if version is not None:
        try:
            check_release_form(key, raw.get("release_scheme", "release"), version)
        except ValueError as exc:
            raise BadInput(f"{name} version: {exc}") from None
    _resolve_variants(raw, "flags", version)
    _resolve_variants(raw, "metrics", version)
    raw["resolved_version"] = version
    try:
        return EngineProfile.model_validate(raw)
    except (ValidationError, InvalidSpecifier) as exc:  # a packaging bug, but say which file
        raise BadInput(f"engine profile {key}.yaml is invalid: {exc}") from None


@cache
def metric_variants(name: str) -> dict[str, tuple[MetricSpec, ...]]:
    """Every series an engine's profile lists for each metric intent, over all the releases it covers (oldest first):
    what a rule written for any release may read, whatever release it is translated from."""
    key = profile_key(name)
    raw = yaml.safe_load(_profile_text(key)).get("metrics") or {}
    try:
        return {
            intent: tuple(MetricSpec.model_validate(v) for v in (entry if isinstance(entry, list) else [entry]))
            for intent, entry in raw.items()
        }
    except ValidationError as exc:  # a packaging bug, but say which file
        raise BadInput(f"engine profile {key}.yaml is invalid: {exc}") from None
