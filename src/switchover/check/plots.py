"""Plotly figures (as JSON) built from the evidence; the report embeds them, the items refer to them by id."""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from switchover.check.evidence import Evidence
from switchover.check.judging import short_text
from switchover.evidence.check import Plot

COLORS = {"old": "#1f77b4", "new": "#d62728"}


def _fig_json(fig: go.Figure) -> dict[str, Any]:
    fig.update_layout(height=340, margin={"l": 50, "r": 20, "t": 50, "b": 40}, plot_bgcolor="#fff")
    out = dict(json.loads(pio.to_json(fig, validate=False)))
    out.get("layout", {}).pop("template", None)  # plotly.js' own defaults suffice; keeps check.json small
    return out


def bench_latency(ev: Evidence) -> Plot | None:
    b = ev.bench
    if b is None or not b.steps:
        return None
    fig = make_subplots(rows=1, cols=3, subplot_titles=("TTFT p99 (ms)", "TPOT p99 (ms)", "output tokens/s"))
    for side in ("old", "new"):
        steps = sorted(
            (s for s in b.steps if s.endpoint == side and s.concurrency is not None),
            key=lambda s: (s.bucket or "", s.concurrency),
        )
        if not steps:
            continue
        x = [s.concurrency for s in steps]
        series = [
            [s.ttft_ms.p99 if s.ttft_ms else None for s in steps],
            [s.tpot_ms.p99 if s.tpot_ms else None for s in steps],
            [s.out_tok_per_s for s in steps],
        ]
        for col, y in enumerate(series, start=1):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=y,
                    mode="lines+markers",
                    name=side,
                    legendgroup=side,
                    showlegend=col == 1,
                    line={"color": COLORS[side]},
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="concurrency", type="log")
    return Plot(id="bench_latency", title="A/B bench ladder: old vs new", figure=_fig_json(fig))


def verify_prefix(ev: Evidence) -> Plot | None:
    v = ev.verify
    if v is None or not v.greedy:
        return None
    ids = [d.id for d in v.greedy]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(x=ids, y=[len(d.common_prefix) for d in v.greedy], name="common prefix (chars)", marker_color="#2ca02c")
    )
    fig.add_trace(
        go.Bar(x=ids, y=[d.old_chars for d in v.greedy], name="old output (chars)", marker_color=COLORS["old"])
    )
    fig.add_trace(
        go.Bar(x=ids, y=[d.new_chars for d in v.greedy], name="new output (chars)", marker_color=COLORS["new"])
    )
    fig.update_layout(barmode="group", title="Greedy outputs: where old and new part")
    return Plot(id="verify_prefix", title="Greedy divergence per prompt", figure=_fig_json(fig))


def tokenizer_counts(ev: Evidence) -> Plot | None:
    lm = ev.live_model
    rows = [t for t in (lm.texts if lm else []) if t.old is not None and t.new is not None]
    if not rows:
        return None
    labels = [short_text(t.text, 19) for t in rows]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=[t.old for t in rows], name="old", marker_color=COLORS["old"]))
    fig.add_trace(go.Bar(x=labels, y=[t.new for t in rows], name="new", marker_color=COLORS["new"]))
    fig.update_layout(barmode="group", title="Tokens per text, by each server's /tokenize")
    return Plot(id="tokenizer_counts", title="Token counts old vs new", figure=_fig_json(fig))


def grace(ev: Evidence) -> Plot | None:
    g = ev.grace
    if g is None or g.need is None:
        return None
    names = ["required"] + [c.name for c in g.configured if c.value_s is not None]
    values = [g.need.required_s] + [c.value_s for c in g.configured if c.value_s is not None]
    colors = ["#7f7f7f"] + ["#2ca02c" if v >= values[0] else "#d62728" for v in values[1:]]
    fig = go.Figure(go.Bar(x=names, y=values, marker_color=colors))
    fig.update_layout(title="Drain grace (s): required vs configured", yaxis_title="seconds")
    return Plot(id="grace", title="Drain grace", figure=_fig_json(fig))


def build_plots(ev: Evidence) -> list[Plot]:
    """Every plot the evidence allows; a builder that fails is skipped (the items still show the figures)."""
    out = []
    for builder in (bench_latency, verify_prefix, tokenizer_counts, grace):
        try:
            plot = builder(ev)
        except Exception:  # a plot is decoration; the verdicts never depend on it
            plot = None
        if plot is not None:
            out.append(plot)
    return out
