"""`rollout.custom_gates`: gates written by the team, as PromQL, as an expression over ledger fields, or as one of
the built-ins (JSON parse-failure rate, output-length shift, cache hits right after the switch).

    custom_gates:
      - name: queue_p99
        promql: histogram_quantile(0.99, sum by (le) (rate(vllm:request_queue_time_seconds_bucket[{window}])))
        max: 2.0                      # {window} becomes the gate window, e.g. 300s
      - name: long_prompt_errors
        ledger: {where: "prompt_tokens > 2000", fail_when: "outcome == 'error' or finish_reason == 'length'"}
        max: 0.02
        by: task_type                 # one verdict per task type; any failing type fails the gate
      - {name: json_ok, builtin: parse_failure_rate, max: 0.01}
      - {name: length, builtin: output_length_shift, max: 0.25}
      - {name: cold_cache, builtin: cache_hits_after_switch, max: 0.05}
      - {name: ratings, builtin: spot_check_rating, max: 0.05, min_samples: 50}   # `switchover review` ratings
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from switchover.expr import ExprError, compile_expr
from switchover.ledger_record import row_fields

Builtin = Literal["parse_failure_rate", "output_length_shift", "cache_hits_after_switch", "spot_check_rating"]
BUILTIN_DEFAULTS: dict[str, dict[str, float | bool]] = {
    # structured-output validity is where quantization and template changes show first (hard fail)
    "parse_failure_rate": {"max": 0.02, "hard": True},
    # length thresholds were tuned to the old model; a shift means re-tuning, not rolling back
    "output_length_shift": {"max": 0.25, "hard": False},
    # the new model's first requests should see cache hits ≈ 0, not 60 % (docs/diff-model.md, cachekey)
    "cache_hits_after_switch": {"max": 0.05, "hard": True},
    # ~200 human-rated pairs a day by task type; max is the worse-or-broken share, min_samples ratings
    "spot_check_rating": {"max": 0.10, "hard": True},
}
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_expr(value: str) -> str:
    try:
        compile_expr(value, row_fields())
    except ExprError as exc:
        raise ValueError(f"not a valid expression: {exc}") from None
    return value


class LedgerQuery(BaseModel):
    """A rate over ledger rows: of the rows `where` selects (on `arm`), the share for which `fail_when` is true."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    fail_when: str = Field(description="Expression: this row counts as a failure, e.g. finish_reason == 'length'")
    where: str | None = Field(default=None, description="Expression: only these rows count (default: all)")
    arm: Literal["new", "old"] = Field(default="new", description="Rows the policy routed to this arm")

    @field_validator("fail_when", "where")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return None if value is None else _check_expr(value)


class CustomGate(BaseModel):
    """One custom gate; exactly one of `promql`, `ledger` or `builtin`."""

    # a NaN limit compares false both ways: the gate would pass whatever it saw
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(description="Used in stage `gates:` lists and holding windows (lower_snake_case)")
    description: str = Field(default="", max_length=500)
    promql: str | None = Field(default=None, max_length=4000, description="Instant query; {window} → e.g. 300s")
    ledger: LedgerQuery | None = None
    builtin: Builtin | None = None
    max: float | None = Field(default=None, description="Fail above this (a rate, a value, or a relative shift)")
    min: float | None = Field(default=None, description="Fail below this (PromQL values)")
    max_increase: float | None = Field(
        default=None, ge=0, le=1, description="Ledger rates: fail when new's rate exceeds old's by more than this"
    )
    by: str | None = Field(default=None, description="Per-group verdicts: a ledger field or a PromQL label")
    min_samples: int | None = Field(default=None, ge=1, le=1_000_000, description="Default: rollout.gates.min_samples")
    first_n: int = Field(default=50, ge=1, le=100_000, description="cache_hits_after_switch: requests looked at")
    hard: bool | None = Field(default=None, description="A failure rolls back (default true, length shift false)")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"must be lower_snake_case (a-z, 0-9, _), at most 64 characters, got {value!r}")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> CustomGate:
        kinds = [k for k in ("promql", "ledger", "builtin") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"gate {self.name}: give exactly one of promql, ledger, builtin (got {kinds or 'none'})")
        if self.builtin is not None:
            defaults = BUILTIN_DEFAULTS[self.builtin]
            if self.max is None:
                self.max = float(defaults["max"])
            if self.hard is None:
                self.hard = bool(defaults["hard"])
        if self.hard is None:
            self.hard = True
        if self.promql is not None:
            if self.max is None and self.min is None:
                raise ValueError(f"gate {self.name}: a promql gate needs max or min")
            if self.max_increase is not None:
                raise ValueError(f"gate {self.name}: max_increase applies to ledger rates only")
            if self.by is not None and not _LABEL.match(self.by):
                raise ValueError(f"gate {self.name}: by must be a label name, got {self.by!r}")
        else:
            if self.min is not None:
                raise ValueError(f"gate {self.name}: min applies to promql gates only")
            if self.max is None and self.max_increase is None:
                raise ValueError(f"gate {self.name}: give max (or max_increase)")
            if self.by is not None and self.by not in row_fields():
                raise ValueError(
                    f"gate {self.name}: by must be a ledger field, got {self.by!r} "
                    f"(known: {', '.join(sorted(row_fields()))})"
                )
        return self

    @property
    def kind(self) -> Literal["promql", "ledger", "builtin"]:
        return "promql" if self.promql is not None else "ledger" if self.ledger is not None else "builtin"
