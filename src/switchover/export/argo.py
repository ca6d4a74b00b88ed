"""Argo Rollouts export: a Rollout whose canary steps are the rollout's stages, and one AnalysisTemplate per
stage whose Prometheus queries are that stage's gates.

Mapping (switchover's stages → Argo): shadow → setMirrorRoute (Istio) + pause + analysis; each weighted stage
→ setWeight + pause (the gate window, or the stage's dwell time) + analysis. "Too few samples → hold"
becomes Argo's *inconclusive*: every metric has both a success and a failure condition, so a NaN or a
short sample matches neither and the Rollout pauses instead of promoting. A failed hard gate fails the
analysis (failureLimit 0) and Argo aborts to the stable version. Fields used are checked against a pinned
subset of the CRDs (schemas/argo-*.schema.json, with the upstream commit they were taken from).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Literal

import jsonschema

from switchover.config import Migration
from switchover.config.rollout import GateName, RolloutSettings, StageSpec, check_selector
from switchover.engines.profile import load_profile
from switchover.errors import BadInput
from switchover.evidence import gateway_series as mn
from switchover.export.result import ExportResult, Limitation

Metrics = Literal["gateway", "engines"]

LIMITS = [
    Limitation(
        feature="tenant-hash stickiness across stages",
        why="setWeight splits requests at random in the mesh; setHeaderRoute pins whole header values",
        instead="keep switchover's gateway (deterministic tenant buckets) in front of both Services",
    ),
    Limitation(
        feature="long-context pinning by estimated tokens",
        why="Istio routes match headers, not the token count of a body",
        instead="switchover's gateway (gateway.max_context_tokens)",
    ),
    Limitation(
        feature="fallback to old before the first byte, and the in-process kill switch",
        why="Argo acts per analysis run (minutes), not per request (seconds)",
        instead="switchover's gateway fallback and kill switch",
    ),
    Limitation(
        feature="LLM-aware shadow comparison (KS / Mann-Whitney / chi-square vs an A/A baseline)",
        why="the Prometheus provider sees aggregates only; per-request distributions need the ledger",
        instead="`switchover rollout compare --mode shadow` on the gateway ledger before promoting",
    ),
    Limitation(
        feature="'zero rollbacks in the previous stage' entry condition and abandonment criteria",
        why="an aborted Rollout restarts from the first step; human criteria are not metrics",
        instead="`switchover rollout` state and audit log",
    ),
]


def _schema(name: str) -> dict[str, Any]:
    text = resources.files("switchover.export").joinpath("schemas", name).read_text(encoding="utf-8")
    return json.loads(text)


def validate(documents: list[dict[str, Any]]) -> None:
    """Check each document against the pinned CRD subset; BadInput names the first problem."""
    schemas = {
        "Rollout": _schema("argo-rollout.schema.json"),
        "AnalysisTemplate": _schema("argo-analysistemplate.schema.json"),
    }
    for doc in documents:
        schema = schemas.get(str(doc.get("kind")))
        if schema is None:
            raise BadInput(f"unexpected kind {doc.get('kind')!r}")
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            where = ".".join(str(p) for p in e.path) or "(top)"
            raise BadInput(f"{doc['kind']} {doc['metadata']['name']}: {where}: {e.message}")


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
    return out or "stage"


def _metric(name: str, query: str, success: str, failure: str, address: str, interval: str) -> dict[str, Any]:
    return {
        "name": name,
        "interval": interval,
        "count": 1,
        "failureLimit": 0,
        "inconclusiveLimit": 0,
        "successCondition": success,
        "failureCondition": failure,
        "provider": {"prometheus": {"address": address, "query": query}},
    }


def _gateway_metrics(
    stage: StageSpec, st: RolloutSettings, address: str, window: str, selector: str
) -> list[dict[str, Any]]:
    th = st.gates
    routed = mn.new_requests(window, selector)
    out = [
        _metric("new-arm-samples", f"{routed} or vector(0)", f"result[0] >= {th.min_samples}", "false", address, window)
    ]
    for gate in stage.gates or []:
        if gate == GateName.ERROR_RATE:
            q = f"({mn.new_errors(window, selector)} or vector(0)) / clamp_min({routed}, 1)"
            out.append(
                _metric(
                    "error-rate",
                    q,
                    f"result[0] <= {th.max_error_rate}",
                    f"result[0] > {th.max_error_rate}",
                    address,
                    window,
                )
            )
        elif gate == GateName.FALLBACK_RATIO:
            q = f"({mn.fallbacks(window, selector)} or vector(0)) / clamp_min({routed}, 1)"
            out.append(
                _metric(
                    "fallback-ratio",
                    q,
                    f"result[0] <= {th.max_fallback_ratio}",
                    f"result[0] > {th.max_fallback_ratio}",
                    address,
                    window,
                )
            )
        elif gate in (GateName.TTFT_P99_RATIO, GateName.TPOT_P99_RATIO):
            hist, limit = (
                (mn.TTFT, th.max_ttft_p99_ratio)
                if gate == GateName.TTFT_P99_RATIO
                else (mn.TPOT, th.max_tpot_p99_ratio)
            )
            q = (
                f"{mn.quantile(hist, 0.99, 'new', window, selector)} / "
                f"{mn.quantile(hist, 0.99, 'old', window, selector)}"
            )
            out.append(
                _metric(
                    gate.value.replace("_", "-"), q, f"result[0] <= {limit}", f"result[0] > {limit}", address, window
                )
            )
    return out


def _engine_metrics(
    stage: StageSpec, st: RolloutSettings, migration: Migration, address: str, window: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """TTFT/TPOT ratios from the engines' own histograms, canary pods vs stable pods (pod-template hash)."""
    out, missing = [], []
    for gate in stage.gates or []:
        intent = {GateName.TTFT_P99_RATIO: "ttft", GateName.TPOT_P99_RATIO: "tpot"}.get(gate)
        if intent is None:
            missing.append(f"{gate.value}: engines export no per-arm error/fallback counts")
            continue
        new_m = load_profile(migration.new.engine.value).metric(intent)
        old_m = load_profile(migration.old.engine.value).metric(intent)
        if new_m is None or old_m is None or new_m.type != "histogram" or old_m.type != "histogram":
            missing.append(f"{gate.value}: no {intent} histogram on {'new' if new_m is None else 'old'} engine")
            continue
        limit = st.gates.max_ttft_p99_ratio if intent == "ttft" else st.gates.max_tpot_p99_ratio
        scale = {"seconds": 1.0, "milliseconds": 0.001}
        q_new = (
            f"histogram_quantile(0.99, sum by (le) (rate({new_m.name}_bucket"
            f'{{rollouts_pod_template_hash="{{{{args.canary-hash}}}}"}}[{window}]))) * '
            f"{scale.get(str(new_m.unit), 1.0)}"
        )
        q_old = (
            f"histogram_quantile(0.99, sum by (le) (rate({old_m.name}_bucket"
            f'{{rollouts_pod_template_hash="{{{{args.stable-hash}}}}"}}[{window}]))) * '
            f"{scale.get(str(old_m.unit), 1.0)}"
        )
        out.append(
            _metric(
                f"{intent}-p99-ratio",
                f"({q_new}) / ({q_old})",
                f"result[0] <= {limit}",
                f"result[0] > {limit}",
                address,
                window,
            )
        )
    return out, missing


def argo_rollout(
    migration: Migration,
    *,
    name: str = "llm",
    namespace: str | None = None,
    prometheus: str = "http://prometheus.monitoring:9090",
    metrics: Metrics = "gateway",
    workload: str | None = None,
    virtual_service: str | None = None,
    selector: str = "",
    mirror_prefix: str = "/v1/",
) -> ExportResult:
    """The Rollout and its AnalysisTemplates, validated against the pinned CRD subset."""
    try:  # spliced into every query: matchers only, or one value could rewrite what a gate measures
        check_selector(selector)
    except ValueError as exc:
        raise BadInput(f"--selector {exc}") from None
    st = migration.rollout or RolloutSettings()
    window = f"{int(st.window_s)}s"
    meta: dict[str, Any] = {"name": name} | ({"namespace": namespace} if namespace else {})
    steps: list[dict[str, Any]] = []
    templates: list[dict[str, Any]] = []
    notes: list[str] = []
    mirror_on = False
    shadow_percent = round(migration.gateway.shadow.percent) if migration.gateway else 100
    for stage in st.stages:
        if stage.shadow and not mirror_on:
            steps.append(
                {
                    "setMirrorRoute": {
                        "name": "shadow",
                        "percentage": max(1, shadow_percent),
                        "match": [{"path": {"prefix": mirror_prefix}}],
                    }
                }
            )
            mirror_on = True
        elif not stage.shadow and mirror_on:
            steps.append({"setMirrorRoute": {"name": "shadow"}})  # no match: removes the mirror route
            mirror_on = False
        if stage.weight > 0:
            steps.append({"setWeight": stage.weight})
        steps.append({"pause": {"duration": f"{int(max(st.window_s, stage.min_duration_s))}s"}})
        gates = stage.gates or []
        if stage.shadow and stage.weight == 0:
            # mirrored requests reach the canary pods as ordinary new-arm traffic: gate them like a canary
            gates = [GateName.ERROR_RATE, GateName.TTFT_P99_RATIO]
            notes.append(
                f"stage {stage.name}: the shadow distribution test is replaced by error rate and "
                "TTFT ratio of the mirrored traffic"
            )
        gated = stage.model_copy(update={"gates": gates})
        if metrics == "gateway":
            ms = _gateway_metrics(gated, st, prometheus, window, selector)
        else:
            ms, missing = _engine_metrics(gated, st, migration, prometheus, window)
            notes += [f"stage {stage.name}: {m}" for m in missing]
            if ms and not any("rollouts_pod_template_hash" in n for n in notes):
                notes.append(
                    "engine queries select pods by the label rollouts_pod_template_hash (relabel the pod "
                    "label rollouts-pod-template-hash in the scrape config)"
                )
        if not ms:
            continue
        tname = f"{name}-{_slug(stage.name)}"
        templates.append(
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "AnalysisTemplate",
                "metadata": {"name": tname} | ({"namespace": namespace} if namespace else {}),
                "spec": ({"args": [{"name": "canary-hash"}, {"name": "stable-hash"}]} if metrics == "engines" else {})
                | {"metrics": ms},
            }
        )
        analysis: dict[str, Any] = {"templates": [{"templateName": tname}]}
        if metrics == "engines":
            analysis["args"] = [
                {"name": "canary-hash", "valueFrom": {"podTemplateHashValue": "Latest"}},
                {"name": "stable-hash", "valueFrom": {"podTemplateHashValue": "Stable"}},
            ]
        steps.append({"analysis": analysis})
    if mirror_on:
        steps.append({"setMirrorRoute": {"name": "shadow"}})
    canary: dict[str, Any] = {
        "canaryService": f"{name}-canary",
        "stableService": f"{name}-stable",
        "dynamicStableScale": True,
        "trafficRouting": {
            "istio": {"virtualService": {"name": virtual_service or name, "routes": ["primary"]}},
            "managedRoutes": [{"name": "shadow"}],
        },
        "steps": steps,
    }
    rollout = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": meta,
        "spec": {
            "workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": workload or f"{name}-new"},
            "strategy": {"canary": canary},
        },
    }
    docs = [rollout, *templates]
    validate(docs)
    if metrics == "gateway":
        notes.append(
            "queries read switchover's gateway metrics: run the gateway as a sidecar in both "
            "ReplicaSets (weight 100 in canary pods, 0 in stable) so arm=new/old labels each side"
        )
    notes.append(
        "old and new must both fit while the canary runs: two resident copies of the weights "
        "(`switchover plan canary`, docs/plan.md)"
    )
    return ExportResult(target="argo", format="yaml", documents=docs, cannot_express=LIMITS, notes=notes)
