"""YAML written by users, read safely: bounded size, depth and alias expansion, scalar keys only, and every
refusal names the line and column (PyYAML's safe loader alone recurses forever on `a: &x [*x]` and expands a
billion-laughs document without limit).

Callers: the migration file (config/migration.py), `plan translate` launch configs, `plan grace --scan` manifests.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from switchover.errors import BadInput
from switchover.textfile import read_text

__all__ = ["YamlDoc", "checked_nodes", "load_document", "load_documents", "load_file", "read_text"]

MAX_BYTES = 1 << 20  # a migration file is a few KiB; a deploy manifest rarely passes 100 KiB
MAX_DEPTH = 64  # nesting of mappings and sequences
MAX_NODES = 100_000  # nodes after alias expansion (the billion-laughs bound)

Position = tuple[int, int]  # 1-based line, column


@dataclass
class YamlDoc:
    """One document's data, plus the position of every key and item by its path (for error messages)."""

    data: Any
    positions: dict[tuple[Any, ...], Position] = field(default_factory=dict)

    def line_of(self, path: tuple[Any, ...]) -> int | None:
        """The line of `path`, or of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            if path[:end] in self.positions:
                return self.positions[path[:end]][0]
        return None


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "unknown position"


def _pos(node: yaml.Node) -> Position:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Loader(yaml.SafeLoader):
    """The safe loader; only its composer is used, construction is done here with limits."""


def _check_events(text: str, source: str) -> None:
    """Depth and syntax over the event stream (iterative, so deep nesting cannot exhaust the stack)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise BadInput(f"{source}: {_at(event.start_mark)}: nested more than {MAX_DEPTH} levels deep")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as exc:
        raise BadInput(f"{source}: not valid YAML{_where(exc)}: {_problem(exc)}") from None


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return f" ({_at(mark)})" if mark is not None else ""


def _problem(exc: yaml.YAMLError) -> str:
    text = getattr(exc, "problem", None) or str(exc)
    return " ".join(str(text).split())


class _Builder:
    """Turns composed nodes into Python data, refusing cycles, non-scalar keys and runaway expansion."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.nodes = 0
        self.constructor = yaml.constructor.SafeConstructor()
        self.positions: dict[tuple[Any, ...], Position] = {}

    def fail(self, node: yaml.Node, problem: str) -> BadInput:
        return BadInput(f"{self.source}: {_at(node.start_mark)}: {problem}")

    def build(self, node: yaml.Node | None, path: tuple[Any, ...] = (), active: frozenset[int] = frozenset()) -> Any:
        if node is None:
            return None
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail(node, f"aliases expand to more than {MAX_NODES} values (refused: an alias bomb?)")
        if id(node) in active:
            raise self.fail(node, "an alias refers to a value that contains it (recursive alias)")
        self.positions.setdefault(path, _pos(node))
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node)
        inner = active | {id(node)}
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i), inner) for i, item in enumerate(node.value)]
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                kind = "a list" if isinstance(key_node, yaml.SequenceNode) else "a mapping"
                raise self.fail(key_node, f"a key must be a plain value, got {kind}")
            key = self.scalar(key_node)
            self.positions[(*path, key)] = _pos(key_node)
            out[key] = self.build(value_node, (*path, key), inner)
        return out

    def scalar(self, node: yaml.ScalarNode) -> Any:
        try:
            return self.constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as exc:
            problem = " ".join(str(getattr(exc, "problem", None) or exc).split())[:120]
            raise self.fail(node, f"cannot read value {node.value[:40]!r}: {problem}") from None


def _compose_all(text: str, source: str, max_bytes: int) -> list[yaml.Node]:
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise BadInput(f"{source}: larger than {max_bytes // 1024} KiB")
    _check_events(text, source)
    try:
        return [n for n in yaml.compose_all(text, Loader=_Loader) if n is not None]
    except yaml.YAMLError as exc:
        raise BadInput(f"{source}: not valid YAML{_where(exc)}: {_problem(exc)}") from None


def load_documents(text: str, source: str, *, max_bytes: int = MAX_BYTES) -> list[YamlDoc]:
    """Every document of a YAML stream, each with positions; BadInput naming line and column otherwise."""
    docs = []
    for node in _compose_all(text, source, max_bytes):
        builder = _Builder(source)
        data = builder.build(node)
        docs.append(YamlDoc(data, builder.positions))
    return docs


def load_document(text: str, source: str, *, max_bytes: int = MAX_BYTES) -> YamlDoc:
    """Exactly one YAML document (empty text: data None)."""
    docs = load_documents(text, source, max_bytes=max_bytes)
    if len(docs) > 1:
        raise BadInput(f"{source}: holds {len(docs)} YAML documents, expected one")
    return docs[0] if docs else YamlDoc(None)


def load_file(path: str | Path, *, max_bytes: int = MAX_BYTES, what: str = "YAML file") -> YamlDoc:
    """Read and load one YAML document from a file."""
    return load_document(read_text(path, max_bytes=max_bytes, what=what), str(path), max_bytes=max_bytes)


def checked_nodes(text: str, source: str, *, max_bytes: int = MAX_BYTES) -> Iterator[yaml.Node]:
    """Composed documents for node-level scanners, each first proven finite (no cycles, bounded expansion)."""
    for node in _compose_all(text, source, max_bytes):
        _Builder(source).build(node)
        yield node
