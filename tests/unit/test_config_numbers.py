"""Every number in switchover.yaml, walked from the JSON Schema: NaN and infinity are refused (exit 2) with the
field named, in every section (issue 11: one validation layer for numbers, config fields included)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from switchover.config import load_migration, migration_schema
from switchover.errors import BadInput

BASE: dict[str, Any] = {
    "old": {"url": "http://127.0.0.1:8001", "engine": "vllm"},
    "new": {"url": "http://127.0.0.1:8002", "engine": "llamacpp"},
}


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def number_paths(
    schema: dict[str, Any], node: dict[str, Any] | None = None, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Paths of every number or integer field reachable through objects (lists and maps are skipped)."""
    node = _resolve(schema, node if node is not None else schema)
    for option in node.get("anyOf", []):
        yield from number_paths(schema, option, path)
    if node.get("type") in ("number", "integer"):
        yield path
    for name, sub in node.get("properties", {}).items():
        if len(path) < 6:
            yield from number_paths(schema, sub, (*path, name))


PATHS = sorted({p for p in number_paths(migration_schema()) if p and p[0] not in ("old", "new")})


def _doc(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    node = doc
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return doc


def test_the_walk_finds_the_numbers_of_every_section() -> None:
    assert {p[0] for p in PATHS} >= {"gateway", "rollout", "bench", "check"}
    assert len(PATHS) > 30


CASES = [pytest.param(path, bad, id=f"{bad}-{'.'.join(path)}") for path in PATHS for bad in (".nan", ".inf", "-.inf")]


@pytest.mark.parametrize(("path", "bad"), CASES)
def test_nan_and_infinity_are_refused_naming_the_field(tmp_path: Path, path: tuple[str, ...], bad: str) -> None:
    text = yaml.safe_dump(_doc(path, "PLACEHOLDER")).replace("PLACEHOLDER", bad)
    f = tmp_path / "switchover.yaml"
    f.write_text(text)
    with pytest.raises(BadInput) as exc:
        load_migration(f)
    assert ".".join(path) in exc.value.message or path[-1] in exc.value.message, exc.value.message
