"""Metrics adapter: re-serve the new engine's Prometheus metrics under the old engine's names, units and
histogram buckets, so dashboards and alerts written for the old engine keep working during a migration.

Names, types, units and buckets come from the engine profiles (`switchover.engines.load_profile`), matched by intent
(ttft, e2e, running, ...): which series are served is engines/series_map.py's `plan`. Re-bucketing assumes
observations are spread uniformly inside each source bucket and interpolates the cumulative count linearly. Error
bound: for a target bound b inside the source bucket (s_i, s_{i+1}], the true cumulative count lies in [C(s_i),
C(s_{i+1})], so the estimate is off by at most the count of that one source bucket, C(s_{i+1}) - C(s_i); it is exact
where b equals a source bound, and `_sum` / `_count` are carried over exactly. Above the last finite source bound
the estimate is the lower end C(s_last) (error at most the +Inf overflow count). The bound per series is exported as
`switchover_adapter_rebucket_error_bound` (counts) so a reader can judge it.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from typing import Any

from switchover.engines.profile import EngineProfile, MetricSpec
from switchover.engines.series_map import Mapping, Plan
from switchover.engines.series_map import plan as plan  # the CLI's entry: which series are served
from switchover.errors import Unreachable
from switchover.measure.prometheus import metric_families
from switchover.wire.metrics_page import scrape as scrape  # the CLI's and the served app's scrape

_SUMMED_GAUGE_UNITS = {"requests", "tokens", "blocks"}


def rebucket(
    src_bounds: list[float], src_cum: list[float], dst_bounds: list[float], total: float
) -> tuple[list[float], float]:
    """Cumulative counts at `dst_bounds` from cumulative counts at finite `src_bounds` (sorted), by linear
    interpolation (lower edge 0 below the first bound); returns them and the worst-case absolute error."""
    out: list[float] = []
    worst = 0.0
    for b in dst_bounds:
        i = bisect.bisect_left(src_bounds, b)
        if i < len(src_bounds) and src_bounds[i] == b:
            out.append(src_cum[i])
            continue
        if i >= len(src_bounds):  # above every finite source bound: only the lower end is known
            lo = src_cum[-1] if src_cum else 0.0
            out.append(lo)
            worst = max(worst, total - lo)
            continue
        lo_b, lo_c = (src_bounds[i - 1], src_cum[i - 1]) if i > 0 else (min(0.0, b), 0.0)
        hi_b, hi_c = src_bounds[i], src_cum[i]
        frac = (b - lo_b) / (hi_b - lo_b) if hi_b > lo_b else 1.0
        out.append(lo_c + (hi_c - lo_c) * max(0.0, min(1.0, frac)))
        worst = max(worst, hi_c - lo_c)
    for k in range(1, len(out)):  # keep it cumulative (monotone) despite float rounding
        out[k] = max(out[k], out[k - 1])
    return out, worst


def _labels(sample_labels: dict[str, str], dst: MetricSpec, model: str | None) -> tuple[tuple[str, str], ...]:
    wanted = [lbl.rstrip("?") for lbl in dst.labels]
    out = {k: v for k, v in sample_labels.items() if k in wanted and k != "le"}
    if "model_name" in wanted and "model_name" not in out and model:
        out["model_name"] = model
    return tuple(sorted(out.items()))


def _fmt(labels: tuple[tuple[str, str], ...], extra: tuple[tuple[str, str], ...] = ()) -> str:
    items = list(labels) + list(extra)
    if not items:
        return ""
    esc = [(k, v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")) for k, v in items]
    return "{" + ",".join(f'{k}="{v}"' for k, v in esc) + "}"


def _num(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _samples_by_name(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    try:
        for fam in metric_families(text):
            for s in fam.samples:
                found[s.name].append((dict(s.labels), float(s.value)))
    except (ValueError, TypeError, IndexError) as exc:  # prometheus_client's parser on text that is not metrics
        first = text.lstrip()[:60].splitlines()[0] if text.strip() else "(empty)"
        raise Unreachable(
            f"the scrape is not Prometheus text exposition ({type(exc).__name__}; it starts {first!r})",
            hint="point --upstream at the engine's base URL or its /metrics",
        ) from None
    return found


def convert(text: str, p: Plan, model: str | None = None) -> tuple[str, dict[str, Any]]:
    """Source exposition text -> target exposition text, plus a report (served, missing, error bounds)."""
    samples = _samples_by_name(text)
    lines: list[str] = []
    report: dict[str, Any] = {
        "served": [],
        "absent_in_scrape": [],
        "sum_absent_in_scrape": [],
        "skipped": dict(p.skipped),
        "error_bounds": {},
    }
    bound_lines: list[str] = []
    for m in p.mappings:
        s, d = m.src, m.dst
        fam = d.name  # counters keep `_total` in HELP/TYPE, as prometheus_client (vLLM, SGLang) writes them
        header = [f"# HELP {fam} {m.intent} from {s.name} (switchover metrics adapter)", f"# TYPE {fam} {d.type}"]
        if d.type == "histogram":
            body = _histogram(samples, m, model, bound_lines, report)
        else:
            body = _scalar(samples, m, model)
        if body is None:
            report["absent_in_scrape"].append(m.intent)
            continue
        report["served"].append(m.intent)
        lines += header + body
    if bound_lines:
        lines += [
            "# HELP switchover_adapter_rebucket_error_bound Worst-case absolute error (counts) of a "
            "re-bucketed cumulative count",
            "# TYPE switchover_adapter_rebucket_error_bound gauge",
            *bound_lines,
        ]
    return "\n".join(lines) + "\n", report


def _scalar(samples: dict[str, list[tuple[dict[str, str], float]]], m: Mapping, model: str | None) -> list[str] | None:
    s, d = m.src, m.dst
    if s.type == "histogram":  # e.g. TGI token-length histograms: their _sum is the running total
        rows = samples.get(s.name + "_sum")
    else:
        rows = samples.get(s.name) or samples.get(s.name + "_total")
    if not rows:
        return None
    agg: dict[tuple[tuple[str, str], ...], list[float]] = defaultdict(list)
    for labels, v in rows:
        agg[_labels(labels, d, model)].append(v * m.factor)
    mean = d.type == "gauge" and d.unit not in _SUMMED_GAUGE_UNITS
    name = d.name if d.type != "counter" or d.name.endswith("_total") else d.name + "_total"
    return [f"{name}{_fmt(k)} {_num(sum(v) / len(v) if mean else sum(v))}" for k, v in sorted(agg.items())]


def _histogram(
    samples: dict[str, list[tuple[dict[str, str], float]]],
    m: Mapping,
    model: str | None,
    bound_lines: list[str],
    report: dict[str, Any],
) -> list[str] | None:
    s, d = m.src, m.dst
    buckets = samples.get(s.name + "_bucket")
    if not buckets:
        return None
    series: dict[tuple[tuple[str, str], ...], dict[float, float]] = defaultdict(lambda: defaultdict(float))
    sums: dict[tuple[tuple[str, str], ...], float] = defaultdict(float)
    counts: dict[tuple[tuple[str, str], ...], float] = defaultdict(float)
    for labels, v in buckets:
        series[_labels(labels, d, model)][float(labels["le"]) * m.factor] += v
    for labels, v in samples.get(s.name + "_sum", []):
        sums[_labels(labels, d, model)] += v * m.factor
    for labels, v in samples.get(s.name + "_count", []):
        counts[_labels(labels, d, model)] += v
    out: list[str] = []
    worst_all = 0.0
    for key in sorted(series):
        cum = series[key]
        finite = sorted(b for b in cum if not math.isinf(b))
        total = counts.get(key, cum.get(math.inf, cum[finite[-1]] if finite else 0.0))
        dst_bounds = list(d.buckets) if d.buckets else finite
        est, worst = rebucket(finite, [cum[b] for b in finite], dst_bounds, total)
        worst_all = max(worst_all, worst)
        for b, c in zip(dst_bounds, est, strict=True):
            out.append(f"{d.name}_bucket{_fmt(key, (('le', _num(b)),))} {_num(c)}")
        out.append(f"{d.name}_bucket{_fmt(key, (('le', '+Inf'),))} {_num(total)}")
        if key in sums:
            out.append(f"{d.name}_sum{_fmt(key)} {_num(sums[key])}")
        else:  # no source _sum: leave it out (a 0 would read as a mean latency of 0), and say so
            report["sum_absent_in_scrape"].append(s.name)
        out.append(f"{d.name}_count{_fmt(key)} {_num(total)}")
        bound_lines.append(f"switchover_adapter_rebucket_error_bound{_fmt(key, (('metric', d.name),))} {_num(worst)}")
    report["error_bounds"][d.name] = worst_all
    return out


# ---- I/O edge: scrape and serve ------------------------------------------------------------------------


def scrape_url(upstream: str, src: EngineProfile) -> str:
    """The source engine's metrics URL: `upstream` as given when it has a path, else its profile's path."""
    from urllib.parse import urlsplit

    return upstream if urlsplit(upstream).path not in ("", "/") else upstream.rstrip("/") + src.metrics_endpoint.path


def adapter_app(url: str, p: Plan, model: str | None) -> Any:
    """An aiohttp app whose GET /metrics scrapes `url` and answers in the target engine's vocabulary."""
    from aiohttp import web

    from switchover.errors import SwitchoverError

    async def metrics(request: web.Request) -> web.Response:
        try:
            text, _ = convert(await scrape(url), p, model)
        except SwitchoverError as exc:
            return web.Response(status=502, text=f"# upstream scrape failed: {exc.message}\n")
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app
