"""What became of each input flag of a translated launch (one record each: translated, the target's default,
passed through, lost with why), from the results of the intents it set; and the target's words for the model."""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from switchover.engines.releases import FlagSpan
from switchover.plan.launch import CONFIG_FILE, DEVICES, ENV_FILE, MODEL, InputFlag, LaunchIntent
from switchover.plan.launch_config import env_kind
from switchover.plan.launch_values import FALSE, TRUE
from switchover.plan.translate_values import LostKind, Outcome, Render


class FlagResult(BaseModel):
    """One input flag and what became of it in the target."""

    input: InputFlag
    outcome: Outcome
    rendered: list[str] = Field(default_factory=list, description="the target words it produced")
    detail: str | None = Field(default=None, description="why (for lost: no equivalent, refused, removed in ...)")
    source: str | None = Field(default=None, description="URL behind the outcome")
    kind: LostKind | None = Field(default=None, description="for lost flags: what kind of loss")


# ---- one result per input flag -----------------------------------------------------------------------------------


def model_words(r: Render, model: str | None) -> list[str]:
    """The target's words naming the model; none when the launch names none and the engine stays (it finds its
    model another way, e.g. llama.cpp -hf REPO, carried as a flag of its own)."""
    if model is None:
        return []
    return [model] if r.dst.launch.model_arg == "positional" else [r.dst.launch.model_arg, model]


def flag_result(r: Render, intent: LaunchIntent, index: int, item: InputFlag) -> FlagResult:
    """What became of one input flag, from the results of the intents it set."""
    produced = intent.produced.get(index, [])
    if item.validity == "refused":
        return FlagResult(
            input=item, outcome="lost", kind="refused", detail=f"the source version refuses it: {item.validity_detail}"
        )
    if item.intent == MODEL:
        return FlagResult(
            input=item, outcome="translated", rendered=model_words(r, r.model), detail=r.details.get(MODEL)
        )
    if item.intent == DEVICES:
        value = r.env.get(item.typed, item.value)
        return FlagResult(
            input=item,
            outcome="translated",
            rendered=[f"{item.typed}={value}"],
            detail=r.details.get(DEVICES, "CUDA reads it the same in every engine"),
        )
    if item.intent in (CONFIG_FILE, ENV_FILE):
        return _file_result(r, intent, item)
    results = [r.results[i] for i in produced if i in r.results]
    remainder = _remainder(r, intent, index, item, produced)
    if not results:
        return _without_intent(r, intent, item)
    own = r.results.get(item.intent or "") if item.intent in produced and len(produced) > 1 else None
    if own is not None and own.outcome == "lost":  # the object's other keys: said, the keys taken out still count
        results = [x for x in results if x is not own]
        remainder = f"the rest of it ({item.typed}) is not carried: {own.detail}"
    lost = [x for x in results if x.outcome == "lost"]
    rendered = list(dict.fromkeys(w for x in results for w in x.rendered))
    if lost:
        return FlagResult(
            input=item,
            outcome="lost",
            rendered=rendered,
            detail="; ".join([x.detail or "" for x in lost] + ([remainder] if remainder else [])),
            source=lost[0].source,
            kind=lost[0].kind,
        )
    outcome: Outcome = "default_matches" if all(x.outcome == "default_matches" for x in results) else "translated"
    details = [x.detail for x in results if x.detail] + ([remainder] if remainder else [])
    return FlagResult(
        input=item, outcome=outcome, rendered=rendered, detail="; ".join(details) or None, source=results[0].source
    )


def _remainder(r: Render, intent: LaunchIntent, index: int, item: InputFlag, produced: list[str]) -> str | None:
    """The keys of a config section no intent took: kept in the same engine's file, else said to be left behind."""
    rest = intent.rest.get(index)
    if not rest:
        return None
    if r.src.name == r.dst.name:
        node = r.yaml_cfg.setdefault(item.typed, {})
        for key, value in rest.items():
            node.setdefault(key, value)
        return f"its other keys kept: {', '.join(rest)}" if produced else None
    return f"not carried: {', '.join(rest)} (no intent maps {'them' if len(rest) > 1 else 'it'} to {r.dst.name})"


def _file_result(r: Render, intent: LaunchIntent, item: InputFlag) -> FlagResult:
    """A config file (its settings are records of their own) or a docker --env-file that was not given."""
    if item.intent == ENV_FILE:
        return FlagResult(
            input=item,
            outcome="lost",
            kind="not_understood",
            detail=f"env file {item.value} not given: its variables are not read (pass --file)",
        )
    if any("config file" in n and repr(str(item.value)) in n for n in intent.notes):
        return FlagResult(
            input=item,
            outcome="lost",
            kind="not_understood",
            detail=f"config file {item.value} not given: its settings are not read (pass --file)",
        )
    read = sum(1 for x in intent.inputs if x.via == "config")
    return FlagResult(
        input=item,
        outcome="translated",
        detail=f"read: its {read} settings are listed one by one",
        rendered=[r.dst.launch.config_file] if r.yaml_cfg and r.dst.launch.config_file else [],
    )


def _without_intent(r: Render, intent: LaunchIntent, item: InputFlag) -> FlagResult:
    """A flag no intent covers: refused at the source, passed through unchanged (same engine, or a library's
    environment variable), or lost with why."""
    if item.validity == "refused" and item.intent is None:
        return FlagResult(
            input=item, outcome="lost", detail=f"the source version refuses it: {item.validity_detail}", kind="refused"
        )
    if item.intent is not None:
        return FlagResult(
            input=item,
            outcome="lost",
            detail=item.validity_detail or "its value could not be read",
            kind="refused" if item.validity == "refused" else "not_understood",
        )
    if item.via == "env":
        return _env_through(r, item)
    if r.src.name == r.dst.name and item.via == "config" and (item.option is None or r.dview is None):
        if isinstance(item.value, dict):
            r.yaml_cfg.setdefault(item.typed, {}).update(item.value)
        else:
            r.yaml_cfg.setdefault(item.typed, item.value)
        return FlagResult(
            input=item,
            outcome="passed_through",
            rendered=[f"{item.typed}: {json.dumps(item.value)}"],
            detail=f"kept in the config file; {item.validity_detail or 'not checked'}",
        )
    if r.src.name == r.dst.name and item.option and item.validity == "ok":
        return _same_option(r, item)
    if item.validity == "ok":
        return FlagResult(
            input=item,
            outcome="lost",
            kind="no_equivalent",
            detail=f"{item.option} ({r.src.name}) has no known {r.dst.name} equivalent: no intent maps "
            "it, so it is not guessed",
        )
    return FlagResult(
        input=item,
        outcome="lost",
        kind="not_understood",
        detail=f"{item.typed!r}: not understood ({item.validity_detail}); check by hand",
    )


def _env_through(r: Render, item: InputFlag) -> FlagResult:
    kind = env_kind(r.src, item.typed)
    if kind == "library" or (kind == "engine" and r.src.name == r.dst.name):
        r.env[item.typed] = str(item.value)
        return FlagResult(
            input=item,
            outcome="passed_through",
            rendered=[f"{item.typed}={item.value}"],
            detail="read by a library the same way in any engine"
            if kind == "library"
            else f"a {r.src.name} variable, kept for {r.target_label} (not checked there)",
        )
    return FlagResult(
        input=item,
        outcome="lost",
        kind="no_equivalent",
        detail=f"{item.typed} is read by {r.src.name}, not by {r.dst.name}",
    )


def _same_option(r: Render, item: InputFlag) -> FlagResult:
    """A same-engine upgrade: the option kept where the target version has it with the same kind."""
    assert item.option is not None
    dotted = (
        item.typed.startswith(item.option + ".")
        and r.dview is not None
        and bool(r.dview.parser and r.dview.parser.dotted_keys)
    )  # --json-option.key VALUE, where the target reads it too
    values = [] if item.value is None else item.value if isinstance(item.value, list) else [item.value]
    words = [item.typed if dotted else item.option] + [json.dumps(v) if isinstance(v, dict) else str(v) for v in values]
    if r.dview is None:
        r.argv.extend(words)
        return FlagResult(
            input=item,
            outcome="passed_through",
            rendered=words,
            detail=f"kept as is; not checked at {r.target_label}: no release data",
        )
    found = r.dview.option(item.option)
    if found.status == "absent":
        return FlagResult(input=item, outcome="lost", kind="refused", detail=f"removed: {found.reason}")
    if item.via == "config":
        node = r.yaml_cfg
        node[item.typed] = item.value
        return FlagResult(input=item, outcome="passed_through", rendered=[f"{item.typed}: {item.value}"])
    span = found.span if isinstance(found.span, FlagSpan) and found.status == "present" else None
    reshaped = _reshaped(item, span, words)
    if isinstance(reshaped, str):
        return FlagResult(
            input=item,
            outcome="lost",
            kind="refused",
            source=found.url,
            detail=f"{r.target_label} would refuse it: {reshaped}",
        )
    r.argv.extend(reshaped)
    return FlagResult(
        input=item,
        outcome="passed_through",
        rendered=reshaped,
        source=found.url,
        detail=None if found.status == "present" else f"not checked: {found.reason}",
    )


_ON_WORDS = ("on", "true", "1", "enabled")


def _reshaped(item: InputFlag, span: FlagSpan | None, words: list[str]) -> list[str] | str:
    """The words where the option changed between a switch and one that takes a word (llama.cpp --flash-attn: a
    switch, then [on|off|auto]): a bare switch becomes the target's word for on, a true/false word a bare switch;
    why not, when neither fits."""
    if span is None:
        return words
    if item.value is None and span.takes_value and not span.value_optional:
        word = next((w for w in _ON_WORDS if span.choices and w in span.choices), None)
        return [words[0], word] if word else f"{words[0]} takes a value there, and a bare switch gives none"
    if item.value is not None and not span.takes_value and isinstance(item.value, str):
        if item.value.lower() in TRUE:
            return words[:1]
        if item.value.lower() in FALSE and span.negation:
            return [span.negation]
        return f"{words[0]} is a switch there: {item.value!r} cannot be given"
    return words
