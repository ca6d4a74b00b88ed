"""The Argo export: same stages and gates, and only fields of the pinned Argo Rollouts CRD subset."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml

from switchover.errors import BadInput
from switchover.evidence import gateway_series as mn
from switchover.export.argo import argo_rollout, validate
from switchover.testing import require_tool


def _steps(doc: dict) -> list[dict]:
    return doc["spec"]["strategy"]["canary"]["steps"]


def test_steps_follow_the_rollout_stages(make_migration) -> None:
    res = argo_rollout(make_migration())
    rollout, *templates = res.documents
    steps = _steps(rollout)
    assert [s["setWeight"] for s in steps if "setWeight" in s] == [5, 20, 50, 100]
    mirror = [s["setMirrorRoute"] for s in steps if "setMirrorRoute" in s]
    assert mirror[0]["percentage"] == 10 and mirror[0]["match"] and mirror[1] == {"name": "shadow"}
    analyses = [s["analysis"]["templates"][0]["templateName"] for s in steps if "analysis" in s]
    assert (
        analyses == [t["metadata"]["name"] for t in templates] == ["llm-shadow", "llm-5", "llm-20", "llm-50", "llm-100"]
    )
    pauses = [s["pause"]["duration"] for s in steps if "pause" in s]
    assert pauses == ["300s"] * 5


def test_gates_become_metrics_with_success_and_failure_conditions(make_migration) -> None:
    _, *templates = argo_rollout(make_migration()).documents
    by_name = {t["metadata"]["name"]: {m["name"]: m for m in t["spec"]["metrics"]} for t in templates}
    small, medium = by_name["llm-5"], by_name["llm-20"]
    assert set(small) == {"new-arm-samples", "error-rate", "fallback-ratio", "ttft-p99-ratio"}
    assert "tpot-p99-ratio" in medium
    err = small["error-rate"]
    assert err["successCondition"] == "result[0] <= 0.01" and err["failureCondition"] == "result[0] > 0.01"
    assert mn.REQUESTS in err["provider"]["prometheus"]["query"]
    # too few samples: neither condition holds → inconclusive → the Rollout pauses (hold, not pass)
    samples = small["new-arm-samples"]
    assert samples["successCondition"] == "result[0] >= 40" and samples["failureCondition"] == "false"
    assert all(m["failureLimit"] == 0 and m["inconclusiveLimit"] == 0 for t in by_name.values() for m in t.values())


def test_every_document_matches_the_pinned_crd_schema_and_violations_are_caught(make_migration) -> None:
    docs = argo_rollout(make_migration()).documents
    validate(docs)
    bad = copy.deepcopy(docs)
    _steps(bad[0])[0]["setWeigth"] = 5
    with pytest.raises(BadInput, match="setWeigth"):
        validate(bad)
    bad = copy.deepcopy(docs)
    del bad[1]["spec"]["metrics"][0]["provider"]
    with pytest.raises(BadInput, match="provider"):
        validate(bad)


def test_engine_metrics_use_the_engine_profiles_and_pod_hashes(make_migration) -> None:
    res = argo_rollout(make_migration(new_engine="vllm"), metrics="engines")
    rollout, *templates = res.documents
    q = templates[1]["spec"]["metrics"][0]["provider"]["prometheus"]["query"]
    assert "vllm:time_to_first_token_seconds_bucket" in q and "{{args.canary-hash}}" in q
    args = next(s["analysis"]["args"] for s in _steps(rollout) if "analysis" in s)
    assert {a["valueFrom"]["podTemplateHashValue"] for a in args} == {"Latest", "Stable"}
    assert any("error_rate" in n for n in res.notes)  # what engines cannot give is said, not dropped


def test_engines_without_a_ttft_histogram_are_reported_missing(make_migration) -> None:
    res = argo_rollout(make_migration(new_engine="llamacpp"), metrics="engines")
    assert len(res.documents) == 1
    assert any("no ttft histogram on new engine" in n for n in res.notes)


def test_limitations_are_listed_in_the_rendered_yaml(make_migration) -> None:
    res = argo_rollout(make_migration())
    text = res.render()
    assert "token" in text and "stickiness" in text and text.startswith("# generated")
    assert len(list(yaml.safe_load_all(text))) == len(res.documents)


def test_every_promql_query_parses_with_promtool(make_migration, tmp_path: Path) -> None:
    promtool = require_tool("promtool", hint="Debian package prometheus; PromQL syntax not checked")
    exprs = []
    for metrics, engine in (("gateway", "llamacpp"), ("engines", "vllm")):
        for t in argo_rollout(make_migration(new_engine=engine), metrics=metrics).documents[1:]:
            for m in t["spec"]["metrics"]:
                exprs.append(
                    m["provider"]["prometheus"]["query"]
                    .replace("{{args.canary-hash}}", "x")
                    .replace("{{args.stable-hash}}", "y")
                )
    rules = {"groups": [{"name": "g", "rules": [{"record": f"r{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    p = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
