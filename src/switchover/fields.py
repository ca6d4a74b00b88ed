"""Field definitions that several output models share: one meaning and one description (what `switchover schema`
shows for the field) wherever the field appears. A module's own concepts are defined in that module."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

FinishReason = Annotated[
    str | None,
    Field(
        description="finish_reason of the answer's first choice (index 0) as the engine sent it: stop, length, "
        "tool_calls, ...; None: the answer carried none. The gateway's ledger says 'error' for a stream that "
        "broke (outcome failed_mid_stream) before one arrived"
    ),
]

TASK_TYPE = (
    "The request's task type (gateway.task_types: the first rule that matches, else the task header, else 'other')"
)
"""The description of a task-type field (its type differs: optional in a ledger row, required in a review pair)."""
