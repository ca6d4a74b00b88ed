"""The plan tests' look-ups in what launch parsing and translate return, by the word the user typed (records as
Any: tests read their optional fields directly)."""

from __future__ import annotations

from typing import Any

from switchover.plan.launch_records import LaunchIntent
from switchover.plan.translate import Translation


def by_typed(launch: LaunchIntent) -> dict[str, Any]:
    """A parsed launch's input records by the word typed (`--max_num_seqs`, `VLLM_USE_V1`)."""
    return {x.typed: x for x in launch.inputs}


def outcomes(tr: Translation) -> dict[str, Any]:
    """A translation's per-flag results by the input word typed."""
    return {f.input.typed: f for f in tr.flags}


def after(tr: Translation, option: str) -> str:
    """The word that follows `option` on the translated command line (its value)."""
    return tr.argv[tr.argv.index(option) + 1]
