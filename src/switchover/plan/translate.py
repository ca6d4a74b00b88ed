"""Translate a launch between engines: parse the old command (or YAML) into intents, render the target's flags
(and TensorRT-LLM's YAML), and list what is lost in translation. Spellings come from the engine profiles; the
conversions here are per intent (what a value means), never per engine name."""

from __future__ import annotations

import shlex
from typing import Any, Literal

from pydantic import BaseModel, Field

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


def render(intent: LaunchIntent, target: str, *, card: ModelCard | None = None,
           gpu_total_gib: float | None = None) -> Translation:
    """The target engine's launch for `intent`, with the lost-in-translation list. With a model card and the GPU's
    memory, the memory knob is converted to the target's meaning instead of being dropped."""
    src = load_profile(intent.engine)
    dst = load_profile(target)
    values = dict(intent.values)
    lost: list[LostItem] = []
    if card is not None and gpu_total_gib and "gpu_memory_fraction" in values and src.name != dst.name:
        eq = equivalent_memory_knob(card, src, dst, gpu_total_gib, float(values["gpu_memory_fraction"]),
                                    tp=int(values.get("tensor_parallel_size", 1)),
                                    pp=int(values.get("pipeline_parallel_size", 1)),
                                    kv_dtype=str(values.get("kv_cache_dtype", "auto")))
        values.pop("gpu_memory_fraction")
        if eq is None:
            lost.append(LostItem(intent="gpu_memory_fraction", kind="different_meaning",
                                 detail=f"no {dst.name} setting reproduces the source KV pool on this GPU"))
        elif eq.intent == "max_context_length" and "max_context_length" in values:
            mml = int(values["max_context_length"])
            fit = max(1, int(eq.value) // mml)  # slots of a full context each that the same memory holds
            asked = values.get("max_concurrent_sequences")
            values["max_concurrent_sequences"] = min(int(asked), fit) if asked else fit
            lost.append(LostItem(intent="gpu_memory_fraction", kind="different_meaning",
                                 detail=f"converted, not copied: {eq.explanation}; that is "
                                        f"{values['max_concurrent_sequences']} slots of {mml} tokens"
                                        + (f" (not {asked}: slots reserve their whole context)"
                                           if asked and asked > fit else ""), source=dst.memory.source))
        else:
            values[eq.intent] = eq.value
            lost.append(LostItem(intent="gpu_memory_fraction", kind="different_meaning",
                                 detail=f"converted, not copied: {eq.explanation}", source=dst.memory.source))
    argv: list[str] = dst.launch.command.split()
    env: dict[str, str] = {}
    yaml_cfg: dict[str, Any] = {}
    model = intent.model or "MODEL"
    if dst.launch.model_arg == "positional":
        argv.append(model)
    else:
        argv += [dst.launch.model_arg, model]

    def put(intent_name: str, value: Any) -> None:
        spec = dst.flags[intent_name]
        if spec.flag and spec.kind != "none" and " " not in spec.flag:
            if spec.kind == "bool":
                on = bool(value) != spec.invert
                if on:
                    argv.append(spec.flag)
                elif spec.negation:
                    argv.append(spec.negation)
                elif dst.launch.bool_style == "value":
                    argv.extend([spec.flag, "false"])
                return
            if isinstance(value, list):
                argv.append(spec.flag)
                argv.extend(str(v) for v in value)
                return
            if spec.canonical:
                value = {v: k for k, v in spec.canonical.items()}.get(value, value)
            argv.extend([spec.flag, str(value)])
        elif spec.yaml_key:
            node = yaml_cfg
            *parents, leaf = spec.yaml_key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            if spec.canonical:
                value = {v: k for k, v in spec.canonical.items()}.get(value, value)
            node[leaf] = value
        elif spec.env:
            env[spec.env] = ("1" if value else "0") if spec.kind == "bool" else str(value)

    def settable(name: str) -> bool:
        spec = dst.flags.get(name)
        return spec is not None and (bool(spec.flag and spec.kind != "none" and " " not in spec.flag)
                                     or bool(spec.yaml_key) or bool(spec.env))

    # conversions that depend on what the value means
    converted = {"expert_parallel", "chunked_prefill"}
    if "expert_parallel" in values:
        ep = values["expert_parallel"]
        width = values.get("tensor_parallel_size", 1) * values.get("data_parallel_size", 1)
        spec = dst.flags.get("expert_parallel")
        if spec is not None and spec.kind == "int" and isinstance(ep, bool):
            values["expert_parallel"] = width if ep else 1
        elif spec is not None and spec.kind == "bool" and not isinstance(ep, bool):
            values["expert_parallel"] = ep > 1
    if "chunked_prefill" in values:
        spec = dst.flags.get("chunked_prefill")
        on = values["chunked_prefill"]
        on = on if isinstance(on, bool) else on != -1
        if spec is not None and spec.kind == "int":
            if on:
                values.pop("chunked_prefill")
            else:
                values["chunked_prefill"] = -1
        else:
            values["chunked_prefill"] = on
    if "kv_cache_dtype" in values and "kv_cache_dtype" in dst.flags:
        mapped = _kv_dtype_for(dst.flags["kv_cache_dtype"], values["kv_cache_dtype"])
        if mapped is None and _KV_DTYPE_FAMILY.get(str(values["kv_cache_dtype"]).lower()) != "auto":
            lost.append(LostItem(intent="kv_cache_dtype", kind="no_equivalent",
                                 detail=f"KV dtype {values['kv_cache_dtype']!r} has no {dst.name} spelling",
                                 source=dst.flags["kv_cache_dtype"].source))
        values.pop("kv_cache_dtype")
        if mapped is not None:
            values["kv_cache_dtype"] = mapped
    slots = values.get("max_concurrent_sequences")
    ctx_spec = dst.flags.get("max_context_length")
    if ctx_spec is not None and ctx_spec.total_over_slots and "max_context_length" in values and slots:
        values["max_context_length"] = values["max_context_length"] * slots
        lost.append(LostItem(intent="max_context_length", kind="different_meaning",
                             detail=f"{ctx_spec.flag} is shared by all {slots} slots: rendered as context x slots "
                                    f"= {values['max_context_length']}; each slot holds its full context in "
                                    "memory (no paging)", source=ctx_spec.semantics or ctx_spec.source))
    metrics_flag = dst.flags.get("metrics_enable")
    if (metrics_flag is not None and metrics_flag.kind == "bool" and src.metrics_endpoint.enabled_by_default
            and not dst.metrics_endpoint.enabled_by_default):
        values.setdefault("metrics_enable", True)
        lost.append(LostItem(intent="metrics_enable", kind="different_default",
                             detail=f"metrics are on by default in {src.name}, off in {dst.name}: enabled "
                                    f"({dst.metrics_endpoint.enable}); scrape {dst.metrics_endpoint.path}",
                             source=dst.metrics_endpoint.source))
    if dst.metrics_endpoint.enable and "YAML" in dst.metrics_endpoint.enable and values.get("metrics_enable"):
        yaml_cfg["enable_iter_perf_stats"] = True

    for name, value in values.items():
        sspec = src.flags.get(name)
        dspec = dst.flags.get(name)
        if name == "metrics_enable" and value and dst.metrics_endpoint.enabled_by_default:
            continue
        differs = dspec is not None and sspec is not None and not (dspec.equivalent and sspec.equivalent)
        converted_here = name == "gpu_memory_fraction" and card is not None and gpu_total_gib
        if dspec is not None and (differs or name in MEANING_DIFFERS) and src.name != dst.name and not converted_here:
            lost.append(LostItem(
                intent=name, kind="different_meaning",
                detail=f"{_describe(sspec, name, value)} in {src.name} is not {_describe(dspec, name)} in "
                       f"{dst.name}; not copied — size it with `switchover plan capacity`",
                source=dspec.source))
            continue
        if not settable(name):
            note = (dspec.note or dspec.semantics) if dspec else None
            lost.append(LostItem(intent=name, kind="no_equivalent",
                                 detail=f"{sspec.flag if sspec else name}={value} has no {dst.name} equivalent"
                                        + (f" ({note})" if note else ""),
                                 source=dspec.source if dspec else None))
            continue
        if dspec is not None and sspec is not None and dspec.kind != sspec.kind and name not in converted and not (
                {dspec.kind, sspec.kind} <= {"str", "list"}):
            lost.append(LostItem(intent=name, kind="different_meaning",
                                 detail=f"{sspec.flag}={value} ({sspec.kind}) vs {dspec.flag or dspec.yaml_key}"
                                        f" ({dspec.kind}) in {dst.name}: {dspec.note or dspec.semantics or ''}",
                                 source=dspec.source))
            continue
        if dspec is not None and dspec.kind == "list" and not isinstance(value, list):
            value = [value]
        if dspec is not None and dspec.kind == "str" and isinstance(value, list):
            if len(value) > 1:
                lost.append(LostItem(intent=name, kind="no_equivalent",
                                     detail=f"only the first of {value} is kept in {dst.name}", source=dspec.source))
            value = value[0]
        put(name, value)
    for raw in intent.unknown:
        lost.append(LostItem(intent="?", kind="not_understood", detail=f"{raw!r}: not a known {src.name} flag; "
                             "check by hand"))
    lost.extend(api_differences(src, dst))
    cfg_flag = dst.launch.config_file
    if yaml_cfg and cfg_flag:
        argv += [cfg_flag, "extra_llm_api_options.yaml"]
    return Translation(source_engine=src.name, target_engine=dst.name, intent=intent, argv=argv, env=env,
                       yaml_config=yaml_cfg or None, lost=lost)


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
