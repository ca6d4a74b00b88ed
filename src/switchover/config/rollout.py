"""The `rollout:` section of switchover.yaml: stages, gate thresholds, where the evidence comes from.

Defaults follow docs/rollout.md's stage table: shadow first (distribution tests on output length, finish_reason,
error codes), then small/medium/large/full weights whose hard gates are error rate, TTFT tail and fallback
ratio, with the TPOT tail added from the medium stage on.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from switchover.config.rollout_custom import CustomGate
from switchover.config.rollout_entry import DAY_S, CostSettings, EntrySettings
from switchover.config.rollout_holding import HoldingSettings
from switchover.config.rollout_judge import JudgeConfig
from switchover.expr import ExprError, compile_expr
from switchover.inputs import BaseUrl
from switchover.ledger_record import row_fields


class GateName(StrEnum):
    """Gates a stage can require; each has one formula in gates.py."""

    ERROR_RATE = "error_rate"  # new-arm requests that ended in error / new-arm requests
    FALLBACK_RATIO = "fallback_ratio"  # new-arm requests answered by old after a fallback / new-arm requests
    TTFT_P99_RATIO = "ttft_p99_ratio"  # p99 TTFT of new / p99 TTFT of old
    TPOT_P99_RATIO = "tpot_p99_ratio"  # p99 TPOT of new / p99 TPOT of old
    SHADOW_DISTRIBUTION = "shadow_distribution"  # shadow vs old, beyond the A/A noise (compare.py)


class StageSpec(BaseModel):
    """One stage: the share of tenants on the new engine, whether shadow traffic runs, and its gates."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(description="Label used in state, audit log and exports, e.g. 'shadow' or '20%'")
    weight: int = Field(ge=0, le=100, description="Percent of tenant buckets routed to the new engine")
    shadow: bool = Field(default=False, description="Mirror traffic to the new engine (results discarded)")
    gates: list[GateName] | None = Field(
        default=None, description="Exit gates of this stage; default depends on the stage (docs/rollout.md)"
    )
    custom: list[str] = Field(
        default_factory=list,
        description="Names of rollout.custom_gates judged at this stage (they may also be listed under gates:)",
    )
    min_duration_s: float = Field(
        default=0.0, ge=0, description="Stay at least this long before advancing (e.g. 86400 to cover a daily peak)"
    )
    require_zero_rollbacks: bool | None = Field(
        default=None,
        description="Enter the next stage only if this stage saw no rollback; default on from the "
        "second weighted stage (a stage that needed a rollback has not earned the next one)",
    )

    @model_validator(mode="before")
    @classmethod
    def _split_custom(cls, value: Any) -> Any:
        """Names under `gates:` that are not built-in gates are custom gates (checked by RolloutSettings)."""
        if not isinstance(value, dict) or not isinstance(value.get("gates"), list):
            return value
        builtin = {g.value for g in GateName}
        gates = [g for g in value["gates"] if not isinstance(g, str) or g in builtin]
        custom = [g for g in value["gates"] if isinstance(g, str) and g not in builtin]
        if not custom:
            return value
        return {**value, "gates": gates, "custom": [*value.get("custom", []), *custom]}


def _default_gates(stage: StageSpec, weighted_index: int) -> list[GateName]:
    if stage.weight == 0:
        return [GateName.SHADOW_DISTRIBUTION] if stage.shadow else []
    gates = [GateName.ERROR_RATE, GateName.FALLBACK_RATIO, GateName.TTFT_P99_RATIO]
    if weighted_index >= 1:  # medium and later stages add the TPOT tail
        gates.append(GateName.TPOT_P99_RATIO)
    if stage.shadow:
        gates.append(GateName.SHADOW_DISTRIBUTION)
    return gates


ShadowMetric = Literal["output_tokens", "ttft_ms", "tpot_ms", "finish_reason", "stop_hit", "error_code"]
SHADOW_METRICS: tuple[ShadowMetric, ...] = get_args(ShadowMetric)


class GateThresholds(BaseModel):
    """Lines written before the start: what counts as pass, hold or fail (docs/rollout.md)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    max_error_rate: float = Field(default=0.02, ge=0, le=1, description="Hard: new-arm error share")
    max_fallback_ratio: float = Field(default=0.05, ge=0, le=1, description="Hard: new-arm fallback share")
    max_ttft_p99_ratio: float = Field(default=1.5, gt=0, description="Hard: p99 TTFT new / old")
    max_tpot_p99_ratio: float = Field(default=1.5, gt=0, description="Hard: p99 TPOT new / old")
    min_samples: int = Field(default=50, ge=1, description="Fewer requests per arm in the window means 'hold'")
    alpha: float = Field(default=0.01, gt=0, lt=0.5, description="Significance level of the shadow distribution tests")
    noise_margin: float = Field(
        default=1.5, ge=1, description="A difference counts only if its statistic exceeds this times the A/A noise"
    )
    shadow_metrics: list[ShadowMetric] = Field(
        default_factory=lambda: list(SHADOW_METRICS),
        description="Metrics the shadow gate judges (all are still compared and reported); e.g. leave out "
        "ttft_ms/tpot_ms when a hardware change makes latency differ by design and the ratio gates cover it",
    )
    soft: list[GateName] = Field(
        default_factory=list, description="Gates that only hold (never roll back) when they fail"
    )


# A selector is label matchers only (PromQL's grammar for what goes between the braces): name op "string", comma
# separated. Anything else spliced into every gate query could end the selector and rewrite the query (`job="gw"}
# [1s])) * 0 #` forced the error and fallback counts to 0). Written so that a failed match cannot backtrack far.
_MATCHER = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\\n]|\\.)*"'
_SELECTOR = re.compile(rf"(?:{_MATCHER}(?:\s*,{_MATCHER})*(?:\s*,)?)?\s*")
MAX_SELECTOR = 2000


def check_selector(text: str) -> str:
    """`text` if it is label matchers only (optionally in braces), else ValueError saying what is allowed."""
    inner = text.strip()
    if inner.startswith("{") and inner.endswith("}"):
        inner = inner[1:-1]
    if len(text) > MAX_SELECTOR or not _SELECTOR.fullmatch(inner):
        shown = text if len(text) <= 80 else text[:79] + "…"
        raise ValueError(
            f'must be label matchers only, comma separated, each name op "value" with op one of '
            f'=, !=, =~, !~ (e.g. job="gateway",namespace=~"llm.*"), got {shown!r}'
        )
    return text


class PrometheusSource(BaseModel):
    """Where the gates read metrics when `source: prometheus`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    url: BaseUrl = Field(description="Prometheus base URL, e.g. http://127.0.0.1:9090")
    selector: str = Field(default="", description='Extra label matchers added to every query, e.g. job="gateway"')
    timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="Seconds one whole query may take (connect, headers, body and redirects together)",
    )

    @field_validator("selector")
    @classmethod
    def _matchers_only(cls, v: str) -> str:
        return check_selector(v)


# The checklist schedule (docs/rollout.md, stage defaults): shadow over a daily peak, 5 % for a day, 20 % until day
# three with the spot-check gate, 50 % until day seven, then 100 % and the holding window (old kept warm 48 h).
# Hand-written short forms (`stages: [shadow, 5, 20]`) keep min_duration_s 0 unless given; `rollout status` warns.
DEFAULT_STAGES: list[Any] = [
    {"name": "shadow", "weight": 0, "shadow": True, "min_duration_s": DAY_S},
    {"weight": 5, "min_duration_s": DAY_S},
    {"weight": 20, "min_duration_s": 2 * DAY_S},
    {"weight": 50, "min_duration_s": 4 * DAY_S},
    100,
]
PEAK_S = DAY_S  # the stated peak a shadow or large stage must cover by default: one day holds the daily peak
BUILTIN_GATES = ("parse_failure_rate", "output_length_shift", "cache_hits_after_switch", "spot_check_rating")
"""Built-in custom gates usable by name without a custom_gates entry (defaults from rollout_custom.py)."""


class RolloutSettings(BaseModel):
    """The `rollout:` section."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    stages: list[StageSpec] = Field(
        default_factory=lambda: [StageSpec.model_validate(_stage_from(s)) for s in DEFAULT_STAGES],
        description="Ordered stages; items are 'shadow', a percent, or a mapping (name, weight, shadow, "
        "gates, "
        "min_duration_s)",
    )
    gates: GateThresholds = Field(default_factory=GateThresholds)
    window_s: float = Field(default=300.0, gt=0, description="Gates look at the last window_s seconds of the stage")
    on_fail: Literal["previous", "zero"] = Field(
        default="previous", description="Where a failed hard gate rolls back to: the previous stage or 0%"
    )
    source: Literal["ledger", "prometheus"] = "ledger"
    ledger: str | None = Field(default=None, description="Gateway run directory (or one ledger .jsonl file)")
    prometheus: PrometheusSource | None = None
    state_dir: str = Field(
        default=".switchover/rollout",
        description="State file and audit log; relative paths are from switchover.yaml's folder",
    )
    custom_gates: list[CustomGate] = Field(
        default_factory=list, description="PromQL, ledger-expression and built-in gates (rollout_custom.py)"
    )
    task_types: list[TaskTypeRule] = Field(
        default_factory=list, description="Task-type rules for `by: task_type` when the gateway sets no label"
    )
    holding: HoldingSettings = Field(
        default_factory=HoldingSettings, description="The rollback window after 100 % (rollout_holding.py)"
    )
    judge: JudgeConfig = Field(
        default_factory=JudgeConfig, description="The anytime-valid canary judge, off by default (rollout_judge.py)"
    )
    entry: EntrySettings = Field(
        default_factory=EntrySettings, description="Evidence needed to enter shadow and the canary (rollout_entry.py)"
    )
    cost: CostSettings = Field(
        default_factory=CostSettings, description="The large stage's cost-per-request gate (rollout_entry.py)"
    )
    peak_s: float = Field(
        default=PEAK_S,
        gt=0,
        description="The peak a shadow or large stage must cover: `rollout status` warns "
        "about such a stage whose min_duration_s is shorter",
    )

    @field_validator("stages", mode="before")
    @classmethod
    def _expand(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return [_stage_from(item) for item in value]

    @model_validator(mode="after")
    def _check(self) -> RolloutSettings:
        if not self.stages:
            raise ValueError("stages: at least one stage is needed")
        names = [s.name for s in self.stages]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"stages: duplicate stage names {sorted(dup)}")
        weights = [s.weight for s in self.stages]
        for a, b in itertools.pairwise(weights):
            if b < a:
                raise ValueError(f"stages: weights must not decrease, got {weights}")
        if self.source == "prometheus" and self.prometheus is None:
            raise ValueError("source is 'prometheus' but the prometheus: url is missing")
        self._check_custom()
        weighted = 0
        for stage in self.stages:
            if stage.gates is None:
                stage.gates = _default_gates(stage, weighted)
            if stage.require_zero_rollbacks is None:
                stage.require_zero_rollbacks = stage.weight > 0 and weighted >= 1
            if stage.weight > 0:
                weighted += 1
        return self

    def _check_custom(self) -> None:
        builtin = {g.value for g in GateName}
        names = [g.name for g in self.custom_gates]
        dup = {n for n, k in Counter(names).items() if k > 1}  # linear: the list's length is the file's
        if dup:
            raise ValueError(f"custom_gates: duplicate names {sorted(dup)}")
        clash = sorted(set(names) & builtin)
        if clash:
            raise ValueError(f"custom_gates: {clash} are built-in gate names; choose other names")
        known = set(names)
        for stage in self.stages:
            missing = [c for c in stage.custom if c not in known and c not in BUILTIN_GATES]
            if missing:
                raise ValueError(
                    f"stages: stage {stage.name} names unknown gates {missing} "
                    f"(built-in: {sorted(builtin)}; custom: {sorted(known) or 'none defined'})"
                )
        for ftype, window in self.holding.windows.items():
            for gate in window.gates:
                if gate == GateName.SHADOW_DISTRIBUTION.value:
                    raise ValueError(f"holding.windows.{ftype.value}: shadow_distribution needs shadow traffic")
                if gate not in builtin and gate not in known and gate not in BUILTIN_GATES:
                    raise ValueError(
                        f"holding.windows.{ftype.value}.gates: unknown gate {gate!r} "
                        f"(built-in: {sorted(builtin | set(BUILTIN_GATES))}; custom: {sorted(known) or 'none'})"
                    )

    def custom_gate(self, name: str) -> CustomGate:
        """A custom gate by name; a built-in like output_length_shift named without a definition gets defaults."""
        for g in self.custom_gates:
            if g.name == name:
                return g
        if name in BUILTIN_GATES:
            return CustomGate(name=name, builtin=name)  # type: ignore[arg-type]
        raise KeyError(name)

    def state_path(self, config_path: Path | None) -> Path:
        """The folder holding state.json and audit.jsonl."""
        p = Path(self.state_dir)
        if not p.is_absolute() and config_path is not None:
            p = config_path.resolve().parent / p
        return p


def _stage_from(item: Any) -> Any:
    if isinstance(item, StageSpec):
        return item
    if isinstance(item, str) and item.strip().lower() == "shadow":
        return {"name": "shadow", "weight": 0, "shadow": True}
    if isinstance(item, bool):
        return item  # let pydantic reject it with a clear message
    if isinstance(item, int):
        return {"name": f"{item}%", "weight": item}
    if isinstance(item, str) and item.strip().rstrip("%").isdigit():
        n = int(item.strip().rstrip("%"))
        return {"name": f"{n}%", "weight": n}
    if isinstance(item, dict) and "name" not in item and "weight" in item:
        return {**item, "name": "shadow" if item.get("weight") == 0 and item.get("shadow") else f"{item['weight']}%"}
    return item


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
