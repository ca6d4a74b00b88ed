"""Shared CLI plumbing: consoles, JSON output, running coroutines."""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from rich.console import Console

if TYPE_CHECKING:
    from pydantic import BaseModel

T = TypeVar("T")

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def run(coro: Coroutine[Any, Any, T], *, hot: bool = False) -> T:
    """Run a coroutine on uvloop where available; `hot`: a load-generating command (quieter GC, see gctune)."""
    if hot:
        from switchover.gctune import quiet_gc

        quiet_gc()
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:  # pragma: no cover - uvloop is a core dependency on Linux
        import asyncio

        return asyncio.run(coro)


def print_json(obj: BaseModel | dict[str, Any] | list[Any]) -> None:
    """Write JSON to stdout, uncoloured, for machines."""
    import orjson
    from pydantic import BaseModel

    if isinstance(obj, BaseModel):
        text = obj.model_dump_json(indent=2)
    else:
        text = orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def show_report(report: Any, json_out: bool, render: Callable[[Any], None]) -> None:
    """A comparison report as JSON or as console text; Unreachable (exit code) when an endpoint went away, so a
    partial report is never read as a pass."""
    from switchover.errors import Unreachable

    if json_out:
        print_json(report)
    else:
        render(report)
    if report.partial:
        raise Unreachable(f"partial report: {report.partial_reason}")
