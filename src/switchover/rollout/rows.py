"""Ledger rows as the expression language sees them: a flat mapping of field → value, plus a task type.

The fields are the ledger contract's (gateway/ledger_record.py), including `task_type` (the gateway's label from
`gateway.task_types`), `json_valid` (the answer parsed as JSON, when the request asked for JSON) and
`cached_tokens` (usage.prompt_tokens_details.cached_tokens); rows from ledgers older than those fields read them as
`null`. Without a gateway label, the task type comes from `rollout.task_types` rules, then "other".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from switchover.gateway.ledger_record import LedgerRecord
from switchover.rollout.expr import ExprError, Expression, compile_expr

PENDING_FIELDS: dict[str, str] = {
    "task_type": "a task-type label set by the gateway (header, route or rule)",
    "json_valid": "whether the answer parsed as JSON / matched the requested schema",
    "cached_tokens": "usage.prompt_tokens_details.cached_tokens of the answer",
}
_LEFT_OUT = {"kind", "shadow", "prompt"}
OTHER = "other"


def row_fields() -> frozenset[str]:
    """Every field an expression may name."""
    declared = {k for k in LedgerRecord.model_fields if k not in _LEFT_OUT}
    return frozenset(declared | set(PENDING_FIELDS))


def pending_missing() -> list[str]:
    """PENDING_FIELDS the ledger contract does not declare yet (so they are always null today)."""
    return [k for k in PENDING_FIELDS if k not in LedgerRecord.model_fields]


class TaskTypeRule(BaseModel):
    """`rollout.task_types` item: a label and the expression that picks its requests (first match wins)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    when: str = Field(description="Expression over ledger fields, e.g. path == '/v1/chat/completions'")

    @field_validator("when")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            compile_expr(value, row_fields() - {"task_type"})
        except ExprError as exc:
            raise ValueError(f"not a valid expression: {exc}") from None
        return value


class TaskTyper:
    """Assigns each row its task type: the gateway's label, else the first matching rule, else 'other'."""

    def __init__(self, rules: Sequence[TaskTypeRule] = ()) -> None:
        fields = row_fields() - {"task_type"}
        self.rules: list[tuple[str, Expression]] = [(r.name, compile_expr(r.when, fields)) for r in rules]

    def __call__(self, view: dict[str, Any]) -> str:
        label = view.get("task_type")
        if isinstance(label, str) and label:
            return label
        for name, expr in self.rules:
            if expr.matches(view):
                return name
        return OTHER


def row_view(record: LedgerRecord, typer: TaskTyper | None = None) -> dict[str, Any]:
    """The mapping an expression reads: declared fields, pending ones (null when absent), the task type."""
    view = {k: getattr(record, k) for k in LedgerRecord.model_fields if k not in _LEFT_OUT}
    for k in PENDING_FIELDS:
        view.setdefault(k, getattr(record, k, None))
    view["task_type"] = (typer or TaskTyper())(view)
    return view
