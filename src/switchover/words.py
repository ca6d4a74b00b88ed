"""Values in plain words for tables and reports: a dict, list, None or bool from a profile or a model file is
printed as a user would write it ("temperature 0.6, top_p 0.95"; "not known"), never as a Python repr."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def plain(value: Any, unit: str | None = None, *, missing: str = "not known", empty: str = "none") -> str:
    """`value` as words: None -> `missing`, True/False -> yes/no, numbers with `unit`, mappings as "key value, ...",
    sequences as "a, b"; an empty mapping or sequence -> `empty`."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        number = f"{value:g}" if isinstance(value, float) else f"{value:,}"
        return f"{number} {unit}" if unit else number
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {plain(v, missing=missing)}" for k, v in value.items()) or empty
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(plain(v, missing=missing) for v in value) or empty
    return str(value)
