"""Drain grace: the arithmetic, the deploy-file scan with file and line, durations, bench input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from switchover.errors import BadInput
from switchover.plan.grace import parse_duration, required_grace
from switchover.plan.grace_files import grace_report, latency_from_bench

K8S = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  annotations:
    nginx.ingress.kubernetes.io/proxy-read-timeout: "60"
spec:
  template:
    spec:
      terminationGracePeriodSeconds: 30
      containers:
        - name: vllm
          lifecycle:
            preStop:
              exec:
                command: ["sh", "-c", "sleep 10"]
---
kind: Pod
spec:
  containers:
    - name: x
"""
COMPOSE = """services:
  llm:
    image: x
    stop_grace_period: 1m30s
  worker:
    image: y
"""


def test_seed_example_2000_tokens_at_35_ms_is_70_s() -> None:
    need = required_grace(2000, 35)
    assert need.generation_s == 70.0
    assert need.required_s == pytest.approx(77.0)  # + 10% margin
    assert required_grace(2000, 35, ttft_p99_ms=2000, margin_s=0).required_s == pytest.approx(72.0)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (30, 30.0),
        ("30", 30.0),
        ("30s", 30.0),
        ("1m30s", 90.0),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("500ms", 0.5),
        ("soon", None),
        (True, None),
    ],
)
def test_durations(text: object, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


def test_scan_flags_short_settings_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "deploy.yaml").write_text(K8S)
    (tmp_path / "compose.yml").write_text(COMPOSE)
    (tmp_path / "notes.txt").write_text("terminationGracePeriodSeconds: 1")
    report = grace_report(required_grace(2000, 35), tmp_path)
    by = {(f.file, f.setting): f for f in report.findings}
    grace = by[("k8s/deploy.yaml", "terminationGracePeriodSeconds")]
    assert grace.line == 10 and grace.value_s == 30 and not grace.ok
    assert by[("k8s/deploy.yaml", "preStop sleep")].value_s == 10
    assert not by[("k8s/deploy.yaml", "nginx.ingress.kubernetes.io/proxy-read-timeout")].ok
    absent = by[("k8s/deploy.yaml", "terminationGracePeriodSeconds (absent)")]
    assert absent.value_s == 30 and absent.line == 20
    assert by[("compose.yml", "stop_grace_period")].ok and by[("compose.yml", "stop_grace_period")].line == 4
    assert not by[("compose.yml", "worker: stop_grace_period (absent)")].ok
    assert all(f.file != "notes.txt" for f in report.findings)
    assert not report.ok


def test_long_enough_settings_pass(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text(
        K8S.replace("30\n", "120\n").replace('"60"', '"600"').replace("sleep 10", "sleep 5")
    )
    report = grace_report(required_grace(1000, 35), tmp_path / "d.yaml")
    first = [f for f in report.findings if "(absent)" not in f.setting]
    assert first and all(f.ok for f in first)


def test_client_timeout_shorter_than_generation_is_warned() -> None:
    report = grace_report(required_grace(2000, 35), client_timeout_s=15)
    assert report.warnings and "15" in report.warnings[0]
    assert grace_report(required_grace(100, 35), client_timeout_s=15).warnings == []


def test_bench_summary_gives_worst_p99(tmp_path: Path) -> None:
    run = tmp_path / "20261129T1-bench"
    run.mkdir()
    steps = [
        {"endpoint": "new", "tpot_ms": {"p99": 30.0}, "ttft_ms": {"p99": 400.0}},
        {"endpoint": "new", "tpot_ms": {"p99": 41.5}, "ttft_ms": {"p99": 900.0}},
        {"endpoint": "old", "tpot_ms": {"p99": 90.0}, "ttft_ms": None},
    ]
    (run / "summary.json").write_text(json.dumps({"steps": steps}))
    assert latency_from_bench(run, "new")[:2] == (41.5, 900.0)
    assert latency_from_bench(run)[0] == 90.0
    tpot, ttft, src = latency_from_bench(run, "old")  # no TTFT measured: None and said, never 0 ms
    assert (tpot, ttft) == (90.0, None) and "TTFT not measured" in src
    with pytest.raises(BadInput, match="no step"):
        latency_from_bench(run, "nope")
    with pytest.raises(BadInput, match="no such file"):
        latency_from_bench(tmp_path / "missing")


def test_nonsense_inputs_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput):
        required_grace(0, 35)
    with pytest.raises(BadInput):
        required_grace(100, -1)
    with pytest.raises(BadInput, match="no such file"):
        grace_report(required_grace(100, 35), tmp_path / "nope")


def test_an_unmeasured_ttft_stays_unknown_and_is_left_out() -> None:
    need = required_grace(2000, 35.0, None, margin_s=5)
    assert need.ttft_p99_ms is None  # not 0 ms as if measured
    assert need.required_s == pytest.approx(70 + 5) and need.server_s == pytest.approx(70)
    with_ttft = required_grace(2000, 35.0, 800.0, margin_s=5)
    assert with_ttft.required_s == pytest.approx(70 + 0.8 + 5) and with_ttft.server_s == pytest.approx(70.8)
