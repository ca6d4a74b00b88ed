"""Judging custom gates (config/rollout_custom.py): pure functions over ledger row views, and PromQL at the edge.

Verdicts follow gates.py: too few samples is hold, never pass; a rate may fail early when the failures already
seen exceed what min_samples rows could absorb. With `by`, each group is judged alone and any failing group
fails the gate (any task type getting worse goes back one stage); groups still short of samples
are listed, and the gate holds only while no group has enough.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from switchover.config.rollout import GateThresholds, PrometheusSource
from switchover.config.rollout_custom import CustomGate
from switchover.evidence.review import ReviewSummary, rating_gate
from switchover.expr import compile_expr
from switchover.ledger_record import NOT_AN_ARM_OUTCOMES, row_fields
from switchover.rollout.baseline import Baseline
from switchover.rollout.compare import compare_metric
from switchover.rollout.prometheus import Series, promql_vector

Verdict = Literal["pass", "hold", "fail"]
View = dict[str, Any]
ALL = "(all)"


class GroupVerdict(BaseModel):
    """One group's verdict (a task type, a label value, or all rows)."""

    group: str
    verdict: Verdict
    observed: float | None = None
    samples: int = 0
    reason: str


class CustomGateResult(BaseModel):
    """A custom gate's verdict, with per-group detail when it has `by`."""

    name: str
    kind: Literal["promql", "ledger", "builtin"]
    builtin: str | None = None
    verdict: Verdict
    hard: bool
    observed: float | None = None
    threshold: float | None = None
    samples: int = 0
    reason: str
    groups: list[GroupVerdict] = Field(default_factory=list)
    query: str | None = Field(default=None, description="The PromQL sent (promql gates)")


def _rate_verdict(
    group: str,
    bad: int,
    n: int,
    limit: float | None,
    min_samples: int,
    old_rate: float | None,
    max_increase: float | None,
) -> GroupVerdict:
    rate = bad / n if n else None
    if n >= min_samples and rate is not None:
        if limit is not None and rate > limit:
            return GroupVerdict(
                group=group,
                verdict="fail",
                observed=rate,
                samples=n,
                reason=f"{group}: {bad}/{n} = {rate:.2%} > {limit:.2%}",
            )
        if max_increase is not None and old_rate is not None and rate - old_rate > max_increase:
            return GroupVerdict(
                group=group,
                verdict="fail",
                observed=rate,
                samples=n,
                reason=f"{group}: {rate:.2%} vs old {old_rate:.2%}, +{rate - old_rate:.2%} > +{max_increase:.2%}",
            )
        vs = f" (old {old_rate:.2%})" if old_rate is not None else ""
        return GroupVerdict(
            group=group, verdict="pass", observed=rate, samples=n, reason=f"{group}: {bad}/{n} = {rate:.2%}{vs}"
        )
    if limit is not None and bad > limit * min_samples:
        return GroupVerdict(
            group=group,
            verdict="fail",
            observed=rate,
            samples=n,
            reason=f"{group}: {bad} of {n} already exceeds {limit:.2%} of the {min_samples} needed",
        )
    return GroupVerdict(
        group=group,
        verdict="hold",
        observed=rate,
        samples=n,
        reason=f"{group}: {n} rows, {min_samples} needed (failures so far {bad})",
    )


def _combine(gate: CustomGate, groups: list[GroupVerdict], what: str, threshold: float | None) -> CustomGateResult:
    """One verdict from the groups: any fail fails; pass once some group passed and none failed; else hold."""
    base: dict[str, Any] = dict(
        name=gate.name,
        kind=gate.kind,
        builtin=gate.builtin,
        hard=bool(gate.hard),
        threshold=threshold,
        groups=groups if gate.by else [],
    )
    failed = [g for g in groups if g.verdict == "fail"]
    passed = [g for g in groups if g.verdict == "pass"]
    short = [g for g in groups if g.verdict == "hold"]
    samples = sum(g.samples for g in groups)
    worst = max((g.observed for g in failed or passed if g.observed is not None), default=None)
    if failed:
        return CustomGateResult(
            **base,
            verdict="fail",
            observed=worst,
            samples=samples,
            reason=f"{what}: " + "; ".join(g.reason for g in failed),
        )
    if passed:
        extra = f" (too few rows, not judged: {', '.join(g.group for g in short)})" if short else ""
        return CustomGateResult(
            **base,
            verdict="pass",
            observed=worst,
            samples=samples,
            reason=f"{what}: " + "; ".join(g.reason for g in passed) + extra,
        )
    reason = "; ".join(g.reason for g in short) if short else "no rows matched"
    return CustomGateResult(**base, verdict="hold", samples=samples, reason=f"{what}: {reason}")


def _on_arm(v: View, arm: str) -> bool:
    return v.get("routed") == arm and v.get("outcome") not in NOT_AN_ARM_OUTCOMES


def _not_measured(gate: CustomGate, field: str) -> CustomGateResult:
    return CustomGateResult(
        name=gate.name,
        kind=gate.kind,
        builtin=gate.builtin,
        verdict="hold",
        hard=bool(gate.hard),
        threshold=gate.max,
        reason=f"not measured: no row in the window has {field}",
    )


class _RateTally:
    """Counts for a rate gate: of the rows `where` selects on `arm` (and on old, to compare), per group, how many
    and how many `fail_when`. Memory: two counters per group, however many rows pass."""

    def __init__(self, gate: CustomGate, *, where: str | None, fail_when: str, arm: str) -> None:
        fields = row_fields()
        self.by, self.arm = gate.by, arm
        self.sel = compile_expr(where, fields) if where else None
        self.bad = compile_expr(fail_when, fields)
        self.new: dict[str, list[int]] = {}  # group -> [rows, failures]
        self.old: dict[str, list[int]] = {}
        self.json_seen = False  # parse_failure_rate: does any row carry json_valid at all

    def add(self, v: View) -> None:
        self.json_seen = self.json_seen or v.get("json_valid") is not None
        if _on_arm(v, self.arm):
            side = self.new
        elif self.arm == "new" and _on_arm(v, "old"):
            side = self.old
        else:
            return
        if self.sel is not None and not self.sel.matches(v):
            return
        c = side.setdefault(ALL if self.by is None else str(v.get(self.by)), [0, 0])
        c[0] += 1
        c[1] += self.bad.matches(v)

    def result(self, gate: CustomGate, min_samples: int, what: str) -> CustomGateResult:
        """The share failing per group against max / max_increase (old's share where it has min_samples)."""
        groups = []
        for name in sorted(self.new):
            n, bad = self.new[name]
            n_old, bad_old = self.old.get(name, (0, 0))
            old_rate = bad_old / n_old if n_old >= min_samples else None
            groups.append(_rate_verdict(name, bad, n, gate.max, min_samples, old_rate, gate.max_increase))
        return _combine(gate, groups, what, gate.max)


class _LengthTally:
    """Completion tokens of ok answers, per arm and group (the distributions output_length_shift compares)."""

    def __init__(self, gate: CustomGate) -> None:
        self.by = gate.by
        self.lengths: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}

    def add(self, v: View) -> None:
        for arm in ("old", "new"):
            if (
                _on_arm(v, arm)
                and v.get("arm") == arm
                and v.get("outcome") == "ok"
                and v.get("completion_tokens") is not None
            ):
                group = ALL if self.by is None else str(v.get(self.by))
                self.lengths[arm].setdefault(group, []).append(float(v["completion_tokens"]))


def output_length_shift(
    gate: CustomGate, tally: _LengthTally, th: GateThresholds, min_samples: int, baseline: Baseline | None
) -> CustomGateResult:
    """New's output lengths against old's (or the baseline's) per group: fail when the distributions differ
    beyond the A/A noise AND the p50 or p90 moved by more than `max` (relative)."""
    new, old = tally.lengths["new"], tally.lengths["old"]
    limit = gate.max if gate.max is not None else 0.25
    groups = []
    for name in sorted(new):
        a = old.get(name, [])
        source = "old"
        if len(a) < min_samples and baseline is not None:
            a = baseline.lengths(None if name == ALL else name)
            source = "baseline"
        b = new[name]
        cmp = compare_metric(
            "output_tokens", a, b, alpha=th.alpha, noise_margin=th.noise_margin, min_samples=min_samples
        )
        if cmp.verdict == "insufficient":
            groups.append(
                GroupVerdict(
                    group=name,
                    verdict="hold",
                    samples=len(b),
                    reason=f"{name}: {source} {len(a)} / new {len(b)} lengths, {min_samples} each needed",
                )
            )
            continue
        po, pn = cmp.percentiles_old, cmp.percentiles_new
        shifts = {q: pn[q] / po[q] - 1 for q in ("p50", "p90") if po.get(q)}
        if not shifts and cmp.verdict == "differs":  # no relative shift from a 0-token p50 and p90: not 0 %
            groups.append(
                GroupVerdict(
                    group=name,
                    verdict="hold",
                    samples=len(b),
                    reason=f"{name}: lengths differ from {source}'s, whose p50 and p90 are 0 "
                    "tokens: the relative shift is not measured",
                )
            )
            continue
        q, shift = max(shifts.items(), key=lambda kv: abs(kv[1]), default=("p50", 0.0))
        text = f"{name}: {q} {po.get(q, 0):.0f} → {pn.get(q, 0):.0f} tokens ({shift:+.0%} vs {source})"
        verdict: Verdict = "fail" if cmp.verdict == "differs" and abs(shift) > limit else "pass"
        note = "" if cmp.verdict == "differs" else ", within the A/A noise"
        groups.append(
            GroupVerdict(
                group=name,
                verdict=verdict,
                observed=abs(shift),
                samples=len(b),
                reason=text + (f" > ±{limit:.0%}" if verdict == "fail" else note),
            )
        )
    return _combine(gate, groups, "output length", limit)


class LedgerTally:
    """What the ledger gates of a set need from a window's rows, gathered in one pass (`add` each row view as
    it is read): counters per group for rates, token counts for the length shift; never the rows themselves."""

    def __init__(self, gates: Iterable[CustomGate]) -> None:
        self.parts: dict[str, _RateTally | _LengthTally] = {}
        for g in gates:
            if g.ledger is not None:
                self.parts[g.name] = _RateTally(g, where=g.ledger.where, fail_when=g.ledger.fail_when, arm=g.ledger.arm)
            elif g.builtin == "parse_failure_rate":
                self.parts[g.name] = _RateTally(
                    g, where="json_valid != null", fail_when="json_valid == false", arm="new"
                )
            elif g.builtin == "output_length_shift":
                self.parts[g.name] = _LengthTally(g)

    @property
    def needs_rows(self) -> bool:
        return bool(self.parts)

    def add(self, view: View) -> None:
        for part in self.parts.values():
            part.add(view)

    def add_all(self, views: Iterable[View]) -> LedgerTally:
        for v in views:
            self.add(v)
        return self

    def judge(
        self,
        gate: CustomGate,
        th: GateThresholds,
        *,
        baseline: Baseline | None = None,
        views_since_switch: Iterable[View] = (),
        review: ReviewSummary | None = None,
    ) -> CustomGateResult:
        """A ledger or built-in gate from what was gathered (pure)."""
        min_samples = gate.min_samples or th.min_samples
        if gate.builtin == "spot_check_rating":
            return spot_check_rating(gate, review, min_samples)
        if gate.builtin == "cache_hits_after_switch":
            return cache_hits_after_switch(gate, views_since_switch)
        part = self.parts.get(gate.name)
        if isinstance(part, _LengthTally):
            return output_length_shift(gate, part, th, min_samples, baseline)
        if isinstance(part, _RateTally):
            if gate.builtin == "parse_failure_rate":
                if not part.json_seen:
                    return _not_measured(gate, "json_valid")
                return part.result(gate, min_samples, "JSON parse failures")
            return part.result(gate, min_samples, "rate")
        raise ValueError(f"gate {gate.name}: not gathered from this window's rows")  # a caller's mistake


def cache_hits_after_switch(gate: CustomGate, views_since_switch: Iterable[View]) -> CustomGateResult:
    """The first `first_n` new-arm answers that report cached tokens: cached / prompt tokens must be ≈ 0.
    One pass that keeps only those first_n (days of rows since the switch may stream through)."""
    reporting = (
        v
        for v in views_since_switch
        if v.get("routed") == "new"
        and v.get("outcome") not in NOT_AN_ARM_OUTCOMES
        and v.get("cached_tokens") is not None
        and (v.get("prompt_tokens") or 0) > 0
    )
    first = heapq.nsmallest(gate.first_n, reporting, key=lambda v: v["ts"])  # = sorted(...)[:first_n]
    if not first:
        return _not_measured(gate, "cached_tokens")
    cached, prompt = sum(v["cached_tokens"] for v in first), sum(v["prompt_tokens"] for v in first)
    share = cached / prompt
    limit = gate.max if gate.max is not None else 0.05
    base: dict[str, Any] = dict(
        name=gate.name,
        kind=gate.kind,
        builtin=gate.builtin,
        hard=bool(gate.hard),
        threshold=limit,
        observed=share,
        samples=len(first),
    )
    what = f"first {len(first)} new-arm answers: {cached}/{prompt} prompt tokens from cache = {share:.1%}"
    if share > limit:
        return CustomGateResult(
            **base,
            verdict="fail",
            reason=f"{what} > {limit:.0%}: the cache key likely lacks "
            "the model/weights version (docs/diff-model.md, cachekey)",
        )
    if len(first) < gate.first_n:
        return CustomGateResult(**base, verdict="hold", reason=f"{what}; {gate.first_n} needed")
    return CustomGateResult(**base, verdict="pass", reason=f"{what} ≤ {limit:.0%}")


def spot_check_rating(gate: CustomGate, summary: ReviewSummary | None, min_samples: int) -> CustomGateResult:
    """The people's verdict (`switchover review`): worse-or-broken share ≤ max with ≥ min_samples ratings, overall
    and per task type (evidence.review.rating_gate)."""
    base: dict[str, Any] = dict(
        name=gate.name, kind=gate.kind, builtin=gate.builtin, hard=bool(gate.hard), threshold=gate.max
    )
    if summary is None:
        return CustomGateResult(
            **base,
            verdict="hold",
            reason="no review database yet (gateway.review.pairs_per_day "
            "samples pairs; `switchover review serve` rates them)",
        )
    v = rating_gate(summary, gate.max if gate.max is not None else 0.1, min_samples)
    groups = [
        GroupVerdict(
            group=t.task_type,
            verdict="pass",
            observed=t.bad_share,
            samples=t.rated,
            reason=f"{t.task_type}: {t.bad_share:.0%} of {t.rated}"
            if t.bad_share is not None
            else f"{t.task_type}: not rated",
        )
        for t in summary.types
    ]
    return CustomGateResult(
        **base,
        verdict=v.verdict,
        observed=v.bad_share,
        samples=v.rated,
        reason=f"spot checks: {v.reason}",
        groups=groups,
    )


def judge_ledger_gate(
    gate: CustomGate,
    views: Iterable[View],
    th: GateThresholds,
    *,
    baseline: Baseline | None = None,
    views_since_switch: Iterable[View] = (),
    review: ReviewSummary | None = None,
) -> CustomGateResult:
    """A ledger or built-in gate over row views (pure; one pass over `views`)."""
    return (
        LedgerTally([gate])
        .add_all(views)
        .judge(gate, th, baseline=baseline, views_since_switch=views_since_switch, review=review)
    )


# --- PromQL (its HTTP client is rollout/prometheus.py) --------------------------------------------------------


def with_window(query: str, window_s: float) -> str:
    """The query with {window} replaced by the gate window in whole seconds (at least 1s)."""
    return query.replace("{window}", f"{max(1, int(window_s))}s")


def judge_promql(gate: CustomGate, series: Series, query: str) -> CustomGateResult:
    """Each returned series against max / min; grouped by the `by` label (pure)."""
    base: dict[str, Any] = dict(
        name=gate.name,
        kind="promql",
        hard=bool(gate.hard),
        threshold=gate.max if gate.max is not None else gate.min,
        query=query,
    )
    if not series:
        return CustomGateResult(**base, verdict="hold", reason="no data: the query returned no series")
    groups = []
    for labels, value in series:
        if gate.by:
            name = labels.get(gate.by, f"(no {gate.by})")
        else:
            name = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__") or ALL
        if value is None:
            groups.append(GroupVerdict(group=name, verdict="hold", reason=f"{name}: NaN (no samples in the window)"))
        elif gate.max is not None and value > gate.max:
            groups.append(
                GroupVerdict(group=name, verdict="fail", observed=value, reason=f"{name}: {value:g} > {gate.max:g}")
            )
        elif gate.min is not None and value < gate.min:
            groups.append(
                GroupVerdict(group=name, verdict="fail", observed=value, reason=f"{name}: {value:g} < {gate.min:g}")
            )
        else:
            groups.append(GroupVerdict(group=name, verdict="pass", observed=value, reason=f"{name}: {value:g}"))
    shown = gate.model_copy(update={"by": gate.by or ("series" if len(groups) > 1 else None)})
    result = _combine(shown, groups, "PromQL", base["threshold"])
    return result.model_copy(update={"query": query, "kind": "promql"})


def evaluate_custom(
    gates: Sequence[CustomGate],
    views: Iterable[View] | LedgerTally,
    th: GateThresholds,
    *,
    window_s: float,
    prometheus: PrometheusSource | None,
    baseline: Baseline | None = None,
    views_since_switch: Iterable[View] = (),
    query: Callable[[PrometheusSource, str], Series] = promql_vector,
    review: Callable[[], ReviewSummary | None] | None = None,
) -> list[CustomGateResult]:
    """Every custom gate of a stage (ledger ones pure, from `views` read once or a tally gathered while the
    window was read; PromQL ones through `query`)."""
    tally = views if isinstance(views, LedgerTally) else LedgerTally(gates).add_all(views)
    out = []
    for gate in gates:
        if gate.promql is not None:
            q = with_window(gate.promql, window_s)
            if prometheus is None:
                out.append(
                    CustomGateResult(
                        name=gate.name,
                        kind="promql",
                        verdict="hold",
                        hard=bool(gate.hard),
                        threshold=gate.max,
                        query=q,
                        reason="no Prometheus configured (rollout.prometheus.url)",
                    )
                )
                continue
            out.append(judge_promql(gate, query(prometheus, q), q))
        else:
            summary = review() if review is not None and gate.builtin == "spot_check_rating" else None
            out.append(tally.judge(gate, th, baseline=baseline, views_since_switch=views_since_switch, review=summary))
    return out
