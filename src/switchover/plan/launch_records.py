"""Records of a launch (one per input flag, env var or config key: what was typed, the option it selects at the
version, whether the version accepts it, its intent) and how a record's value sets its intents, JSON keys included.
plan.launch walks a launch into these; plan.translate renders them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from switchover.engines import EngineProfile, FlagSpec
from switchover.engines.releases import FlagSpan, ReleaseView
from switchover.errors import BadInput
from switchover.plan.launch_values import NotAValue, bool_of, convert, value_problem

Via = Literal["argv", "env", "config"]
Validity = Literal["ok", "refused", "unknown"]
# intents every engine shares without a profile entry: the model, the GPUs the process sees, a config file read
MODEL, DEVICES, CONFIG_FILE, ENV_FILE = "model", "visible_devices", "config_file", "env_file"
VALIDITY: dict[str, Validity] = {"present": "ok", "absent": "refused", "unknown": "unknown"}


class InputFlag(BaseModel):
    """One flag, environment variable or config key of the launch, as the engine's parser reads it."""

    typed: str = Field(description="as written: --tp, QUANTIZE, kv_cache_config.dtype")
    option: str | None = Field(default=None, description="the option it selects at the version (--tp-size)")
    value: Any = Field(default=None, description="the value as given (None: a bare switch)")
    via: Via = "argv"
    validity: Validity = "unknown"
    validity_detail: str | None = Field(default=None, description="why refused or unknown, with the release URL")
    intent: str | None = Field(default=None, description="what it asks for, independent of spelling")


class LaunchIntent(BaseModel):
    """What a launch asked for, by intent, independent of spelling, with one record per input flag."""

    engine: str
    version: str | None = Field(default=None, description="the engine version the launch was read at")
    version_note: str | None = Field(default=None, description="how the release data covers that version")
    model: str | None = None
    values: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    unknown: list[str] = Field(default_factory=list, description="typed spellings with no intent, not accepted")
    inputs: list[InputFlag] = Field(default_factory=list)
    produced: dict[int, list[str]] = Field(default_factory=dict, description="input index -> intents it set")
    rest: dict[int, Any] = Field(
        default_factory=dict, description="input index -> the keys of a config section no intent took"
    )
    image: str | None = None
    gpu_count: int | None = Field(default=None, description="GPUs the process sees (CUDA_VISIBLE_DEVICES, --gpus)")
    notes: list[str] = Field(default_factory=list)


@dataclass
class Opt:
    """What a typed option selects: the canonical option and its span at the version, the intent, and validity."""

    typed: str
    canonical: str | None = None
    span: FlagSpan | None = None
    intent: str | None = None
    bare: bool = True  # the value a bare switch gives the intent (False for --disable-x flags)
    negated: bool = False
    validity: Validity = "unknown"
    detail: str | None = None
    url: str | None = None
    alternatives: tuple[FlagSpan, ...] = ()  # two definitions around an unread release: a value must suit both
    attached: str | None = None  # a value the release's parser reads joined to the option word (-O3: "3")

    def check(self, name: str, value: Any, label: str) -> None:
        """Refuse (or leave unknown) a value the release's parser would not take; with two definitions around an
        unread release, a value is surely taken only when both take it."""
        if self.span is None or self.validity != "ok":
            return
        spans = self.alternatives or (self.span,)
        problems = [value_problem(name, s, value, label, self.url) for s in spans]
        if all(p is None for p in problems):
            return
        refusals = [p for p in problems if p is not None and p[0] == "refused"]
        if len(refusals) == len(problems):
            self.validity, self.detail = refusals[0]
            return
        why = next(p[1] for p in problems if p is not None)
        self.validity = "unknown"
        self.detail = (
            f"{why}; the releases read around {label} define {name} differently and the other takes it"
            if len(spans) > 1
            else why
        )

    def takes_value(self, spec: FlagSpec | None) -> bool | None:
        """True/False when the release data or the profile says; None: unknown (a boolean may take true/false,
        an unknown option takes the next word that is not an option)."""
        if self.span is not None:
            return False if self.negated else self.span.takes_value
        if spec is not None and spec.on_value is not None:
            return True
        if spec is None or spec.kind == "bool":
            return None
        return spec.kind != "none"


@dataclass
class Reader:
    profile: EngineProfile
    view: ReleaseView | None
    files: dict[str, str]
    out: LaunchIntent
    table: dict[str, tuple[str, bool]] = field(default_factory=dict)
    json_parts: dict[str, dict[str, str]] = field(default_factory=dict)
    deferred: list[tuple[int, Any]] = field(default_factory=list)  # config records applied after the command line

    @property
    def label(self) -> str:
        return f"{self.profile.name} {self.out.version}" if self.out.version else self.profile.name

    def unchecked(self) -> str:
        return f"not checked against a release: no {self.profile.launch.command.split()[0]} release data"

    def option(self, typed: str) -> Opt:
        """The option, intent and validity of a typed spelling at the launch's version."""
        opt = Opt(typed=typed)
        names = [typed]
        if self.view is None:
            opt.detail = self.unchecked()
        else:
            found = self.view.option(typed)
            opt.validity = VALIDITY[found.status]
            opt.detail = None if found.status == "present" else found.reason
            opt.url = found.url
            opt.attached = found.attached_value
            if found.status == "present" and isinstance(found.span, FlagSpan):
                opt.span, opt.canonical = found.span, found.name
                opt.alternatives = tuple(s for s in found.alternatives if isinstance(s, FlagSpan))
                names += [found.name, *found.span.aliases]
                opt.negated = is_negation(typed, found.name, found.span)
                if opt.negated and found.span.negation:
                    names.insert(0, found.span.negation)
        for name in names:
            if name in self.table:
                opt.intent, opt.bare = self.table[name]
                if opt.negated and opt.span is not None and name != opt.span.negation:
                    opt.bare = not opt.bare
                break
        return opt


def is_negation(typed: str, canonical: str, span: FlagSpan) -> bool:
    """Whether the typed spelling selected the option's negation (--no-x), written out, with underscores or as an
    abbreviation of it alone."""
    negatives = [n for n in (span.negation, *span.negations) if n]
    if not negatives:
        return False
    norm = "--" + typed[2:].replace("_", "-") if typed.startswith("--") else typed
    if norm in negatives or typed in negatives:
        return True
    return any(n.startswith(norm) for n in negatives) and not any(
        s.startswith(norm) for s in (canonical, *span.aliases)
    )


def spellings(profile: EngineProfile) -> dict[str, tuple[str, bool]]:
    """CLI spelling -> (intent, value-if-bare-boolean); a JSON key's intent is reached through its flag's."""
    table: dict[str, tuple[str, bool]] = {}
    ordered = sorted(profile.flags.items(), key=lambda item: not item[1].equivalent)  # shared meaning wins
    for intent, spec in ordered:
        if spec.kind == "none" or not spec.flag or " " in spec.flag or spec.json_key:
            continue
        for name in spec.spellings():
            table.setdefault(name, (intent, not spec.invert))
        if spec.negation:
            table[spec.negation] = (intent, spec.invert)
    return table


def json_parts(profile: EngineProfile) -> dict[str, dict[str, str]]:
    """flag -> {JSON key: intent} for intents that are keys of a JSON-valued flag."""
    parts: dict[str, dict[str, str]] = {}
    for intent, spec in profile.flags.items():
        if spec.json_key and spec.flag:
            parts.setdefault(spec.flag, {})[spec.json_key] = intent
    return parts


def record(r: Reader, opt: Opt, value: Any, via: Via) -> int:
    spec = r.profile.flags.get(opt.intent) if opt.intent else None
    option = opt.canonical or (spec.flag if spec is not None else None)
    r.out.inputs.append(
        InputFlag(
            typed=opt.typed,
            option=option,
            value=value,
            via=via,
            validity=opt.validity,
            validity_detail=opt.detail,
            intent=opt.intent,
        )
    )
    return len(r.out.inputs) - 1


def apply(r: Reader, index: int, opt: Opt, value: Any) -> None:
    """The record's value set on its intent (and on the intents of its JSON keys); a value the version refuses sets
    nothing (the engine would not start with it)."""
    if opt.intent is None or opt.intent not in r.profile.flags or r.out.inputs[index].validity == "refused":
        return
    intent = opt.intent
    spec = r.profile.flags[intent]
    if spec.kind == "bool":
        try:
            on = switch_value(spec, value)
        except NotAValue as exc:
            refuse(r, index, exc)
            return
        r.out.values[intent] = on if opt.bare else not on
        r.out.produced[index] = [intent]
        return
    parts = r.json_parts.get(spec.flag or "")
    if spec.kind == "json" or parts:
        apply_json(r, index, intent, value, parts or {})
        return
    try:
        r.out.values[intent] = convert(spec, value, intent)
    except NotAValue as exc:
        refuse(r, index, exc)
        return
    r.out.produced[index] = [intent]


def switch_value(spec: FlagSpec, value: Any) -> bool:
    """Whether a boolean intent is on, as the engine reads the value: set at all (a variable tested for presence),
    one of its true words (lowercased), the flag's one value for on, or a true/false word."""
    if spec.presence:
        return True
    if spec.true_words is not None:
        return value if isinstance(value, bool) else str(value).strip().lower() in spec.true_words
    if spec.on_value is not None:
        return str(value) == spec.on_value
    return bool_of(value)


def refuse(r: Reader, index: int, exc: NotAValue) -> None:
    """A value of the wrong kind for its option (not a number, not true/false): the record is refused with why (the
    engine's parser would not take it), and sets nothing."""
    item = r.out.inputs[index]
    item.validity, item.validity_detail = "refused", f"{item.typed} {str(item.value)[:40]!r}: {exc.message}"


def apply_json(r: Reader, index: int, intent: str | None, value: Any, parts: dict[str, str]) -> None:
    """A JSON-valued flag or a config section: keys the profile maps become their intents; the rest stays on the
    flag's intent (a section with none keeps it as the record's rest)."""
    data = value
    try:
        data = (
            pairs_of(value)
            if intent and r.profile.flags[intent].kv_pairs
            else json.loads(value)
            if isinstance(value, str)
            else value
        )
    except (ValueError, BadInput):
        record = r.out.inputs[index]
        record.validity, record.validity_detail = "refused", f"{record.typed}: not valid JSON ({str(value)[:60]!r})"
        return
    produced = [intent] if intent else []
    if isinstance(data, dict) and parts:
        data = json.loads(json.dumps(data))  # a copy the parts are taken out of
        for keys, part in sorted(parts.items(), key=lambda kv: -kv[0].count(".")):  # nested keys before their parent
            for key in keys.split("|"):
                found, item = take_path(data, key.split("."))
                if found:
                    try:
                        r.out.values[part] = convert(r.profile.flags[part], item, part)
                    except NotAValue as exc:
                        refuse(r, index, exc)
                        return
                    produced.append(part)
                    break
        if not data or intent is None:  # every key was taken out, or a section keeps the others as its rest
            produced = [p for p in produced if p != intent]
            r.out.produced[index] = produced
            if data:
                r.out.rest[index] = data
            return
    assert intent is not None
    before = r.out.values.get(intent)
    r.out.values[intent] = _merged(before, data) if isinstance(before, dict) and isinstance(data, dict) else data
    r.out.produced[index] = produced


def _merged(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Two settings of one JSON option merged key by key (vLLM merges --x.a 1 --x.b 2 into one object)."""
    out = dict(old)
    for key, value in new.items():
        out[key] = _merged(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def pairs_of(value: Any) -> Any:
    """KEY=VALUE pairs joined by commas as a mapping, numbers as numbers (vLLM nullable_kvs:
    https://github.com/vllm-project/vllm/blob/v0.8.2/vllm/engine/arg_utils.py#L55-L80); JSON or a mapping as is."""
    if not isinstance(value, str) or value.lstrip().startswith("{"):
        return json.loads(value) if isinstance(value, str) else value
    out: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in value.split(","))):
        key, eq, number = item.partition("=")
        if not eq or not re.fullmatch(r"-?\d+", number.strip()):
            raise BadInput(f"{item!r} is not KEY=NUMBER")
        out[key.strip().lower()] = int(number)
    return out


def take_path(data: dict[str, Any], path: list[str]) -> tuple[bool, Any]:
    """Remove and return the value at a nested key path (emptied mappings removed with it)."""
    head, *rest = path
    if head not in data:
        return False, None
    if not rest:
        return True, data.pop(head)
    node = data[head]
    if not isinstance(node, dict):
        return False, None
    found, item = take_path(node, rest)
    if found and not node:
        data.pop(head)
    return found, item
