"""Ledger rows as the expression language sees them: a flat mapping of field → value, plus a task type.

The fields are the ledger contract's (switchover/ledger_record.py, `row_fields`). Without a gateway label, the task
type comes from `rollout.task_types` rules (config/rollout.py `TaskTypeRule`), then "other".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from switchover.config.rollout import TaskTypeRule
from switchover.expr import Expression, compile_expr
from switchover.ledger_record import LEFT_OUT, LedgerRecord, row_fields

OTHER = "other"


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
    """The mapping an expression reads: the declared fields (null when a row lacks them), the task type."""
    view = {k: getattr(record, k) for k in LedgerRecord.model_fields if k not in LEFT_OUT}
    view["task_type"] = (typer or TaskTyper())(view)
    return view
