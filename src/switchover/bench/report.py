"""report.html of a bench run: TTFT, TPOT and output throughput against load for every endpoint, the knee
marked, plus the step table, A/B deltas and checks. Offline: plotly.js is inlined once."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import plotly.graph_objects as go
from markupsafe import Markup
from plotly.subplots import make_subplots

from switchover.atomicfile import write_atomic
from switchover.bench.capbind import step_limits
from switchover.bench.report_template import BENCH_TEMPLATE
from switchover.bench.steptable import fmt as _f
from switchover.bench.steptable import limit_columns, step_flags, step_table
from switchover.evidence.bench import BenchReport
from switchover.evidence.bench_caps import advice
from switchover.evidence.bench_step import StepSummary
from switchover.htmlpage import render_page
from switchover.runs import RunDir

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def _x(s: StepSummary) -> float | None:
    """The step's load: its concurrency or target rate; for trace replay (neither) the rate it achieved, or None
    when that was not measured (never 0)."""
    if s.concurrency is not None:
        return float(s.concurrency)
    if s.rate is not None:
        return float(s.rate)
    return s.req_per_s


def _load_of(v: float | None) -> str:
    """A step's load as recorded on A/B rows and checks: concurrency or rate; None is a trace step."""
    if v is None:
        return "trace"
    return _f(float(v), 0 if float(v).is_integer() else 2)


def _series(steps: list[StepSummary]) -> dict[str, list[float | None]]:
    by_x: dict[float, list[StepSummary]] = defaultdict(list)
    for s in steps:
        x = _x(s)
        if x is not None:  # a trace step whose rate was not measured has no place on a load axis
            by_x[x].append(s)
    out: dict[str, list[float | None]] = defaultdict(list)
    for x in sorted(by_x):
        group = by_x[x]
        out["x"].append(x)
        for name, attr, stat in [
            ("ttft_p50", "ttft_ms", "p50"),
            ("ttft_p99", "ttft_ms", "p99"),
            ("tpot_p50", "tpot_ms", "p50"),
            ("tpot_p99", "tpot_ms", "p99"),
        ]:
            vals = [getattr(getattr(s, attr), stat) for s in group if getattr(s, attr) is not None]
            out[name].append(float(np.mean(vals)) if vals else None)
        tps = [s.out_tok_per_s for s in group if s.out_tok_per_s is not None]
        out["tok_s"].append(float(np.mean(tps)) if tps else None)
    return out


def bucket_figure(report: BenchReport, bucket: str | None) -> go.Figure:
    """Three panels (TTFT, TPOT, output tok/s) against load, one colour per endpoint, knees marked."""
    trace = all(s.concurrency is None and s.rate is None for s in report.steps)
    xlabel = (
        "achieved request rate (req/s, trace replay)"
        if trace
        else "concurrency"
        if report.plan.concurrency and not report.plan.rates
        else "request rate (req/s)"
    )
    fig = make_subplots(rows=1, cols=3, subplot_titles=("TTFT (ms)", "TPOT (ms)", "output tokens/s"))
    labels = [e.label for e in report.endpoints]
    for i, label in enumerate(labels):
        color = COLORS[i % len(COLORS)]
        steps = [s for s in report.steps if s.endpoint == label and s.bucket == bucket]
        if not steps:
            continue
        ser = _series(steps)
        for col, key in ((1, "ttft"), (2, "tpot")):
            for stat, line in (("p50", {"color": color}), ("p99", {"color": color, "dash": "dash"})):
                fig.add_trace(
                    go.Scatter(
                        x=ser["x"],
                        y=ser[f"{key}_{stat}"],
                        mode="lines+markers",
                        name=f"{label} {stat}",
                        line=line,
                        legendgroup=label,
                        showlegend=col == 1,
                    ),
                    1,
                    col,
                )
        fig.add_trace(
            go.Scatter(
                x=ser["x"],
                y=ser["tok_s"],
                mode="lines+markers",
                name=f"{label} tok/s",
                line={"color": color},
                legendgroup=label,
                showlegend=False,
            ),
            1,
            3,
        )
        knee = report.knees.get(f"{label}/{bucket}")
        if knee is not None and knee.found and knee.concurrency is not None:
            col = {"ttft": 1, "tpot": 2, "e2e": 2, "itl": 2}[report.plan.knee_metric]
            if knee.ci_low is not None and knee.ci_high is not None:
                fig.add_vrect(
                    x0=knee.ci_low, x1=knee.ci_high, fillcolor=color, opacity=0.12, line_width=0, row=1, col=col
                )
            fig.add_vline(
                x=knee.concurrency,
                line={"color": color, "dash": "dot"},
                row=1,
                col=col,
                annotation_text=f"{label} knee {knee.concurrency:.3g}",
                annotation_position="top left",
            )
    for col in (1, 2, 3):
        fig.update_xaxes(title_text=xlabel, type="log" if xlabel == "concurrency" else "linear", row=1, col=col)
    fig.update_layout(
        height=420,
        margin={"t": 60, "b": 40, "l": 40, "r": 20},
        title=f"bucket {bucket}" + (" tokens" if bucket and bucket.isdigit() else ""),
    )
    return fig


def soak_figure(report: BenchReport) -> go.Figure:
    """The soak timeline: latency tails, throughput and memory per window, one colour per endpoint."""
    soak = report.soak
    assert soak is not None
    hours = soak.window_s >= 3600
    unit, div = ("h", 3600.0) if hours else ("min", 60.0)
    fig = make_subplots(rows=1, cols=3, subplot_titles=("TTFT / TPOT p99 (ms)", "req/s", "memory (MB)"))
    for i, label in enumerate(dict.fromkeys(w.endpoint for w in soak.windows)):
        color = COLORS[i % len(COLORS)]
        ws = [w for w in soak.windows if w.endpoint == label and not w.partial]  # a cut-short tail: table only
        x = [(w.start_s + w.end_s) / 2 / div for w in ws]
        for name, attr, dash in (("TTFT p99", "ttft_ms", "solid"), ("TPOT p99", "tpot_ms", "dot")):
            y = [getattr(w.summary, attr).p99 if getattr(w.summary, attr) else None for w in ws]
            fig.add_trace(
                go.Scatter(x=x, y=y, name=f"{label} {name}", line={"color": color, "dash": dash}), row=1, col=1
            )
        fig.add_trace(
            go.Scatter(x=x, y=[w.summary.req_per_s for w in ws], name=f"{label} req/s", line={"color": color}),
            row=1,
            col=2,
        )
        fig.add_trace(
            go.Scatter(x=x, y=[w.client_rss_mb for w in ws], name=f"{label} client RSS", line={"color": color}),
            row=1,
            col=3,
        )
        if any(w.engine_rss_mb is not None for w in ws):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=[w.engine_rss_mb for w in ws],
                    name=f"{label} engine RSS",
                    line={"color": color, "dash": "dash"},
                ),
                row=1,
                col=3,
            )
    for col in (1, 2, 3):
        fig.update_xaxes(title_text=f"{unit} since the step started", row=1, col=col)
    fig.update_layout(height=380, margin={"t": 40, "b": 40})
    return fig


_STYLE = (
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}.warn{color:#b00}"
)


def _table(head: list[str], rows: list[list[Any]]) -> dict[str, Any]:
    return {"head": head, "rows": rows}


def _soak(report: BenchReport, include_js: bool) -> dict[str, Any]:
    """Timeline, drift table and window table of a soak run."""
    soak = report.soak
    assert soak is not None
    drift = [
        [
            d.endpoint,
            d.metric,
            _f(d.first, 2),
            _f(d.last, 2),
            "—" if d.change_pct is None else f"{d.change_pct:+.1f}%",
            Markup("<b>drift</b>") if d.flagged else "",
            d.note,
        ]
        for d in soak.drift
    ]
    windows = [
        [
            w.endpoint,
            str(w.index),
            f"{w.start_s:.0f}–{w.end_s:.0f}" + (" (partial)" if w.partial else ""),
            f"{w.summary.ok}/{w.summary.requests}",
            _f(w.summary.req_per_s, 2),
            _f(w.summary.ttft_ms.p99 if w.summary.ttft_ms else None),
            _f(w.summary.tpot_ms.p50 if w.summary.tpot_ms else None, 2),
            _f(w.summary.tpot_ms.p99 if w.summary.tpot_ms else None, 2),
            _f(w.client_rss_mb),
            _f(w.engine_rss_mb),
        ]
        for w in soak.windows
    ]
    return {
        "title": f"{len(soak.windows)} windows of {soak.window_s:g} s, {soak.checkpoints} checkpoints"
        + (f", resumed {len(soak.resumed)}×" if soak.resumed else ""),
        "figure": soak_figure(report).to_html(full_html=False, include_plotlyjs=include_js) if soak.windows else None,
        "drift": _table(["endpoint", "metric", "first", "last", "change", "flag", "note"], drift) if drift else None,
        "windows": _table(
            [
                "endpoint",
                "window",
                "seconds",
                "ok",
                "req/s",
                "TTFT p99",
                "TPOT p50",
                "TPOT p99",
                "client RSS MB",
                "engine RSS MB",
            ],
            windows,
        ),
    }


def _endpoint_rows(report: BenchReport) -> list[list[Any]]:
    return [
        [
            e.label,
            e.url,
            e.engine or "openai",
            e.model,
            e.output_control,
            "; ".join(f"{f.bucket}: {f.achieved} tok ({f.deviation:+d})" for f in e.length_fits)
            + (f" via {e.token_count_method}" if e.token_count_method else ""),
        ]
        for e in report.endpoints
    ]


def _ab_rows(report: BenchReport) -> list[list[Any]]:
    return [
        [
            a.bucket or "",
            _load_of(a.concurrency),
            f"{d.metric} {d.stat}",
            _f(d.old, 2),
            _f(d.new, 2),
            "—" if d.delta_pct is None else _f(d.delta_pct, 1) + "%",
            "—" if d.p_value is None else f"{d.p_value:.3g}",
            "yes" if d.significant else "no",
        ]
        for a in report.ab
        for d in a.deltas
    ]


def render(report: BenchReport) -> str:
    """The whole page as one HTML string (the bench template in switchover/report)."""
    cal = report.calibration
    figs = [
        bucket_figure(report, b).to_html(full_html=False, include_plotlyjs=i == 0)
        for i, b in enumerate(dict.fromkeys(s.bucket for s in report.steps))
    ]
    knees = [
        [k, Markup("{}<br><small>{}</small>").format(v.message, "; ".join(v.notes)) if v.notes else v.message]
        for k, v in report.knees.items()
    ]
    steps = step_table(
        report.steps,
        (
            *limit_columns(report.limits),
            ("errors", lambda s: ", ".join(f"{k}: {v}" for k, v in s.errors.items())),
            ("flags", lambda s: "; ".join(step_flags(s))),
        ),
    )
    return render_page(
        BENCH_TEMPLATE,
        name=report.name,
        style=_STYLE,
        ended_early=(report.stopped_reason or "interrupted") if report.interrupted or report.stopped_reason else None,
        endpoints=_table(
            ["endpoint", "url", "engine", "model", "output length", "prompt length check"], _endpoint_rows(report)
        ),
        cal=None
        if cal is None
        else {
            "req_per_s": f"{cal.req_per_s:.0f}",
            "chunks_per_s": f"{cal.chunks_per_s:.0f}",
            "us_per_chunk": f"{cal.us_per_chunk:.1f}",
            "concurrency": cal.concurrency,
        },
        stamps=[f"{e.label}: {e.chunk_stamps}" for e in report.endpoints if e.chunk_stamps],
        figures=figs,
        soak=_soak(report, include_js=not figs) if report.soak is not None else None,
        knees=_table(["endpoint/bucket", "result"], knees),
        steps=_table(*steps),
        ab=_table(
            ["bucket", "load", "metric", "old ms", "new ms", "delta", "p (Mann-Whitney)", "significant"],
            _ab_rows(report),
        )
        if report.ab
        else None,
        checks=_table(
            ["check", "endpoint", "load", "value", "limit", "result"],
            [
                [
                    c.name,
                    c.endpoint,
                    _load_of(c.concurrency),
                    _f(c.value, 2),
                    _f(c.limit, 2),
                    "pass" if c.passed else Markup("<b>FAIL</b>"),
                ]
                for c in report.checks
            ],
        )
        if report.checks
        else None,
        notes=[*advice(report.limits, {e.label: e.engine for e in report.endpoints}), *report.notes],
    )


def settle_limits(rd: RunDir, report: BenchReport) -> None:
    """Fill `report.limits` (binding cap and OOM answers per step) from the run's files when it has none, and keep
    them in summary.json; a run whose rows cannot be read yet keeps none and says why in its notes."""
    if report.limits or not report.step_times:
        return
    import pyarrow as pa

    try:
        report.limits = step_limits(rd.path, report)
    except (OSError, pa.ArrowException) as exc:
        report.notes.append(f"binding caps and OOM answers not read: {exc}")
        return
    if rd.has("summary.json"):
        rd.write_json("summary", report)


def write_report(rd: RunDir, report: BenchReport, name: str = "report.html") -> str:
    """report.html of a run (its binding caps and OOM answers read first, bench/capbind.py)."""
    settle_limits(rd, report)
    path = rd.file(name)
    write_atomic(path, render(report))
    return str(path)
