"""Prometheus alerting and recording rules from the old engine's metrics to the new engine's (seed 000 §6: "metric
names and units do not line up; an unconverted dashboard goes dark, or reads as traffic gone to zero").

Two modes:
  * rename: each engine series becomes the new engine's series of the same intent (histogram parts kept, a token
    counter becomes the `_sum` of a token histogram where that is the equivalent); `le` bounds move to the new
    buckets (the nearest bound, flagged); matchers on labels the new metric lacks are dropped (flagged);
  * adapter: the rules keep the old names, which `switchover metrics-adapter --from NEW --to OLD` serves; rules
    on series the adapter cannot produce are flagged.
What cannot be translated stays as written, is listed, and (alerts) is annotated. Thresholds compared with a
latency or queue distribution are listed as distribution-dependent, with the A/B-measured shift when given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field

from switchover import yamlfile
from switchover.alerts.mapping import SeriesRef, labels_of, series_index, target_of
from switchover.alerts.promql import Matcher, PromQLError, Selector, parse, replace_spans
from switchover.alerts.shift import BenchShifts, Shift
from switchover.engines.profile import EngineProfile, MetricSpec
from switchover.errors import BadInput
from switchover.gateway import metrics_adapter

Mode = Literal["rename", "adapter"]
Severity = Literal["error", "warning", "info"]
Kind = Literal["untranslatable", "not_engine_metric", "name_selector", "label", "grouping", "bucket", "unit", "adapter",
               "syntax"]
# intents whose thresholds were tuned to the old engine's distribution (latency, queueing) or its state counters
LATENCY_INTENTS = frozenset({"ttft", "tpot", "itl", "e2e", "queue_time"})
ENGINE_STATE_INTENTS = frozenset({"running", "waiting", "kv_usage", "preemptions"})
ANNOTATION = "switchover_untranslated"


class Finding(BaseModel):
    """Something about one rule a person should know: an error leaves the rule untranslated."""

    group: str
    rule: str
    severity: Severity
    kind: Kind
    metric: str | None = None
    detail: str


class Threshold(BaseModel):
    """A threshold that depends on the engine's distribution, with the measured shift when a bench run is given."""

    group: str
    rule: str
    intent: str = Field(description="What the series measures, as the engine profiles name it: ttft, tpot, itl, "
                                    "e2e, queue_time (latency) or running, waiting, kv_usage, preemptions (engine "
                                    "state)")
    metric: str = Field(description="The source engine's series the rule reads, as written")
    comparison: str = Field(description="The comparison next to the number: >, <, >=, <=, == or !=")
    value: float = Field(description="The number as written in the rule (0 is left out: a presence check)")
    quantile: float | None = Field(default=None, description="The rule's histogram_quantile level (e.g. 0.99) on a "
                                                             "histogram series; None otherwise (the shift then "
                                                             "compares means)")
    shift: Shift | None = Field(default=None, description="new/old factor the --bench run measured for this intent; "
                                                          "None without --bench, for engine state, or when the run "
                                                          "did not measure it")
    suggested: float | None = Field(default=None, description="value × the median measured shift")
    suggested_range: tuple[float, float] | None = None
    note: str = ""


class RuleResult(BaseModel):
    group: str
    rule: str
    kind: Literal["alert", "record"]
    status: Literal["translated", "unchanged", "untranslated"]
    expr_before: str
    expr_after: str


class TranslationReport(BaseModel):
    """What `alerts translate` did to every rule."""

    source_engine: str
    target_engine: str
    mode: Mode
    rules: list[RuleResult]
    findings: list[Finding]
    thresholds: list[Threshold]
    notes: list[str] = Field(default_factory=list)

    @property
    def untranslated(self) -> list[RuleResult]:
        return [r for r in self.rules if r.status == "untranslated"]


def _fmt_num(x: float) -> str:
    """A bucket bound as prometheus_client writes `le` (1.0, 0.25, 2560.0): `le` matchers compare strings."""
    return "+Inf" if x == float("inf") else repr(float(x))


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _brace(name_present: bool, kept: list[tuple[Matcher, str]]) -> str:
    if not kept and name_present:
        return ""
    return "{" + ", ".join(f"{m.label}{m.op}{_quote(v)}" for m, v in kept) + "}"


class _Rule:
    """Translating one expression: edits, findings, and the intents it reads."""

    def __init__(self, group: str, rule: str, src: EngineProfile, dst: EngineProfile, mode: Mode,
                 adapter_plan: metrics_adapter.Plan | None) -> None:
        self.group, self.rule, self.src, self.dst, self.mode = group, rule, src, dst, mode
        self.index = series_index(src)
        self.dst_index = series_index(dst)
        self.adapter_served = {m.intent for m in adapter_plan.mappings} if adapter_plan else set()
        self.adapter_skipped = dict(adapter_plan.skipped) if adapter_plan else {}
        self.findings: list[Finding] = []
        self.edits: list[tuple[int, int, str]] = []
        self.refs: list[tuple[str, SeriesRef]] = []
        self.src_labels: set[str] = set()
        self.dst_labels: set[str] = set()

    def note(self, severity: Severity, kind: Kind, detail: str, metric: str | None = None) -> None:
        self.findings.append(Finding(group=self.group, rule=self.rule, severity=severity, kind=kind, metric=metric,
                                     detail=detail))

    def selector(self, sel: Selector) -> None:
        if sel.name is None:
            self.note("warning", "name_selector", "a selector without a metric name ({__name__=~...}) is not "
                      "rewritten; check which series it matches on the new engine")
            return
        ref = self.index.get(sel.name)
        if ref is None:
            if sel.name in self.dst_index:
                self.note("info", "not_engine_metric", f"{sel.name} is already a {self.dst.name} metric", sel.name)
            elif not sel.name.startswith("switchover_"):
                self.note("info", "not_engine_metric", f"{sel.name} is not a {self.src.name} metric in the profile: "
                          "kept as written", sel.name)
            return
        self.refs.append((sel.name, ref))
        self.src_labels |= labels_of(ref.spec)
        if self.mode == "adapter":
            self._adapter(sel, ref)
            return
        target = target_of(ref, self.dst)
        if target.name is None or target.spec is None:
            self.note("error", "untranslatable", f"{sel.name}: {target.problem}", sel.name)
            return
        self.dst_labels |= labels_of(target.spec)
        if target.name != sel.name:
            self.edits.append((sel.name_start, sel.name_end, target.name))
        if target.unit_factor != 1.0:
            self.note("warning", "unit", f"{sel.name} is in {ref.spec.unit}, {target.name} in {target.spec.unit}: "
                      f"values (and thresholds on them) change by ×{target.unit_factor:g}", sel.name)
        self._matchers(sel, ref, target.spec, target.unit_factor)

    def _adapter(self, sel: Selector, ref: SeriesRef) -> None:
        if ref.intent in self.adapter_served:
            self.dst_labels |= labels_of(ref.spec)
            if ref.part == "_bucket":
                self.note("info", "adapter", f"{sel.name}: the adapter re-buckets {self.dst.name}'s histogram into "
                          f"{self.src.name}'s bounds by interpolation (error bound exported as "
                          "switchover_adapter_rebucket_error_bound)", sel.name)
            return
        why = self.adapter_skipped.get(ref.intent, f"{self.dst.name} has no {ref.intent} metric")
        self.note("error", "untranslatable", f"{sel.name}: the metrics adapter cannot serve it ({why})", sel.name)

    def _matchers(self, sel: Selector, ref: SeriesRef, dst: MetricSpec, factor: float) -> None:
        if not sel.matchers or sel.brace is None:
            return
        src_labels, dst_labels = labels_of(ref.spec), labels_of(dst)
        kept: list[tuple[Matcher, str]] = []
        changed = False
        for m in sel.matchers:
            if m.label == "le" and ref.part == "_bucket":
                value = self._le(sel.name or "", m, dst, factor)
                changed |= value != m.value
                kept.append((m, value))
            # a label that names the deployment (profile data: metrics_endpoint.identity_labels) may be dropped,
            # widening the selection to the whole server (a warning); any other matcher selects a subset
            # (finished_reason="error"): dropping it would change what the rule counts
            elif m.label in src_labels and m.label not in dst_labels \
                    and m.label in self.src.metrics_endpoint.identity_labels:
                self.note("warning", "label", f"{sel.name}: matcher {m.label}{m.op}{_quote(m.value)} dropped: "
                          f"{dst.name} has no {m.label} label (it then covers the whole server)", sel.name)
                changed = True
            elif m.label in src_labels and m.label not in dst_labels:
                self.note("error", "untranslatable", f"{sel.name}: matcher {m.label}{m.op}{_quote(m.value)} selects a "
                          f"subset {dst.name} cannot tell apart (it has no {m.label} label)", sel.name)
                kept.append((m, m.value))
            else:
                kept.append((m, m.value))
        if changed:
            self.edits.append((sel.brace[0], sel.brace[1], _brace(True, kept)))

    def _le(self, name: str, m: Matcher, dst: MetricSpec, factor: float) -> str:
        if m.op != "=":
            self.note("warning", "bucket", f"{name}: le{m.op}{_quote(m.value)} kept; check it against {dst.name}'s "
                      "bounds", name)
            return m.value
        try:
            bound = float(m.value) * factor
        except ValueError:
            self.note("warning", "bucket", f"{name}: le={_quote(m.value)} is not a number; kept", name)
            return m.value
        if bound == float("inf"):
            return "+Inf"
        if not dst.buckets:
            self.note("warning", "bucket", f"{name}: {dst.name}'s bucket bounds are not fixed in the profile "
                      f"({dst.name}); le={_quote(m.value)} kept, check it", name)
            return m.value
        if any(abs(b - bound) <= 1e-9 * max(1.0, abs(b)) for b in dst.buckets):
            return m.value if factor == 1.0 else _fmt_num(bound)
        nearest = min(dst.buckets, key=lambda b: abs(b - bound))
        self.note("warning", "bucket", f"{name}: le={_quote(m.value)} is not a bucket bound of {dst.name}; moved to "
                  f"the nearest, {_fmt_num(nearest)} (the share counted changes: re-check the threshold)", name)
        return _fmt_num(nearest)

    def grouping(self, keyword: str, labels: list[tuple[str, int]]) -> None:
        if self.mode == "adapter":
            return
        for label, _ in labels:
            if label != "le" and label in self.src_labels and label not in self.dst_labels:
                self.note("warning", "grouping", f"{keyword} ({label}): the {self.dst.name} metrics have no {label} "
                          "label, so its series merge into one")


def _rules_of(data: Any, path: Path) -> list[tuple[int, str, int, dict[str, Any]]]:
    """(group index, group name, rule index, rule) for every rule; BadInput naming the field when malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
        raise BadInput(f"{path}: groups: a Prometheus rule file needs a `groups:` list")
    out = []
    for gi, g in enumerate(data["groups"]):
        if not isinstance(g, dict) or not isinstance(g.get("name"), str):
            raise BadInput(f"{path}: groups[{gi}].name: each group needs a name")
        if not isinstance(g.get("rules"), list):
            raise BadInput(f"{path}: groups[{gi}].rules: a list of rules is needed")
        for ri, r in enumerate(g["rules"]):
            where = f"groups[{gi}].rules[{ri}]"
            if not isinstance(r, dict):
                raise BadInput(f"{path}: {where}: a rule is a mapping (alert or record, expr, ...)")
            if ("alert" in r) == ("record" in r):
                raise BadInput(f"{path}: {where}: give exactly one of alert, record")
            if not isinstance(r.get("expr"), str | int | float):
                raise BadInput(f"{path}: {where}.expr: required (a PromQL expression)")
            if not isinstance(r.get("annotations") or {}, dict):  # an untranslated alert gets one added
                raise BadInput(f"{path}: {where}.annotations: a mapping of name: text is needed")
            out.append((gi, g["name"], ri, r))
    return out


def translate_rules(
    path: Path,
    src: EngineProfile,
    dst: EngineProfile,
    *,
    mode: Mode = "rename",
    shifts: BenchShifts | None = None,
) -> tuple[dict[str, Any], TranslationReport]:
    """The translated rule file (as data) and the report; the input file is not changed."""
    doc = yamlfile.load_file(path, what="Prometheus rule file (YAML)")
    data = doc.data
    rules = _rules_of(data, path)
    plan = metrics_adapter.plan(dst, src) if mode == "adapter" else None
    out_groups = [dict(g, rules=[dict(r) for r in g["rules"]]) for g in data["groups"]]
    results: list[RuleResult] = []
    findings: list[Finding] = []
    thresholds: list[Threshold] = []
    for gi, gname, ri, rule in rules:
        kind: Literal["alert", "record"] = "alert" if "alert" in rule else "record"
        name = str(rule.get("alert") or rule.get("record"))
        expr = str(rule["expr"])
        t = _Rule(gname, name, src, dst, mode, plan)
        try:
            parsed = parse(expr)
        except PromQLError as exc:
            t.note("error", "syntax", f"expr: {exc}")
            parsed = None
        if parsed is not None:
            for sel in parsed.selectors:
                t.selector(sel)
            for grp in parsed.groupings:
                t.grouping(grp.keyword, grp.labels)
            thresholds += _thresholds(gname, name, parsed.thresholds, parsed.quantiles, t.refs, shifts)
        errors = [f for f in t.findings if f.severity == "error"]
        new_expr = expr if errors else replace_spans(expr, t.edits)
        status: Literal["translated", "unchanged", "untranslated"] = (
            "untranslated" if errors else "translated" if new_expr != expr else "unchanged")
        out_rule = out_groups[gi]["rules"][ri]
        out_rule["expr"] = new_expr
        if errors and kind == "alert":
            ann = dict(out_rule.get("annotations") or {})
            ann[ANNOTATION] = "; ".join(f.detail for f in errors)[:500]
            out_rule["annotations"] = ann
        results.append(RuleResult(group=gname, rule=name, kind=kind, status=status, expr_before=expr,
                                  expr_after=new_expr))
        findings += t.findings
    report = TranslationReport(source_engine=src.name, target_engine=dst.name, mode=mode, rules=results,
                               findings=findings, thresholds=thresholds, notes=list(shifts.notes) if shifts else [])
    if mode == "adapter":
        report.notes.append(f"names kept: run `switchover metrics-adapter --from {dst.name} --to {src.name}` in "
                            f"front of {dst.name} and point Prometheus at it")
    return {**data, "groups": out_groups}, report


def _thresholds(group: str, rule: str, found: list[tuple[str, float]], quantiles: list[float],
                refs: list[tuple[str, SeriesRef]], shifts: BenchShifts | None) -> list[Threshold]:
    out = []
    seen: set[tuple[str, float]] = set()
    q = quantiles[0] if quantiles else None
    for metric, ref in refs:
        if ref.intent not in LATENCY_INTENTS | ENGINE_STATE_INTENTS:
            continue
        for comparison, value in found:
            if (ref.intent, value) in seen or value == 0:  # == 0 / > 0 are presence checks, not tuned levels
                continue
            seen.add((ref.intent, value))
            th = Threshold(group=group, rule=rule, intent=ref.intent, metric=metric, comparison=comparison,
                           value=value, quantile=q if ref.spec.type == "histogram" else None)
            if ref.intent in ENGINE_STATE_INTENTS:
                th.note = "engine state (batch, queue, KV use) means different things per engine: re-baseline it"
            elif shifts is None:
                th.note = "tuned to the old engine's distribution: pass --bench RUN_DIR for the measured shift"
            else:
                shift = shifts.shift(ref.intent, th.quantile)
                if shift is None:
                    th.note = f"the bench run has no {ref.intent} measurement to shift it by"
                else:
                    th.shift = shift
                    th.suggested = value * shift.median
                    th.suggested_range = (value * shift.low, value * shift.high)
                    th.note = (f"new/old {shift.stat} ×{shift.median:.2f} (×{shift.low:.2f}–×{shift.high:.2f} over "
                               f"{len(shift.steps)} steps)")
            out.append(th)
    return out


def dump_rules(data: dict[str, Any]) -> str:
    """The rule file as YAML (comments of the input are not carried over)."""
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100_000)
