"""Series names by intent: which engine series a rule's metric name is, and what it becomes on another engine.

The profiles (engines/data/<engine>.yaml) name each metric by intent (ttft, e2e, running, ...) with its type,
unit, buckets and labels, as the metrics adapter uses them. A histogram is three series (`_bucket`, `_sum`,
`_count`); a counter of tokens on one engine may be a token-length histogram on another, whose `_sum` is the same
running total (TGI; the metrics adapter relies on the same fact). An intent's series may change name across an
engine's releases (vLLM gpu_cache_usage_perc -> kv_cache_usage_perc in 0.9.2): the profile lists each spelling with
its release range, and a rule written for any of them is recognised (`known_series`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from switchover.engines.profile import EngineProfile, MetricSpec, metric_variants
from switchover.engines.series_map import unit_factor

Suffix = Literal["", "_bucket", "_sum", "_count"]
HISTOGRAM_PARTS: tuple[Suffix, ...] = ("_bucket", "_sum", "_count")


@dataclass(frozen=True)
class SeriesRef:
    """One series name of an engine: its intent, which part of the metric it is, and the metric's spec."""

    intent: str
    part: Suffix
    spec: MetricSpec


@dataclass(frozen=True)
class Target:
    """What a source series becomes: a name (None when it cannot be translated) and why not / what to watch."""

    name: str | None
    spec: MetricSpec | None
    problem: str | None = None
    unit_factor: float = 1.0  # multiply a source value by this to get the target's unit


def series_index(profile: EngineProfile) -> dict[str, SeriesRef]:
    """Every series name an engine exposes for its intents (histogram parts, counters with and without _total)."""
    out: dict[str, SeriesRef] = {}
    for intent, spec in profile.metrics.items():
        _index(out, intent, spec)
    return out


def known_series(profile: EngineProfile) -> dict[str, SeriesRef]:
    """The series of `profile`'s release first, then every other spelling its engine used for an intent at any
    release (a rule may read a name its release still served deprecated, or the user may give the version loosely)."""
    out = series_index(profile)
    for intent, specs in metric_variants(profile.name).items():
        for spec in reversed(specs):  # the newest spelling wins a name two ranges share
            found: dict[str, SeriesRef] = {}
            _index(found, intent, spec)
            for name, ref in found.items():
                out.setdefault(name, ref)
    return out


def index_of(intent: str, spec: MetricSpec) -> dict[str, SeriesRef]:
    """The series names one metric spec exposes."""
    out: dict[str, SeriesRef] = {}
    _index(out, intent, spec)
    return out


def _index(out: dict[str, SeriesRef], intent: str, spec: MetricSpec) -> None:
    """Add the series names of one metric spec (histogram parts; counters with and without _total)."""
    if spec.type == "histogram":
        for part in HISTOGRAM_PARTS:
            out[spec.name + part] = SeriesRef(intent, part, spec)
    elif spec.type == "summary":
        out[spec.name] = SeriesRef(intent, "", spec)
        out[spec.name + "_sum"] = SeriesRef(intent, "_sum", spec)
        out[spec.name + "_count"] = SeriesRef(intent, "_count", spec)
    else:
        out[spec.name] = SeriesRef(intent, "", spec)
        if spec.type == "counter" and spec.name.endswith("_total"):
            out.setdefault(spec.name.removesuffix("_total"), SeriesRef(intent, "", spec))


def target_of(ref: SeriesRef, dst: EngineProfile) -> Target:
    """The target engine's series for `ref`, or why there is none."""
    d = dst.metrics.get(ref.intent)
    if d is None:
        return Target(None, None, f"{release_label(dst)} has no {ref.intent} metric")
    s = ref.spec
    factor = unit_factor(s.unit, d.unit)
    if factor is None:
        return Target(None, d, f"unit {s.unit} cannot be converted to {d.unit}")
    if "summary" in (s.type, d.type) and s.type != d.type:
        return Target(None, d, f"{s.type} → {d.type}: quantiles cannot be converted")
    if s.type == d.type:
        return Target(d.name + ref.part if s.type in ("histogram", "summary") else d.name, d, unit_factor=factor)
    if s.type == "counter" and d.type == "histogram" and s.unit == d.unit == "tokens":
        return Target(d.name + "_sum", d, unit_factor=factor)  # the histogram's _sum is the running total
    if s.type == "histogram" and d.type == "counter" and ref.part == "_sum" and s.unit == d.unit == "tokens":
        return Target(d.name, d, unit_factor=factor)
    if s.type == "histogram" and d.type != "histogram":
        return Target(None, d, f"{d.name} is a {d.type}: {s.name}{ref.part} (a histogram) has no counterpart")
    return Target(None, d, f"{s.name} is a {s.type}, {d.name} a {d.type}: no equivalent series")


def release_label(profile: EngineProfile) -> str:
    """The engine and the release its profile was resolved at ('vllm 0.6.3'), as findings name it."""
    return f"{profile.name} {profile.resolved_version}" if profile.resolved_version else profile.name


def labels_of(spec: MetricSpec) -> set[str]:
    """The labels a metric is documented to carry (optional ones marked `?` in the profile included)."""
    return {lbl.rstrip("?") for lbl in spec.labels}
