"""Options of the target that take one JSON object (vLLM --speculative-config, --hf-overrides): the intents that are
keys of the object, and what the input's own object held beyond them, gathered and rendered once; and the target's
spelling of an option at its release."""

from __future__ import annotations

import json
from typing import Any

from switchover.engines import FlagSpec
from switchover.engines.releases import FlagSpan
from switchover.plan.translate_values import Render, Result, spelled


def target_option(r: Render, spec: FlagSpec) -> tuple[str | None, FlagSpan | None, str | None, str | None]:
    """(the spelling to render, its span, why none exists, its URL) at the target version: the profile's flag or an
    alias the release data has there."""
    assert spec.flag is not None
    if r.dview is None:
        return spec.flag, None, None, None
    reason = None
    for name in spec.spellings():
        found = r.dview.option(name)
        if (found.status == "present" and found.matched_as is None) or (
            found.status == "present" and (found.matched_as and "another spelling" in found.matched_as)
        ):
            return name, found.span if isinstance(found.span, FlagSpan) else None, None, found.url
        if found.status == "unknown":
            return spec.flag, None, None, None
        reason = reason or found.reason
    return None, None, reason, None


def has_members(r: Render, flag: str) -> bool:
    """Whether some intent of the target is a key of this flag's object."""
    return any(s.flag == flag and s.json_key for s in r.dst.flags.values())


def member(r: Render, intent: str, spec: FlagSpec, value: Any, detail: str | None) -> Result:
    """A key of a JSON-valued flag: gathered, rendered once every value is placed (a mapping merges with what is
    already under that key: the keys placed one by one win)."""
    assert spec.flag and spec.json_key
    node = r.json_objs.setdefault(spec.flag, {})
    *parents, leaf = spec.json_key.split("|")[0].split(".")
    for part in parents:
        node = node.setdefault(part, {})
    value = spelled(spec, value)
    node[leaf] = {**value, **node[leaf]} if isinstance(value, dict) and isinstance(node.get(leaf), dict) else value
    r.json_members.setdefault(spec.flag, []).append(intent)
    return Result("translated", [], detail, spec.source)


def base(r: Render, intent: str, spec: FlagSpec, value: dict[str, Any], detail: str | None) -> Result:
    """The flag's own object (what the input's object held beyond the intents taken out of it), under its keys."""
    assert spec.flag
    node = r.json_objs.setdefault(spec.flag, {})
    for key, item in value.items():
        node.setdefault(key, item)
    r.json_members.setdefault(spec.flag, []).append(intent)
    return Result("translated", [], detail, spec.source)


def render_json(r: Render) -> None:
    """Each gathered object as its flag and one JSON word; every intent in it gets that rendering."""
    for flag, obj in r.json_objs.items():
        container = next((i for i, s in r.dst.flags.items() if s.flag == flag and not s.json_key), None)
        spec = r.dst.flags[container] if container else FlagSpec(flag=flag, kind="json", source="")
        name, _, missing, url = target_option(r, spec)
        members = r.json_members.get(flag, [])
        if name is None:
            for intent in members:
                r.results[intent] = Result(
                    "lost", detail=f"no {flag} in {r.target_label}: {missing}", kind="refused", source=spec.source
                )
            continue
        words = [name, json.dumps(obj)]
        r.argv.extend(words)
        for intent in members:
            prior = r.results.get(intent)
            r.results[intent] = Result("translated", words, prior.detail if prior else None, url or spec.source)
