"""Translate a launch between engines: parse the old command (or YAML) into intents, render the target's flags
(and TensorRT-LLM's YAML), and list what is lost in translation. Spellings come from the engine profiles; the
conversions here are per intent (what a value means), never per engine name."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

from switchover.engines import EngineProfile, FlagSpec, load_profile
from switchover.model.card import ModelCard
from switchover.plan.equivalence import equivalent_memory_knob
from switchover.plan.launch import LaunchIntent, parse_launch

LostKind = Literal["no_equivalent", "different_meaning", "different_default", "not_understood"]

# Intents that are not values to copy: they need the model and GPU to convert (see plan capacity).
MEANING_DIFFERS = {"gpu_memory_fraction", "block_size", "max_batched_tokens_per_step", "max_waiting_queue"}
# API facts compared between engines for the "different default / behaviour" part of the report.
API_FACTS = ("generation_config_applied", "default_sampling", "max_stop_strings", "stop_matching",
             "stop_string_in_output", "finish_reasons", "unknown_field_policy", "unknown_model_policy",
             "seed_per_request", "n_gt_1", "validation_status", "overload_status", "error_body",
             "context_overflow", "cached_tokens_reported", "openai_json_schema", "ignore_eos_field",
             "min_tokens_field")
__all__ = ["LaunchIntent", "LostItem", "Translation", "api_differences", "parse_launch", "render", "translate"]


class LostItem(BaseModel):
    """Something that does not carry over as-is."""

    intent: str
    kind: LostKind
    detail: str
    source: str | None = None


class Translation(BaseModel):
    """A rendered target launch plus everything lost on the way."""

    source_engine: str
    target_engine: str
    intent: LaunchIntent
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    yaml_config: dict[str, Any] | None = Field(default=None, description="TensorRT-LLM extra options YAML")
    lost: list[LostItem] = Field(default_factory=list)

    @computed_field(description="The rendered launch command line (env + argv, shell-quoted)")  # type: ignore[prop-decorator]
    @property
    def command(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return (env + " " if env else "") + shlex.join(self.argv)


# ---- rendering -----------------------------------------------------------------------------------------------

_KV_DTYPE_FAMILY = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e4m3fn": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2",
                    "auto": "auto", "bf16": "auto", "bfloat16": "auto", "f16": "auto", "float16": "auto"}


def _kv_dtype_for(target: FlagSpec, value: str) -> str | None:
    family = _KV_DTYPE_FAMILY.get(str(value).lower())
    if family is None:
        return None
    if family == "auto":
        return None if target.default in ("auto", "f16", "model dtype") else "auto"
    if target.choices is None:
        return str(value)
    choices = target.choices
    for name in (str(value), family, family + "fn", "fp8"):
        if name in choices:
            return name
    return None


@dataclass
class _Render:
    """What rendering builds up: the values still to place, the target's argv/env/YAML, and what is lost."""

    src: EngineProfile
    dst: EngineProfile
    values: dict[str, Any]
    card: ModelCard | None
    gpu_total_gib: float | None
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    yaml_cfg: dict[str, Any] = field(default_factory=dict)
    lost: list[LostItem] = field(default_factory=list)

    def settable(self, name: str) -> bool:
        spec = self.dst.flags.get(name)
        return spec is not None and (_on_command_line(spec) or bool(spec.yaml_key) or bool(spec.env))

    def put(self, intent_name: str, value: Any) -> None:
        """Place one value where the target takes it: a flag, a YAML key or an environment variable."""
        spec = self.dst.flags[intent_name]
        if _on_command_line(spec):
            self.argv.extend(_flag_args(spec, value, self.dst.launch.bool_style))
        elif spec.yaml_key:
            node = self.yaml_cfg
            *parents, leaf = spec.yaml_key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = _spelled(spec, value)
        elif spec.env:
            self.env[spec.env] = ("1" if value else "0") if spec.kind == "bool" else str(value)


def _on_command_line(spec: FlagSpec) -> bool:
    return bool(spec.flag and spec.kind != "none" and " " not in spec.flag)


def _flag_args(spec: FlagSpec, value: Any, bool_style: str) -> list[str]:
    """The argv words for one flag and its value."""
    assert spec.flag is not None
    if spec.kind == "bool":
        if bool(value) != spec.invert:
            return [spec.flag]
        if spec.negation:
            return [spec.negation]
        return [spec.flag, "false"] if bool_style == "value" else []
    if isinstance(value, list):
        return [spec.flag, *(str(v) for v in value)]
    return [spec.flag, str(_spelled(spec, value))]


def _spelled(spec: FlagSpec, value: Any) -> Any:
    """The target's own spelling of a canonical value (when the flag declares one)."""
    if spec.canonical:
        return {v: k for k, v in spec.canonical.items()}.get(value, value)
    return value


def _memory_knob(r: _Render) -> None:
    """With a model card and the GPU's memory, convert the memory fraction to the target's meaning."""
    values, src, dst = r.values, r.src, r.dst
    if r.card is None or not r.gpu_total_gib or "gpu_memory_fraction" not in values or src.name == dst.name:
        return
    eq = equivalent_memory_knob(r.card, src, dst, r.gpu_total_gib, float(values["gpu_memory_fraction"]),
                                tp=int(values.get("tensor_parallel_size", 1)),
                                pp=int(values.get("pipeline_parallel_size", 1)),
                                kv_dtype=str(values.get("kv_cache_dtype", "auto")))
    values.pop("gpu_memory_fraction")
    if eq is None:
        r.lost.append(LostItem(intent="gpu_memory_fraction", kind="different_meaning",
                               detail=f"no {dst.name} setting reproduces the source KV pool on this GPU"))
    elif eq.intent == "max_context_length" and "max_context_length" in values:
        mml = int(values["max_context_length"])
        fit = max(1, int(eq.value) // mml)  # slots of a full context each that the same memory holds
        asked = values.get("max_concurrent_sequences")
        values["max_concurrent_sequences"] = min(int(asked), fit) if asked else fit
        r.lost.append(LostItem(intent="gpu_memory_fraction", kind="different_meaning",
                               detail=f"converted, not copied: {eq.explanation}; that is "
                                      f"{values['max_concurrent_sequences']} slots of {mml} tokens"
                                      + (f" (not {asked}: slots reserve their whole context)"
                                         if asked and asked > fit else ""), source=dst.memory.source))
    else:
        values[eq.intent] = eq.value
        r.lost.append(LostItem(intent="gpu_memory_fraction", kind="different_meaning",
                               detail=f"converted, not copied: {eq.explanation}", source=dst.memory.source))


def _expert_parallel(r: _Render) -> None:
    """A bool (on/off) in one engine is a width (an int) in another."""
    if "expert_parallel" not in r.values:
        return
    ep = r.values["expert_parallel"]
    width = r.values.get("tensor_parallel_size", 1) * r.values.get("data_parallel_size", 1)
    spec = r.dst.flags.get("expert_parallel")
    if spec is not None and spec.kind == "int" and isinstance(ep, bool):
        r.values["expert_parallel"] = width if ep else 1
    elif spec is not None and spec.kind == "bool" and not isinstance(ep, bool):
        r.values["expert_parallel"] = ep > 1


def _chunked_prefill(r: _Render) -> None:
    """On/off in one engine; a chunk size where -1 means off in another."""
    if "chunked_prefill" not in r.values:
        return
    spec = r.dst.flags.get("chunked_prefill")
    on = r.values["chunked_prefill"]
    on = on if isinstance(on, bool) else on != -1
    if spec is not None and spec.kind == "int":
        if on:
            r.values.pop("chunked_prefill")
        else:
            r.values["chunked_prefill"] = -1
    else:
        r.values["chunked_prefill"] = on


def _kv_dtype(r: _Render) -> None:
    """The KV cache dtype in the target's spelling (or lost when it has none)."""
    if "kv_cache_dtype" not in r.values or "kv_cache_dtype" not in r.dst.flags:
        return
    value = r.values.pop("kv_cache_dtype")
    mapped = _kv_dtype_for(r.dst.flags["kv_cache_dtype"], value)
    if mapped is None and _KV_DTYPE_FAMILY.get(str(value).lower()) != "auto":
        r.lost.append(LostItem(intent="kv_cache_dtype", kind="no_equivalent",
                               detail=f"KV dtype {value!r} has no {r.dst.name} spelling",
                               source=r.dst.flags["kv_cache_dtype"].source))
    if mapped is not None:
        r.values["kv_cache_dtype"] = mapped


def _context_over_slots(r: _Render) -> None:
    """A target whose context flag is shared by all slots gets context x slots."""
    slots = r.values.get("max_concurrent_sequences")
    ctx_spec = r.dst.flags.get("max_context_length")
    if ctx_spec is None or not ctx_spec.total_over_slots or "max_context_length" not in r.values or not slots:
        return
    r.values["max_context_length"] = r.values["max_context_length"] * slots
    r.lost.append(LostItem(intent="max_context_length", kind="different_meaning",
                           detail=f"{ctx_spec.flag} is shared by all {slots} slots: rendered as context x slots "
                                  f"= {r.values['max_context_length']}; each slot holds its full context in "
                                  "memory (no paging)", source=ctx_spec.semantics or ctx_spec.source))


def _metrics_on(r: _Render) -> None:
    """Metrics on by default in the source stay on in a target where they are off by default."""
    src, dst = r.src, r.dst
    metrics_flag = dst.flags.get("metrics_enable")
    if (metrics_flag is not None and metrics_flag.kind == "bool" and src.metrics_endpoint.enabled_by_default
            and not dst.metrics_endpoint.enabled_by_default):
        r.values.setdefault("metrics_enable", True)
        r.lost.append(LostItem(intent="metrics_enable", kind="different_default",
                               detail=f"metrics are on by default in {src.name}, off in {dst.name}: enabled "
                                      f"({dst.metrics_endpoint.enable}); scrape {dst.metrics_endpoint.path}",
                               source=dst.metrics_endpoint.source))
    if dst.metrics_endpoint.enable and "YAML" in dst.metrics_endpoint.enable and r.values.get("metrics_enable"):
        r.yaml_cfg["enable_iter_perf_stats"] = True


# conversions that depend on what a value means, in order, before the values are copied
_CONVERSIONS = (_memory_knob, _expert_parallel, _chunked_prefill, _kv_dtype, _context_over_slots, _metrics_on)
_CONVERTED = {"expert_parallel", "chunked_prefill"}  # their kinds differ between engines by design


def _not_copied(r: _Render, name: str, value: Any) -> LostItem | None:
    """Why a value cannot be copied to the target as it is; None when it can."""
    src, dst = r.src, r.dst
    sspec, dspec = src.flags.get(name), dst.flags.get(name)
    differs = dspec is not None and sspec is not None and not (dspec.equivalent and sspec.equivalent)
    converted_here = name == "gpu_memory_fraction" and r.card is not None and r.gpu_total_gib
    if dspec is not None and (differs or name in MEANING_DIFFERS) and src.name != dst.name and not converted_here:
        return LostItem(intent=name, kind="different_meaning",
                        detail=f"{_describe(sspec, name, value)} in {src.name} is not {_describe(dspec, name)} in "
                               f"{dst.name}; not copied — size it with `switchover plan capacity`",
                        source=dspec.source)
    if not r.settable(name):
        note = (dspec.note or dspec.semantics) if dspec else None
        return LostItem(intent=name, kind="no_equivalent",
                        detail=f"{sspec.flag if sspec else name}={value} has no {dst.name} equivalent"
                               + (f" ({note})" if note else ""),
                        source=dspec.source if dspec else None)
    if dspec is not None and sspec is not None and dspec.kind != sspec.kind and name not in _CONVERTED and not (
            {dspec.kind, sspec.kind} <= {"str", "list"}):
        return LostItem(intent=name, kind="different_meaning",
                        detail=f"{sspec.flag}={value} ({sspec.kind}) vs {dspec.flag or dspec.yaml_key}"
                               f" ({dspec.kind}) in {dst.name}: {dspec.note or dspec.semantics or ''}",
                        source=dspec.source)
    return None


def _copy(r: _Render, name: str, value: Any) -> None:
    """Copy one value (shaped as a list or a single string where the target wants one), or say why not."""
    if name == "metrics_enable" and value and r.dst.metrics_endpoint.enabled_by_default:
        return
    if (why := _not_copied(r, name, value)) is not None:
        r.lost.append(why)
        return
    dspec = r.dst.flags[name]
    if dspec.kind == "list" and not isinstance(value, list):
        value = [value]
    if dspec.kind == "str" and isinstance(value, list):
        if len(value) > 1:
            r.lost.append(LostItem(intent=name, kind="no_equivalent",
                                   detail=f"only the first of {value} is kept in {r.dst.name}", source=dspec.source))
        value = value[0]
    r.put(name, value)


def render(intent: LaunchIntent, target: str, *, card: ModelCard | None = None,
           gpu_total_gib: float | None = None) -> Translation:
    """The target engine's launch for `intent`, with the lost-in-translation list. With a model card and the GPU's
    memory, the memory knob is converted to the target's meaning instead of being dropped."""
    src = load_profile(intent.engine)
    dst = load_profile(target)
    r = _Render(src=src, dst=dst, values=dict(intent.values), card=card, gpu_total_gib=gpu_total_gib)
    model = intent.model or "MODEL"
    r.argv = dst.launch.command.split()
    r.argv += [model] if dst.launch.model_arg == "positional" else [dst.launch.model_arg, model]
    for step in _CONVERSIONS:
        step(r)
    for name, value in r.values.items():
        _copy(r, name, value)
    r.lost += [LostItem(intent="?", kind="not_understood",
                        detail=f"{raw!r}: not a known {src.name} flag; check by hand") for raw in intent.unknown]
    r.lost.extend(api_differences(src, dst))
    if r.yaml_cfg and dst.launch.config_file:
        r.argv += [dst.launch.config_file, "extra_llm_api_options.yaml"]
    return Translation(source_engine=src.name, target_engine=dst.name, intent=intent, argv=r.argv, env=r.env,
                       yaml_config=r.yaml_cfg or None, lost=r.lost)


def _describe(spec: FlagSpec | None, name: str, value: Any = None) -> str:
    if spec is None:
        return name
    text = spec.flag or spec.yaml_key or spec.env or name
    if value is not None:
        text += f"={value}"
    meaning = spec.semantics or spec.note
    return f"{text} ({meaning})" if meaning else text


def api_differences(src: EngineProfile, dst: EngineProfile) -> list[LostItem]:
    """API defaults and behaviours that differ between the two engines (engines.md §2), each cited."""
    out: list[LostItem] = []
    if src.name == dst.name:
        return out
    for fact in API_FACTS:
        a, b = getattr(src.api, fact), getattr(dst.api, fact)
        if a != b:
            out.append(LostItem(intent=f"api.{fact}", kind="different_default",
                                detail=f"{fact}: {src.name} {a!r} -> {dst.name} {b!r}",
                                source=dst.api.sources.get(fact)))
    return out


def translate(source: str, text: str, target: str, *, card: ModelCard | None = None,
              gpu_total_gib: float | None = None) -> Translation:
    """Parse `text` as a `source` launch and render it for `target`."""
    return render(parse_launch(source, text), target, card=card, gpu_total_gib=gpu_total_gib)
