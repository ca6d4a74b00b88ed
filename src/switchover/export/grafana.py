"""A Grafana dashboard over the gateway's own metrics: engine-independent names, units and buckets, so it
keeps working when the engine behind an arm changes (seed 000 §6: dashboards break when metric names and
units change)."""

from __future__ import annotations

from typing import Any

from switchover.config.rollout import RolloutSettings
from switchover.export.result import ExportResult, Limitation
from switchover.rollout import metric_names as mn

DS = {"type": "prometheus", "uid": "${datasource}"}
W = "$__rate_interval"

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


def _ts(
    pid: int,
    title: str,
    exprs: list[tuple[str, str]],
    unit: str,
    x: int,
    y: int,
    *,
    w: int = 12,
    thresholds: list[tuple[str, float | None]] | None = None,
) -> dict[str, Any]:
    steps = [{"color": c, "value": v} for c, v in (thresholds or [("green", None)])]
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "datasource": DS,
        "gridPos": {"h": 8, "w": w, "x": x, "y": y},
        "fieldConfig": {
            "defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps}},
            "overrides": [],
        },
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
        "targets": [
            {"refId": chr(65 + i), "datasource": DS, "expr": e, "legendFormat": legend}
            for i, (e, legend) in enumerate(exprs)
        ],
    }


def panel_queries(settings: RolloutSettings | None = None) -> list[dict[str, Any]]:
    """The panels; every `expr` reads only the gateway's series (metric_names.py)."""
    th = (settings or RolloutSettings()).gates
    sel = '{job=~"$job"}'
    by_arm = "sum by (arm)"
    q99 = "histogram_quantile(0.99, sum by (le, arm) (rate({h}_bucket{s}[" + W + "])))"
    q50 = "histogram_quantile(0.5, sum by (le, arm) (rate({h}_bucket{s}[" + W + "])))"

    def arm_q99(hist: str, arm: str) -> str:
        return f'histogram_quantile(0.99, sum by (le) (rate({hist}_bucket{{job=~"$job",arm="{arm}"}}[{W}])))'

    new_routed = f'sum(rate({mn.ROUTED}{{job=~"$job",arm="new"}}[{W}]))'
    return [
        _ts(
            1,
            "Requests per second by arm (the arm that answered)",
            [(f"{by_arm} (rate({mn.REQUESTS}{sel}[{W}]))", "{{arm}}")],
            "reqps",
            0,
            0,
        ),
        _ts(
            2,
            "Weight of new: configured vs in force",
            [
                (f"max({mn.WEIGHT}{sel})", "configured"),
                (f"max({mn.EFFECTIVE_WEIGHT}{sel})", "in force"),
                (f"max({mn.KILL_SWITCH_LATCHED}{sel}) * 100", "kill switch latched (100 = yes)"),
            ],
            "percent",
            12,
            0,
        ),
        _ts(
            3,
            "New-arm error ratio (client got an error)",
            [
                (
                    f'sum(rate({mn.REQUESTS}{{job=~"$job",arm="new",outcome=~"{mn.ERROR_OUTCOMES}"}}[{W}])) / '
                    f"clamp_min({new_routed}, 1e-9)",
                    "error ratio",
                )
            ],
            "percentunit",
            0,
            8,
            thresholds=[("green", None), ("red", th.max_error_rate)],
        ),
        _ts(
            4,
            "Fallback ratio (new failed before the first byte; old answered)",
            [(f"sum(rate({mn.FALLBACKS}{sel}[{W}])) / clamp_min({new_routed}, 1e-9)", "fallback ratio")],
            "percentunit",
            12,
            8,
            thresholds=[("green", None), ("red", th.max_fallback_ratio)],
        ),
        _ts(
            5,
            "TTFT p50 / p99 by arm",
            [(q50.format(h=mn.TTFT, s=sel), "p50 {{arm}}"), (q99.format(h=mn.TTFT, s=sel), "p99 {{arm}}")],
            "s",
            0,
            16,
        ),
        _ts(
            6,
            "TPOT p50 / p99 by arm",
            [(q50.format(h=mn.TPOT, s=sel), "p50 {{arm}}"), (q99.format(h=mn.TPOT, s=sel), "p99 {{arm}}")],
            "s",
            12,
            16,
        ),
        _ts(
            7,
            "TTFT p99 ratio new / old (gate line at the threshold)",
            [(f"{arm_q99(mn.TTFT, 'new')} / {arm_q99(mn.TTFT, 'old')}", "ttft p99 new/old")],
            "none",
            0,
            24,
            thresholds=[("green", None), ("red", th.max_ttft_p99_ratio)],
        ),
        _ts(
            8,
            "Shadow requests by result",
            [(f"sum by (result) (rate({mn.SHADOW}{sel}[{W}]))", "{{result}}")],
            "reqps",
            12,
            24,
        ),
        _ts(9, "In flight", [(f"sum({mn.IN_FLIGHT}{sel})", "in flight")], "short", 0, 32),
        _ts(
            10,
            "Routing decisions by reason",
            [(f"sum by (arm, reason) (rate({mn.ROUTED}{sel}[{W}]))", "{{arm}} {{reason}}")],
            "reqps",
            12,
            32,
        ),
    ]


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
