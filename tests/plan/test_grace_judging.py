"""plan/grace.py judges deploy settings and client timeouts without touching the disk (grace_files.py reads)."""

from __future__ import annotations

import yaml

from switchover.plan.grace import deploy_findings, required_grace, timeout_warning

POD = """
spec:
  terminationGracePeriodSeconds: 30
  containers:
    - name: engine
      lifecycle: {preStop: {exec: {command: ["sh", "-c", "sleep 20"]}}}
"""


def test_deploy_findings_judge_parsed_documents_against_the_need() -> None:
    need = required_grace(max_tokens=2000, tpot_p99_ms=35, margin_s=5)  # 70 s + 5 s
    found = {f.setting: f for f in deploy_findings(list(yaml.compose_all(POD)), need, "pod.yaml")}
    assert found["terminationGracePeriodSeconds"].value_s == 30 and not found["terminationGracePeriodSeconds"].ok
    assert found["preStop sleep"].value_s == 20 and not found["preStop sleep"].ok
    assert {f.file for f in found.values()} == {"pod.yaml"}


def test_a_client_timeout_shorter_than_the_generation_is_a_warning_and_a_longer_one_is_not() -> None:
    need = required_grace(max_tokens=2000, tpot_p99_ms=35)  # 70 s of generation
    assert timeout_warning(need, 60) is not None and "60 s < 70 s" in (timeout_warning(need, 60) or "")
    assert timeout_warning(need, 120) is None
