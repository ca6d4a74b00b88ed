"""What each verb prints with --json, by name, and its JSON Schema (`switchover schema NAME`).

A name is the command's path joined by "-": `switchover plan capacity --json` prints `plan-capacity`. `migration` is
not an output but the input every verb reads: switchover.yaml. Every entry is the pydantic model the verb dumps, so
the schema is the code's own (field descriptions included), never a copy kept by hand. Pure: no CLI here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from switchover.alerts.translate import TranslationReport
from switchover.bench.recompute import Recomputed
from switchover.bench.sweep import SweepReport
from switchover.config.migration import Migration
from switchover.demo import DemoResult
from switchover.doctor import Diagnosis, Symptom
from switchover.engines.startlog import StartlogReport
from switchover.errors import BadInput
from switchover.evidence.bench import BenchReport, Calibration
from switchover.evidence.check import CheckReport
from switchover.evidence.drill import DrillResult
from switchover.evidence.review import GateVerdict, ReviewSummary
from switchover.export.result import ExportResult
from switchover.hardware.catalog import GpuSpec
from switchover.hardware.diff import HostDiff
from switchover.hardware.fingerprint import HostFingerprint
from switchover.model.cachekey import CacheKey
from switchover.model.card import ModelCard
from switchover.model.diff import ModelDiff
from switchover.plan.canary import CanaryPlan
from switchover.plan.capacity import CapacityResult
from switchover.plan.choose import ChooseResult
from switchover.plan.grace import GraceReport
from switchover.plan.limits import KneeLimits
from switchover.plan.parallel import Layout
from switchover.plan.translate import Translation
from switchover.probe.overload import OverloadReport
from switchover.probe.report import ProbeReport
from switchover.rollout.compare import ComparisonReport
from switchover.rollout.controller import ActionResult, StatusView
from switchover.rollout.gates import GateReport
from switchover.rollout.holding import HoldingReport, Prerequisite
from switchover.testbed.processes import BedState
from switchover.verify.report import EquivalenceReport
from switchover.wire.readiness import Readiness


class AlertsAdds(BaseModel):
    """The keys `alerts translate --json` adds to the report."""

    output_file: str | None = Field(description="Where the translated rules were written (-o), or null.")
    rules_yaml: str | None = Field(description="The translated rules when not written to a file, else null.")


@dataclass(frozen=True)
class Output:
    """One JSON document a verb prints: what it is (one line), its type, and the keys the verb adds to the model's
    dump, if any."""

    what: str
    shape: Any  # a pydantic model, or a list or union of them
    adds: type[BaseModel] | None = None
    mode: Literal["validation", "serialization"] = "serialization"  # validation: a file switchover reads

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the document. A printed document (serialization) always holds every field, defaults
        included, and nothing else: the schema says so (every property required, no other key), so a reader can
        rely on each key and a renamed or dropped field fails validation."""
        schema = TypeAdapter(self.shape).json_schema(mode=self.mode)
        if self.adds is not None:
            added = self.adds.model_json_schema(mode=self.mode)
            schema["properties"].update(added["properties"])
            schema["required"] = [*schema.get("required", []), *added.get("required", [])]
        if self.mode == "serialization":
            _closed(schema)
        return schema


def _closed(node: Any) -> None:
    """Every object with declared properties: all of them required, no other key (in place, through $defs)."""
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict) and "additionalProperties" not in node:
            node["required"] = list(node["properties"])
            node["additionalProperties"] = False
        for value in node.values():
            _closed(value)
    elif isinstance(node, list):
        for value in node:
            _closed(value)


_ACTION = Output(
    "what the rollout action did: the action, the state after it, the gate report, the message", ActionResult
)
_CHECK = Output("check.json: every checklist item with its verdict and evidence, and the overall go/no-go", CheckReport)
_EXPORT = Output("the exported documents and what the target cannot express", ExportResult)

OUTPUTS: dict[str, Output] = {
    "migration": Output(
        "switchover.yaml, the migration file every verb reads (`switchover validate` checks it)",
        Migration,
        mode="validation",
    ),
    "plan-card": Output("the model card: layers, attention shape, state, experts, weights", ModelCard),
    "plan-capacity": Output("KV-cache capacity of one engine instance for a model on a GPU layout", CapacityResult),
    "plan-parallel": Output("the candidate TP/PP layouts, each with its verdict", list[Layout]),
    "plan-canary": Output(
        "old and new copies on one GPU: each copy's pool, the flags that make both start, capacity by canary %",
        CanaryPlan,
    ),
    "plan-translate": Output("the launch command for the target engine and everything lost on the way", Translation),
    "plan-choose": Output("the engines ranked for the model, GPUs and requirements, each fact cited", ChooseResult),
    "plan-grace": Output("the drain grace a request needs, and the deploy settings that are shorter", GraceReport),
    "plan-limits": Output("new's knee as the canary's weight cap and as client and gateway timeouts", KneeLimits),
    "hw-fingerprint": Output("this host's GPUs, driver, CUDA, PCIe and NVLink", HostFingerprint),
    "hw-gpus": Output("the GPU catalog that --gpu NAME accepts", list[GpuSpec]),
    "hw-diff": Output("what changes for an engine between two hosts (and kernels, engine builds)", HostDiff),
    "hw-startlog": Output("what an engine's start-up log says it chose, against what was expected", StartlogReport),
    "probe": Output("API behaviour of old and new side by side, with the breaking differences", ProbeReport),
    "overload": Output(
        "past its concurrency limit: does the engine reject, queue or slow down, and from where", OverloadReport
    ),
    "verify": Output("output equivalence of old and new: divergence, JSON validity, long inputs", EquivalenceReport),
    "diff-model": Output(
        "tokenizer, chat template, generation defaults and weights of two models, and the verdict", ModelDiff
    ),
    "cachekey": Output("a cache key and the hashes it is made of", CacheKey),
    "bench": Output("summary.json: steps, knees, A/B deltas and checks of a bench run", BenchReport),
    "bench-calibrate": Output("this client's own ceiling against a zero-work streaming server", Calibration),
    "bench-recompute": Output("a run's raw rows in another tool's metric vocabulary", Recomputed),
    "bench-sweep": Output("sweep.json: the metric against each launch parameter value", SweepReport),
    "ready": Output("one readiness check: a 1-token generation under a time budget", Readiness),
    "rollout-status": Output("the rollout's stage, weight, status and recent audit entries", StatusView),
    "rollout-gates": Output("every gate of the stage, and what follows: advance, hold or roll back", GateReport),
    "rollout-advance": _ACTION,
    "rollout-rollback": _ACTION,
    "rollout-holding": Output(
        "the rollback window: windows, old's readiness, prerequisites, the decision", HoldingReport
    ),
    "rollout-prerequisites": Output("what a rollback needs, each checked", list[Prerequisite]),
    "rollout-abandon": _ACTION,
    "rollout-reset": _ACTION,
    "rollout-watch": Output("one rollout action result per check", list[ActionResult]),
    "rollout-compare": Output("old vs new per metric from the ledger, beyond the A/A noise or not", ComparisonReport),
    "alerts-translate": Output("what happened to every rule, thresholds to re-baseline", TranslationReport, AlertsAdds),
    "export-argo": _EXPORT,
    "export-envoy": _EXPORT,
    "export-grafana": _EXPORT,
    "review-summary": Output("ratings per task type: counts and the worse-or-broken share", ReviewSummary),
    "review-gate": Output("the rating gate: pass, hold or fail, and why", GateVerdict),
    "drill": Output("timings of one rollback drill and whether it recovered within budget", DrillResult),
    "doctor": Output("the matching diagnoses (without SYMPTOM: the known symptoms)", list[Diagnosis] | list[Symptom]),
    "check": _CHECK,
    "report": _CHECK,
    "demo": Output("what the demo ran: verdict, rollout steps, where the report is", DemoResult),
    "validate": Output("the migration file as resolved (defaults filled in)", Migration),
    "testbed-up": Output("the engines the test bed started", BedState),
}

# verbs whose --json is a plain mapping, not a model: no schema to give
NOT_MODELS: dict[str, str] = {
    "gateway-reset": "the running gateway's answer to /admin/reset",
    "gateway-state": "the running gateway's answer to /admin/state",
    "metrics-adapter": "the metric mapping report of one scrape",
    "testbed-status": "one row per engine: role, engine, url, pid, state, reason",
}


def get(name: str) -> Output:
    """The output called `name` (the command's words, joined by '-' or by spaces); BadInput naming it and listing the
    valid names otherwise."""
    key = "-".join(name.split()) or name
    if key not in OUTPUTS:
        hint = "valid names: " + ", ".join(OUTPUTS)
        if key in NOT_MODELS:
            raise BadInput(
                f"no schema named {key!r}: `{key.replace('-', ' ')} --json` prints a plain mapping "
                f"({NOT_MODELS[key]}), not a model",
                hint=hint,
            )
        raise BadInput(f"no schema named {name[:60]!r}", hint=hint)  # as typed: the error line masks secrets in it
    return OUTPUTS[key]


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the output called `name`."""
    return get(name).schema()
