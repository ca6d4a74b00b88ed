"""A Prometheus rule file as data: reading it (BadInput naming the malformed field) and writing it back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from switchover.errors import BadInput


def rules_of(data: Any, path: Path) -> list[tuple[int, str, int, dict[str, Any]]]:
    """(group index, group name, rule index, rule) for every rule; BadInput naming the field when malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
        raise BadInput(f"{path}: groups: a Prometheus rule file needs a `groups:` list")
    out = []
    for gi, g in enumerate(data["groups"]):
        if not isinstance(g, dict) or not isinstance(g.get("name"), str):
            raise BadInput(f"{path}: groups[{gi}].name: each group needs a name")
        if not isinstance(g.get("rules"), list):
            raise BadInput(f"{path}: groups[{gi}].rules: a list of rules is needed")
        for ri, r in enumerate(g["rules"]):
            where = f"groups[{gi}].rules[{ri}]"
            if not isinstance(r, dict):
                raise BadInput(f"{path}: {where}: a rule is a mapping (alert or record, expr, ...)")
            if ("alert" in r) == ("record" in r):
                raise BadInput(f"{path}: {where}: give exactly one of alert, record")
            if not isinstance(r.get("expr"), str | int | float):
                raise BadInput(f"{path}: {where}.expr: required (a PromQL expression)")
            if not isinstance(r.get("annotations") or {}, dict):  # an untranslated alert gets one added
                raise BadInput(f"{path}: {where}.annotations: a mapping of name: text is needed")
            out.append((gi, g["name"], ri, r))
    return out


def recorded_names(data: dict[str, Any]) -> set[str]:
    """The series the file's own recording rules define (never an engine's, whatever their prefix)."""
    return {str(r["record"]) for g in data["groups"] for r in g["rules"] if isinstance(r, dict) and "record" in r}


def dump_rules(data: dict[str, Any]) -> str:
    """The rule file as YAML (comments of the input are not carried over)."""
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100_000)
