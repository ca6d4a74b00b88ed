"""A Grafana dashboard over the gateway's own metrics: engine-independent names, units and buckets, so it
keeps working when the engine behind an arm changes (docs/alerts.md: dashboards break when metric names and
units change)."""

from __future__ import annotations

from typing import Any, NamedTuple

from switchover.config.rollout import RolloutSettings
from switchover.evidence import gateway_series as mn
from switchover.export.result import ExportResult, Limitation

DS = {"type": "prometheus", "uid": "${datasource}"}
W = "$__rate_interval"
PANEL_W, PANEL_H = 12, 8
"""Every panel's size in grid units: two panels fill a row of the 24-unit-wide dashboard."""

LIMITS = [
    Limitation(
        feature="shadow distribution verdicts (KS, Mann-Whitney, chi-square vs A/A noise)",
        why="they need per-request rows; Prometheus holds aggregates",
        instead="`switchover rollout compare` over the ledger, or the report",
    ),
    Limitation(
        feature="rollout stage and audit log",
        why="they live in the rollout state file, not in metrics",
        instead="`switchover rollout status`; the weight panels show what the gateway applies",
    ),
]


class Panel(NamedTuple):
    """One row of the dashboard: a time series of `queries` ((PromQL, legend) pairs) in `unit`; `gate`, when set,
    is the rollout gate's threshold, drawn as a red line."""

    title: str
    unit: str
    queries: list[tuple[str, str]]
    gate: float | None = None


def _ts(pid: int, panel: Panel, x: int, y: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    if panel.gate is not None:
        steps.append({"color": "red", "value": panel.gate})
    return {
        "id": pid,
        "type": "timeseries",
        "title": panel.title,
        "datasource": DS,
        "gridPos": {"h": PANEL_H, "w": PANEL_W, "x": x, "y": y},
        "fieldConfig": {
            "defaults": {"unit": panel.unit, "thresholds": {"mode": "absolute", "steps": steps}},
            "overrides": [],
        },
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
        "targets": [
            {"refId": chr(65 + i), "datasource": DS, "expr": e, "legendFormat": legend}
            for i, (e, legend) in enumerate(panel.queries)
        ],
    }


def panels(settings: RolloutSettings | None = None) -> list[Panel]:
    """The dashboard's panels in reading order; every query reads only the gateway's series (metric_names.py)."""
    th = (settings or RolloutSettings()).gates
    sel = '{job=~"$job"}'
    by_arm = "sum by (arm)"
    q99 = "histogram_quantile(0.99, sum by (le, arm) (rate({h}_bucket{s}[" + W + "])))"
    q50 = "histogram_quantile(0.5, sum by (le, arm) (rate({h}_bucket{s}[" + W + "])))"

    def arm_q99(hist: str, arm: str) -> str:
        return f'histogram_quantile(0.99, sum by (le) (rate({hist}_bucket{{job=~"$job",arm="{arm}"}}[{W}])))'

    new_routed = f'sum(rate({mn.ROUTED}{{job=~"$job",arm="new"}}[{W}]))'
    new_errors = f'sum(rate({mn.REQUESTS}{{job=~"$job",arm="new",outcome=~"{mn.ERROR_OUTCOMES}"}}[{W}]))'
    return [
        Panel(
            "Requests per second by arm (the arm that answered)",
            "reqps",
            [(f"{by_arm} (rate({mn.REQUESTS}{sel}[{W}]))", "{{arm}}")],
        ),
        Panel(
            "Weight of new: configured vs in force",
            "percent",
            [
                (f"max({mn.WEIGHT}{sel})", "configured"),
                (f"max({mn.EFFECTIVE_WEIGHT}{sel})", "in force"),
                (f"max({mn.KILL_SWITCH_LATCHED}{sel}) * 100", "kill switch latched (100 = yes)"),
            ],
        ),
        Panel(
            "New-arm error ratio (client got an error)",
            "percentunit",
            [(f"{new_errors} / clamp_min({new_routed}, 1e-9)", "error ratio")],
            gate=th.max_error_rate,
        ),
        Panel(
            "Fallback ratio (new failed before the first byte; old answered)",
            "percentunit",
            [(f"sum(rate({mn.FALLBACKS}{sel}[{W}])) / clamp_min({new_routed}, 1e-9)", "fallback ratio")],
            gate=th.max_fallback_ratio,
        ),
        Panel(
            "TTFT p50 / p99 by arm",
            "s",
            [(q50.format(h=mn.TTFT, s=sel), "p50 {{arm}}"), (q99.format(h=mn.TTFT, s=sel), "p99 {{arm}}")],
        ),
        Panel(
            "TPOT p50 / p99 by arm",
            "s",
            [(q50.format(h=mn.TPOT, s=sel), "p50 {{arm}}"), (q99.format(h=mn.TPOT, s=sel), "p99 {{arm}}")],
        ),
        Panel(
            "TTFT p99 ratio new / old (gate line at the threshold)",
            "none",
            [(f"{arm_q99(mn.TTFT, 'new')} / {arm_q99(mn.TTFT, 'old')}", "ttft p99 new/old")],
            gate=th.max_ttft_p99_ratio,
        ),
        Panel("Shadow requests by result", "reqps", [(f"sum by (result) (rate({mn.SHADOW}{sel}[{W}]))", "{{result}}")]),
        Panel("In flight", "short", [(f"sum({mn.IN_FLIGHT}{sel})", "in flight")]),
        Panel(
            "Routing decisions by reason",
            "reqps",
            [(f"sum by (arm, reason) (rate({mn.ROUTED}{sel}[{W}]))", "{{arm}} {{reason}}")],
        ),
    ]


def panel_queries(settings: RolloutSettings | None = None) -> list[dict[str, Any]]:
    """The panels as Grafana JSON: ids 1, 2, ... in order, laid out two a row."""
    return [_ts(i + 1, panel, x=PANEL_W * (i % 2), y=PANEL_H * (i // 2)) for i, panel in enumerate(panels(settings))]


def grafana_dashboard(settings: RolloutSettings | None = None, *, title: str = "switchover gateway") -> ExportResult:
    """Dashboard JSON (import it in Grafana; pick the Prometheus datasource and the gateway's job)."""
    dash = {
        "title": title,
        "uid": "switchover-gateway",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "tags": ["switchover", "llm", "canary"],
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
                {
                    "name": "job",
                    "type": "query",
                    "datasource": DS,
                    "label": "gateway job",
                    "includeAll": True,
                    "multi": True,
                    "refresh": 2,
                    "query": {"query": f"label_values({mn.REQUESTS}, job)", "refId": "jobs"},
                    "definition": f"label_values({mn.REQUESTS}, job)",
                },
            ]
        },
        "panels": panel_queries(settings),
    }
    return ExportResult(
        target="grafana",
        format="json",
        documents=[dash],
        cannot_express=LIMITS,
        notes=["all panels read the gateway's metrics; the engines' own series differ by engine"],
    )
