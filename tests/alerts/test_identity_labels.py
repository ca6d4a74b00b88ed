"""Which labels name the deployment (so a matcher on one may be dropped, with a warning) is profile data
(metrics_endpoint.identity_labels, cited), not a list in the translator."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from switchover.alerts.translate import translate_rules
from switchover.engines.profile import MetricsEndpoint, load_profile

pytestmark = pytest.mark.usefixtures("synthetic_releases")  # release data: tests/alerts/conftest.py


def _rules(tmp_path: Path) -> Path:
    p = tmp_path / "rules.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {"name": "g", "rules": [{"alert": "Busy", "expr": 'vllm:num_requests_running{model_name="m"} > 5'}]}
                ]
            }
        )
    )
    return p


def test_a_matcher_on_an_identity_label_is_dropped_with_a_warning(tmp_path: Path) -> None:
    _, report = translate_rules(_rules(tmp_path), load_profile("vllm"), load_profile("llamacpp"))
    [rule] = report.rules
    assert rule.status == "translated" and "model_name" not in rule.expr_after
    assert any(f.severity == "warning" and f.kind == "label" for f in report.findings)


def test_without_the_profile_fact_the_same_matcher_is_a_subset_and_the_rule_is_left_alone(tmp_path: Path) -> None:
    vllm = load_profile("vllm")
    bare = vllm.model_copy(
        update={"metrics_endpoint": vllm.metrics_endpoint.model_copy(update={"identity_labels": []})}
    )
    _, report = translate_rules(_rules(tmp_path), bare, load_profile("llamacpp"))
    [rule] = report.rules
    assert rule.status == "untranslated"
    assert any(f.severity == "error" and "model_name" in f.detail for f in report.findings)


def test_identity_labels_need_a_source() -> None:
    with pytest.raises(ValidationError, match="identity_source"):
        MetricsEndpoint(path="/metrics", enabled_by_default=True, identity_labels=["model_name"], source="x")
