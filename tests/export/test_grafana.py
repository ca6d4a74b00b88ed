"""The Grafana dashboard reads only the gateway's series and draws the gate lines from the settings."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import orjson
import yaml

from switchover.config.rollout import RolloutSettings
from switchover.evidence import gateway_series as mn
from switchover.export.grafana import grafana_dashboard
from switchover.testing import require_tool


def _exprs(dash: dict) -> list[str]:
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def test_dashboard_is_json_with_unique_panels_reading_gateway_series() -> None:
    res = grafana_dashboard()
    dash = orjson.loads(res.render())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) >= 8
    for e in _exprs(dash):
        series = set(re.findall(r"(switchover_gateway_[a-z_]+)", e))
        assert series, e
        known = {n.removesuffix("_bucket") for n in mn.ALL} | {mn.TTFT, mn.TPOT, mn.E2E}
        assert all(s.removesuffix("_bucket") in known for s in series), e
    assert {t["name"] for t in dash["templating"]["list"]} == {"datasource", "job"}


def test_gate_thresholds_come_from_the_rollout_settings() -> None:
    st = RolloutSettings.model_validate({"gates": {"max_error_rate": 0.03, "max_ttft_p99_ratio": 1.2}})
    dash = grafana_dashboard(st).documents[0]
    steps = {p["title"]: p["fieldConfig"]["defaults"]["thresholds"]["steps"] for p in dash["panels"]}
    assert steps["New-arm error ratio (client got an error)"][-1]["value"] == 0.03
    assert steps["TTFT p99 ratio new / old (gate line at the threshold)"][-1]["value"] == 1.2
    assert grafana_dashboard().cannot_express


def test_every_panel_query_parses_with_promtool(tmp_path: Path) -> None:
    promtool = require_tool("promtool", hint="Debian package prometheus; PromQL syntax not checked")
    exprs = [
        e.replace("$__rate_interval", "5m").replace("$job", ".*") for e in _exprs(grafana_dashboard().documents[0])
    ]
    rules = {"groups": [{"name": "g", "rules": [{"record": f"r{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    p = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


def test_panels_are_laid_out_two_a_row_in_table_order_without_overlap() -> None:
    dash = grafana_dashboard().documents[0]
    grid = [(p["id"], p["gridPos"]) for p in dash["panels"]]
    assert [pid for pid, _ in grid] == list(range(1, len(grid) + 1))
    cells = {(g["x"], g["y"]) for _, g in grid}
    assert len(cells) == len(grid) and {g["x"] for _, g in grid} == {0, 12}
    assert all(g["w"] == 12 and g["h"] == 8 and g["y"] == 8 * ((pid - 1) // 2) for pid, g in grid)
    red = {p["title"] for p in dash["panels"] if len(p["fieldConfig"]["defaults"]["thresholds"]["steps"]) == 2}
    assert len(red) == 3 and all("ratio" in t for t in red)
