"""Prometheus alerting and recording rules from the old engine's metrics to the new engine's (docs/alerts.md: "metric
names and units do not line up; an unconverted dashboard goes dark, or reads as traffic gone to zero"), across
engines and across releases of one engine (vLLM 0.6 -> 0.11 renames series too).

Two modes:
  * rename: each engine series becomes the new engine's series of the same intent at its release (histogram parts
    kept, a token counter becomes the `_sum` of a token histogram where that is the equivalent); `le` bounds move
    to the new buckets (the nearest bound, flagged); matchers on labels the new metric lacks are dropped (flagged);
  * adapter: the rules keep the old names, which `switchover metrics-adapter --from NEW --to OLD` serves; rules
    on series the adapter cannot produce are flagged.
Never silently dead: after the rewrite every engine series a rule reads must be served by the target at its release
(release data). One that is not is an error (a warning with --keep-unknown), a selector that cannot be translated
stays as written, and the rule is `partial` or `untranslated`, never `translated`. Thresholds compared with a latency
or queue distribution are listed as distribution-dependent, with the A/B-measured shift when given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from switchover import yamlfile
from switchover.alerts.mapping import SeriesRef, index_of, known_series, labels_of, series_index, target_of
from switchover.alerts.promql import Matcher, PromQLError, Selector, parse, replace_spans
from switchover.alerts.release import EngineRelease, engine_of
from switchover.alerts.report import Finding, Kind, Mode, RuleResult, Severity, Status, TranslationReport
from switchover.alerts.rules import dump_rules, recorded_names, rules_of
from switchover.alerts.shift import BenchShifts
from switchover.alerts.thresholds import ENGINE_STATE_INTENTS, LATENCY_INTENTS, thresholds
from switchover.engines import releases
from switchover.engines import series_map as metrics_adapter
from switchover.engines.profile import EngineProfile, MetricSpec, load_profile

__all__ = [
    "ANNOTATION",
    "ENGINE_STATE_INTENTS",
    "LATENCY_INTENTS",
    "TranslationReport",
    "dump_rules",
    "translate_rules",
]

ANNOTATION = "switchover_untranslated"
# findings that leave a rule reading a series the target does not serve: warnings with --keep-unknown
_DEAD_KINDS = frozenset({"untranslatable", "engine_specific", "dead_series"})


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
    """Translating one expression: edits, findings, the intents it reads, and the series it leaves behind."""

    def __init__(
        self,
        group: str,
        rule: str,
        src: EngineRelease,
        dst: EngineRelease,
        mode: Mode,
        adapter_plan: metrics_adapter.Plan | None,
        keep_unknown: bool,
        recorded: set[str],
    ) -> None:
        self.group, self.rule, self.src, self.dst, self.mode = group, rule, src, dst, mode
        self.keep_unknown, self.recorded = keep_unknown, recorded
        self.index = known_series(src.profile)
        self.dst_index = series_index(dst.profile)
        self.adapter_served = {m.intent: m.dst for m in adapter_plan.mappings} if adapter_plan else {}
        self.adapter_skipped = dict(adapter_plan.skipped) if adapter_plan else {}
        self.findings: list[Finding] = []
        self.edits: list[tuple[int, int, str]] = []
        self.refs: list[tuple[str, SeriesRef]] = []
        self.src_labels: set[str] = set()
        self.dst_labels: set[str] = set()
        self.failed: list[str] = []  # series whose selector could not be translated (kept as written)
        self.failures = 0

    def note(
        self, severity: Severity, kind: Kind, detail: str, metric: str | None = None, url: str | None = None
    ) -> None:
        if severity == "error":
            self.failures += 1
            if self.keep_unknown and kind in _DEAD_KINDS:
                severity = "warning"
        finding = Finding(
            group=self.group, rule=self.rule, severity=severity, kind=kind, metric=metric, detail=detail, url=url
        )
        if finding not in self.findings:  # a series read twice in one expression is one finding
            self.findings.append(finding)

    def selector(self, sel: Selector) -> None:
        """Translate one selector; when it cannot be, none of its edits are kept (a half-renamed selector with a
        matcher its new metric cannot honour would silently match nothing)."""
        failures, edits = self.failures, len(self.edits)
        self._selector(sel)
        if self.failures > failures:
            del self.edits[edits:]
            if sel.name and sel.name not in self.failed:
                self.failed.append(sel.name)

    def _selector(self, sel: Selector) -> None:
        if sel.name is None:
            self.note(
                "warning",
                "name_selector",
                "a selector without a metric name ({__name__=~...}) is not "
                "rewritten; check which series it matches on the new engine",
            )
            return
        if sel.name in self.recorded:
            return  # the file's own recording rule
        ref = self.index.get(sel.name)
        if ref is None:
            self._unmapped(sel.name)
            return
        self.refs.append((sel.name, ref))
        self.src_labels |= labels_of(ref.spec)
        if self.mode == "adapter":
            self._adapter(sel, ref)
            return
        target = target_of(ref, self.dst.profile)
        if target.name is None or target.spec is None:
            self.note("error", "untranslatable", f"{sel.name}: {target.problem}", sel.name)
            return
        self.dst_labels |= labels_of(target.spec)
        if target.name != sel.name:
            self.edits.append((sel.name_start, sel.name_end, target.name))
        if target.unit_factor != 1.0:
            self.note(
                "warning",
                "unit",
                f"{sel.name} is in {ref.spec.unit}, {target.name} in {target.spec.unit}: "
                f"values (and thresholds on them) change by ×{target.unit_factor:g}",
                sel.name,
            )
        self._matchers(sel, ref, target.spec, target.unit_factor)

    def _unmapped(self, name: str) -> None:
        """A series that is no metric intent of the source engine: another engine's, the source's own specific
        series (valid only on the same engine, where the served check judges it), or no engine's (kept)."""
        owner = engine_of(name)
        if owner is None:
            if not name.startswith("switchover_"):
                self.note("info", "not_engine_metric", f"{name} is not an engine series: kept as written", name)
        elif owner == self.dst.engine and owner != self.src.engine:
            self.note("info", "not_engine_metric", f"{name} is already a {self.dst.engine} series", name)
        elif owner == self.src.engine and self.mode == "adapter":
            self.note(
                "error",
                "engine_specific",
                f"{name}: the metrics adapter serves only series with a metric "
                f"intent, and {name} is specific to {self.src.engine}",
                name,
            )
        elif owner == self.src.engine and owner != self.dst.engine:
            self.note(
                "error",
                "engine_specific",
                f"{name} is specific to {self.src.engine} (no metric intent it "
                f"shares with {self.dst.engine}): {self.dst.label} has no counterpart",
                name,
            )

    def _adapter(self, sel: Selector, ref: SeriesRef) -> None:
        served = self.adapter_served.get(ref.intent)
        if served is not None and sel.name not in index_of(ref.intent, served):
            # the adapter names each intent as its profile does with no release given (its command takes none)
            self.note(
                "error",
                "untranslatable",
                f"{sel.name}: the metrics adapter serves {ref.intent} as "
                f"{served.name}, the newest {self.src.engine} spelling, not this one",
                sel.name,
            )
            return
        if served is not None:
            self.dst_labels |= labels_of(ref.spec)
            if ref.part == "_bucket":
                self.note(
                    "info",
                    "adapter",
                    f"{sel.name}: the adapter re-buckets {self.dst.engine}'s histogram into "
                    f"{self.src.engine}'s bounds by interpolation (error bound exported as "
                    "switchover_adapter_rebucket_error_bound)",
                    sel.name,
                )
            return
        why = self.adapter_skipped.get(ref.intent, f"{self.dst.label} has no {ref.intent} metric")
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
            elif (
                m.label in src_labels
                and m.label not in dst_labels
                and m.label in self.src.profile.metrics_endpoint.identity_labels
            ):
                self.note(
                    "warning",
                    "label",
                    f"{sel.name}: matcher {m.label}{m.op}{_quote(m.value)} dropped: "
                    f"{dst.name} has no {m.label} label (it then covers the whole server)",
                    sel.name,
                )
                changed = True
            elif m.label in src_labels and m.label not in dst_labels:
                self.note(
                    "error",
                    "untranslatable",
                    f"{sel.name}: matcher {m.label}{m.op}{_quote(m.value)} selects a "
                    f"subset {dst.name} cannot tell apart (it has no {m.label} label)",
                    sel.name,
                )
                kept.append((m, m.value))
            else:
                kept.append((m, m.value))
        if changed:
            self.edits.append((sel.brace[0], sel.brace[1], _brace(True, kept)))

    def _le(self, name: str, m: Matcher, dst: MetricSpec, factor: float) -> str:
        if m.op != "=":
            self.note(
                "warning",
                "bucket",
                f"{name}: le{m.op}{_quote(m.value)} kept; check it against {dst.name}'s bounds",
                name,
            )
            return m.value
        try:
            bound = float(m.value) * factor
        except ValueError:
            self.note("warning", "bucket", f"{name}: le={_quote(m.value)} is not a number; kept", name)
            return m.value
        if bound == float("inf"):
            return "+Inf"
        if not dst.buckets:
            self.note(
                "warning",
                "bucket",
                f"{name}: {dst.name}'s bucket bounds are not fixed in the profile "
                f"({self.dst.label}); le={_quote(m.value)} kept, check it",
                name,
            )
            return m.value
        if any(abs(b - bound) <= 1e-9 * max(1.0, abs(b)) for b in dst.buckets):
            return m.value if factor == 1.0 else _fmt_num(bound)
        nearest = min(dst.buckets, key=lambda b: abs(b - bound))
        self.note(
            "warning",
            "bucket",
            f"{name}: le={_quote(m.value)} is not a bucket bound of {dst.name} in "
            f"{self.dst.label}; moved to the nearest, {_fmt_num(nearest)} (the share counted changes: re-check "
            "the threshold)",
            name,
        )
        return _fmt_num(nearest)

    def grouping(self, keyword: str, labels: list[tuple[str, int]]) -> None:
        if self.mode == "adapter":
            return
        for label, _ in labels:
            if label != "le" and label in self.src_labels and label not in self.dst_labels:
                self.note(
                    "warning",
                    "grouping",
                    f"{keyword} ({label}): the {self.dst.engine} metrics have no {label} "
                    "label, so its series merge into one",
                )

    def source_served(self, selectors: list[Selector]) -> None:
        """Warn about source series the source release does not serve either: the rule watched nothing there."""
        if self.src.view is None:
            return
        for name in dict.fromkeys(s.name for s in selectors if s.name and s.name not in self.recorded):
            if engine_of(name) != self.src.engine:
                continue
            served = self.src.serves(name)
            if served.status == "absent":
                self.note(
                    "warning",
                    "source_series",
                    f"{name} is not served by {self.src.label} either (the rule "
                    f"watched nothing there): {served.reason}",
                    name,
                    served.url,
                )

    def target_served(self, expr: str) -> tuple[list[str], list[str]]:
        """The engine series `expr` reads that the target does not serve (noted as dead unless already failed) and
        those its release data cannot confirm."""
        left, unverified = list(self.failed), []
        for name in dict.fromkeys(s.name for s in parse(expr).selectors if s.name and s.name not in self.recorded):
            if name in self.failed or engine_of(name) is None:
                continue
            if self.mode == "adapter" and engine_of(name) == self.src.engine:
                continue  # the adapter serves it (or the selector already failed)
            served = self.dst.serves(name)
            if served.status == "absent":
                left.append(name)
                self.note("error", "dead_series", f"{name} would watch nothing: {served.reason}", name, served.url)
            elif served.status == "unknown":
                unverified.append(name)
                self.note(
                    "warning", "unverified", f"{name}: not confirmed served by {self.dst.label}: {served.reason}", name
                )
        return left, unverified


def _status(syntax_error: bool, changed: bool, left: list[str], errors: bool, unverified: list[str]) -> Status:
    if syntax_error:
        return "untranslated"
    if left or errors:
        return "partial" if changed else "untranslated"
    if unverified:
        return "unverified"
    return "translated" if changed else "unchanged"


def _release_of(side: EngineRelease | EngineProfile) -> EngineRelease:
    """A profile given directly (the Python API) as a release side: its resolved version, else the newest read."""
    if isinstance(side, EngineRelease):
        return side
    view = releases.view(side.name, side.resolved_version)
    version = side.resolved_version or (view.resolution.before.version if view and view.resolution.before else None)
    return EngineRelease(side.name, version, side.resolved_version, side, view)


def translate_rules(
    path: Path,
    source: EngineRelease | EngineProfile,
    target: EngineRelease | EngineProfile,
    *,
    mode: Mode = "rename",
    shifts: BenchShifts | None = None,
    keep_unknown: bool = False,
) -> tuple[dict[str, Any], TranslationReport]:
    """The translated rule file (as data) and the report; the input file is not changed."""
    src, dst = _release_of(source), _release_of(target)
    data = yamlfile.load_file(path, what="Prometheus rule file (YAML)").data
    rules = rules_of(data, path)
    recorded = recorded_names(data)
    # what `switchover metrics-adapter --from NEW --to OLD` serves: it loads both profiles without a release
    plan = metrics_adapter.plan(load_profile(dst.engine), load_profile(src.engine)) if mode == "adapter" else None
    out_groups = [dict(g, rules=[dict(r) for r in g["rules"]]) for g in data["groups"]]
    report = TranslationReport(
        source_engine=src.engine,
        source_version=src.version,
        source_note=src.note,
        target_engine=dst.engine,
        target_version=dst.version,
        target_note=dst.note,
        mode=mode,
        keep_unknown=keep_unknown,
        rules=[],
        findings=[],
        thresholds=[],
        notes=[n for n in (src.note, dst.note) if n] + (list(shifts.notes) if shifts else []),
    )
    for gi, gname, ri, rule in rules:
        kind: Literal["alert", "record"] = "alert" if "alert" in rule else "record"
        name = str(rule.get("alert") or rule.get("record"))
        expr = str(rule["expr"])
        t = _Rule(gname, name, src, dst, mode, plan, keep_unknown, recorded)
        new_expr, syntax_error = expr, False
        left: list[str] = []
        unverified: list[str] = []
        try:
            parsed = parse(expr)
        except PromQLError as exc:
            t.note("error", "syntax", f"expr: {exc}")
            syntax_error = True
        else:
            t.source_served(parsed.selectors)
            for sel in parsed.selectors:
                t.selector(sel)
            for grp in parsed.groupings:
                t.grouping(grp.keyword, grp.labels)
            report.thresholds += thresholds(
                gname, name, parsed.thresholds, parsed.quantiles, t.refs, shifts, same_engine=src.engine == dst.engine
            )
            new_expr = replace_spans(expr, t.edits)
            left, unverified = t.target_served(new_expr)
        status = _status(syntax_error, new_expr != expr, left, t.failures > 0, unverified)
        out_rule = out_groups[gi]["rules"][ri]
        out_rule["expr"] = new_expr
        if status in ("partial", "untranslated") and kind == "alert":
            problems = [f.detail for f in t.findings if f.severity == "error" or f.kind in _DEAD_KINDS]
            ann = dict(out_rule.get("annotations") or {})
            ann[ANNOTATION] = "; ".join(problems)[:500]
            out_rule["annotations"] = ann
        report.rules.append(
            RuleResult(
                group=gname,
                rule=name,
                kind=kind,
                status=status,
                expr_before=expr,
                expr_after=new_expr,
                series_left=left,
                series_unverified=unverified,
            )
        )
        report.findings += t.findings
    if mode == "adapter":
        report.notes.append(
            f"names kept: run `switchover metrics-adapter --from {dst.engine} --to {src.engine}` in "
            f"front of {dst.engine} and point Prometheus at it"
        )
    return {**data, "groups": out_groups}, report
