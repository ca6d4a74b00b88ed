"""Weight format x engine x GPU matrix: can an engine load this checkpoint format here, and with which kernel.

The facts are data (`engines/data/matrix/formats.yaml`), each rule cited and marked verified or not; this module
validates them on load, names a checkpoint's format from its `quantization_config` (through the method table of
`quantization.py`, the one the weight pricing uses), and looks a (engine, format, device, compute capability) up.
A combination no rule covers is "unknown", never a guess.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from switchover.engines.cited import CitedFact
from switchover.engines.matrixfile import packaged, validated
from switchover.engines.names import ENGINES
from switchover.quantization import method_table, scheme_from_config

Device = Literal["cuda", "cpu"]
ANY_FORMAT = "*"


SHARED_METHODS = ("compressed-tensors", "modelopt")  # methods that name several formats: `names` tells them apart


class ConfigName(BaseModel):
    """How a quantization_config of a method that covers several formats names this one: compressed-tensors by the
    quantization args of its config groups, ModelOpt by the algorithm in its method name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["compressed-tensors", "modelopt"]
    weights: dict[str, Any] = Field(
        default_factory=dict, description="compressed-tensors: weight args that must equal these (type, num_bits)"
    )
    activations: Literal["none", "any"] | dict[str, Any] = Field(
        default="any", description="compressed-tensors: no input_activations, any, or args that must equal these"
    )
    algo_contains: str | None = Field(default=None, description="ModelOpt: text in the algorithm (lower case)")
    algo_excludes: list[str] = Field(
        default_factory=list,
        description="ModelOpt: text that must not be in it (fp8 names exclude fp4: W4A8_NVFP4_FP8 has 4-bit weights)",
    )
    how: str = Field(description="what the report says; {bits} and {algo} are filled in")

    def matches(self, method: str, weights: dict[str, Any] | None, acts: dict[str, Any] | None, algo: str) -> bool:
        if method != self.method:
            return False
        if method == "modelopt":
            return (
                self.algo_contains is not None
                and self.algo_contains in algo
                and not any(x in algo for x in self.algo_excludes)
            )
        if weights is None or any(weights.get(k) != v for k, v in self.weights.items()):
            return False
        if self.activations == "none":
            return acts is None
        if isinstance(self.activations, dict):
            return acts is not None and all(acts.get(k) == v for k, v in self.activations.items())
        return True


class CompiledSpec(BaseModel):
    """A compiled format (an engine built for one GPU): how its directory looks and what binds it, cited."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    layout: str
    layout_source: str
    architecture: str = Field(description="what a compiled engine is bound to, in words")
    architecture_source: str


class FormatSpec(BaseModel):
    """One weight format and the quantization methods (data/quantization.yaml names) that produce it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str
    quant_methods: list[str] = Field(default_factory=list)
    names: list[ConfigName] = Field(default_factory=list, description="for the methods of SHARED_METHODS")
    names_source: str | None = None
    compiled: CompiledSpec | None = Field(
        default=None, description="set for a compiled engine: it runs only on the GPU architecture it was built for"
    )


class FormatRule(CitedFact):
    """One cited fact: ENGINE on DEVICE with compute capability in [sm_min, sm_max) loads FORMAT (with KERNEL)."""

    engine: str
    format: str
    device: Device
    sm_min: int | None = Field(default=None, ge=0, le=200)
    sm_max: int | None = Field(default=None, ge=0, le=200)
    loads: bool
    kernel: str | None = None
    note: str | None = None

    @model_validator(mode="after")
    def _range(self) -> FormatRule:
        if self.sm_min is not None and self.sm_max is not None and self.sm_min >= self.sm_max:
            raise ValueError(f"sm_min {self.sm_min} must be below sm_max {self.sm_max}")
        if self.device == "cpu" and (self.sm_min is not None or self.sm_max is not None):
            raise ValueError("a cpu rule has no compute capability range")
        if self.loads and not self.kernel:
            raise ValueError("a rule that loads must name the kernel")
        return self

    def covers(self, sm: int) -> bool:
        """Whether compute capability `sm` lies in this rule's range."""
        return (self.sm_min is None or sm >= self.sm_min) and (self.sm_max is None or sm < self.sm_max)

    @property
    def sm_range(self) -> str:
        """e.g. 'sm75-88', 'sm89+', 'any'."""
        if self.device == "cpu":
            return "cpu"
        lo = f"sm{self.sm_min}" if self.sm_min is not None else "any"
        if self.sm_max is None:
            return f"{lo}+" if self.sm_min is not None else "any GPU"
        return (
            f"{lo if self.sm_min is not None else 'below'} to sm{self.sm_max - 1}"
            if self.sm_min is not None
            else f"below sm{self.sm_max}"
        )


class FormatMatrix(BaseModel):
    """The whole matrix: formats and rules, cross-checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    formats: dict[str, FormatSpec]
    rules: list[FormatRule]

    @model_validator(mode="after")
    def _consistent(self) -> FormatMatrix:
        table = method_table()
        known_methods = set(table["methods"]) | set(table["aliases"])
        for name, spec in self.formats.items():
            unknown = sorted(set(spec.quant_methods) - known_methods)
            if unknown:
                raise ValueError(
                    f"formats.{name}.quant_methods: {unknown} are not quantization methods of data/quantization.yaml"
                )
            for n in spec.names:
                if n.method not in spec.quant_methods:
                    raise ValueError(f"formats.{name}.names: {n.method} is not in its quant_methods")
            if spec.names and not spec.names_source:
                raise ValueError(f"formats.{name}.names: no names_source")
        for i, rule in enumerate(self.rules):
            if rule.engine not in ENGINES:
                raise ValueError(f"rules.{i}.engine: unknown engine {rule.engine!r} (known: {', '.join(ENGINES)})")
            if rule.format != ANY_FORMAT and rule.format not in self.formats:
                raise ValueError(f"rules.{i}.format: unknown format {rule.format!r}")
            for j, other in enumerate(self.rules[:i]):
                if (other.engine, other.format, other.device) == (rule.engine, rule.format, rule.device) and _overlap(
                    other, rule
                ):
                    raise ValueError(
                        f"rules.{i}: overlaps rules.{j} ({rule.engine} {rule.format} {rule.device} "
                        f"{rule.sm_range} vs {other.sm_range})"
                    )
        return self


def _overlap(a: FormatRule, b: FormatRule) -> bool:
    lo = max(a.sm_min if a.sm_min is not None else -1, b.sm_min if b.sm_min is not None else -1)
    hi = min(a.sm_max if a.sm_max is not None else 10_000, b.sm_max if b.sm_max is not None else 10_000)
    return lo < hi


@cache
def load_matrix() -> FormatMatrix:
    """The packaged matrix (engines/data/matrix/formats.yaml), validated."""
    return validated(FormatMatrix, packaged("formats.yaml"), "formats.yaml")


class FormatVerdict(BaseModel):
    """Whether ENGINE loads FORMAT on this device, with which kernel, and on what authority."""

    engine: str
    format: str
    device: Device
    sm: int | None
    loads: bool | None = Field(description="None: no fact in the matrix (unknown)")
    kernel: str | None = None
    reason: str
    source: str | None = None
    verified: bool = False


def lookup(engine: str, fmt: str, device: Device, sm: int | None, matrix: FormatMatrix | None = None) -> FormatVerdict:
    """The rule for (engine, format, device, sm): an exact format rule first, then the engine's `*` rule; with a
    GPU of unknown compute capability only a rule without an sm range can answer."""
    m = matrix or load_matrix()
    for wanted in (fmt, ANY_FORMAT):
        candidates = [r for r in m.rules if (r.engine, r.format, r.device) == (engine, wanted, device)]
        if not candidates:
            continue
        if device == "cuda" and sm is None:
            ranged = [r for r in candidates if r.sm_min is not None or r.sm_max is not None]
            if ranged:
                return FormatVerdict(
                    engine=engine,
                    format=fmt,
                    device=device,
                    sm=None,
                    loads=None,
                    reason=f"unknown: {engine}'s {fmt} support depends on the compute capability, "
                    "which is not known for this GPU",
                )
        hit = next((r for r in candidates if device == "cpu" or sm is None or r.covers(sm)), None)
        if hit is None:
            continue
        where = "CPU" if device == "cpu" else f"sm{sm}" if sm is not None else "any GPU"
        if hit.loads:
            reason = f"{engine} loads {fmt} on {where} with {hit.kernel}"
        else:
            reason = f"{engine} does not load {fmt} on {where}"
        if hit.note:
            reason += f" ({hit.note})"
        return FormatVerdict(
            engine=engine,
            format=fmt,
            device=device,
            sm=sm,
            loads=hit.loads,
            kernel=hit.kernel,
            reason=reason,
            source=hit.source,
            verified=hit.verified,
        )
    where = "CPU" if device == "cpu" else f"sm{sm}" if sm is not None else "this GPU"
    return FormatVerdict(
        engine=engine,
        format=fmt,
        device=device,
        sm=sm,
        loads=None,
        reason=f"unknown: the format matrix has no fact for {engine} {fmt} on {where}",
    )


# ---- naming a checkpoint's format ------------------------------------------------------------------------------


def _ct_weights(qc: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    groups = qc.get("config_groups")
    if not isinstance(groups, dict):
        return None, None
    for group in groups.values():
        if isinstance(group, dict) and isinstance(group.get("weights"), dict):
            acts = group.get("input_activations")
            return group["weights"], acts if isinstance(acts, dict) else None
    return None, None


def _shared_method_format(qc: dict[str, Any], method: str) -> tuple[str | None, str]:
    """The format a compressed-tensors or ModelOpt config names, by the formats' `names` (data)."""
    weights, acts = _ct_weights(qc) if method == "compressed-tensors" else (None, None)
    algo = method.removeprefix("modelopt").strip()
    base = "modelopt" if method.startswith("modelopt") else method
    if base == "compressed-tensors" and weights is None:
        return None, "compressed-tensors config without config_groups.*.weights"
    bits = weights.get("num_bits") if weights else None
    for name, spec in load_matrix().formats.items():
        for n in spec.names:
            if n.matches(base, weights, acts, algo.lower()):
                return name, n.how.format(bits=bits, algo=algo)
    if base == "modelopt":
        return None, f"ModelOpt {algo}: not a format of the matrix"
    kind = weights.get("type") if weights else None
    return (
        None,
        f"compressed-tensors {kind} {bits}-bit weights with {acts and acts.get('num_bits')}-bit "
        "activations: not a format of the matrix",
    )


def format_of_config(qc: Any) -> tuple[str | None, str]:
    """(format key, how it was named) for a quantization_config; (None, why) when it names no format of the
    matrix. No config is 16-bit weights."""
    if not isinstance(qc, dict) or not qc:
        return "bf16", "no quantization_config: 16-bit weights"
    try:
        scheme = scheme_from_config(qc)
    except ValueError as exc:
        return None, str(exc)
    if scheme is None:
        return "bf16", "no quantization_config: 16-bit weights"
    method = scheme.method
    if method.startswith("modelopt") or method == "compressed-tensors":
        return _shared_method_format(qc, method)
    for name, spec in load_matrix().formats.items():
        if method in spec.quant_methods and method not in SHARED_METHODS:
            return name, f"quantization_config quant_method {method}"
    return None, f"quantization method {method} is not in the format matrix"


def format_of_card(card: Any, qc: Any = None) -> tuple[str | None, str]:
    """The format of a ModelCard: GGUF from its weights' origin, else from the raw quantization_config (when the
    caller has it), else from the method the card detected."""
    weights = card.weights
    if weights.origin == "gguf":
        return "gguf", f"GGUF file ({weights.quantization or card.dtype})"
    if qc is not None:
        return format_of_config(qc)
    method = weights.quantization
    if not method:
        return "bf16", f"no quantization: {card.dtype} weights"
    if method in ("compressed-tensors",) or method.startswith("modelopt"):
        return None, f"{method}: the variant is in quantization_config, which was not available"
    return format_of_config({"quant_method": method})
