"""Fields defined once and shared (switchover.fields, the ledger's measurements, the per-arm and per-side fields):
every model that declares the concept describes it the same way in its JSON Schema, and the row shapes readers
depend on keep their fields in their order."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from switchover.evidence.bench import AbStep, StepTime
from switchover.evidence.bench_step import StepSummary
from switchover.evidence.review import GateVerdict, Pair, TypeSummary
from switchover.ledger_record import LedgerRecord, ShadowRecord, ShadowResult
from switchover.model.diff import ModelDiff
from switchover.rollout.holding import ReadyRecord
from switchover.verify.divergence import Divergence, Output
from switchover.wire.readiness import Readiness


def _described(model: type[BaseModel], field: str) -> str:
    prop = model.model_json_schema()["properties"][field]
    text = prop.get("description")
    assert text, f"{model.__name__}.{field} has no description in the schema"
    return str(text)


SHARED: list[tuple[str, list[type[BaseModel]]]] = [
    ("ttft_ms", [ShadowResult, LedgerRecord, ShadowRecord]),
    ("tpot_ms", [ShadowResult, LedgerRecord, ShadowRecord]),
    ("e2e_ms", [ShadowResult, LedgerRecord, ShadowRecord]),
    ("completion_tokens", [ShadowResult, LedgerRecord, ShadowRecord]),
    ("tokens_source", [LedgerRecord, ShadowRecord]),
    ("finish_reason", [ShadowResult, LedgerRecord, ShadowRecord, Output]),
    ("task_type", [LedgerRecord, Pair]),
    ("elapsed_ms", [Readiness, ReadyRecord]),
    ("state", [Readiness, ReadyRecord]),
    ("bad_share", [TypeSummary, GateVerdict]),
    ("bucket", [StepSummary, StepTime, AbStep]),
    ("step", [StepSummary, StepTime, AbStep]),
]


@pytest.mark.parametrize(("field", "models"), SHARED, ids=[f for f, _ in SHARED])
def test_a_shared_concept_reads_the_same_in_every_model(field: str, models: list[type[BaseModel]]) -> None:
    texts = {m.__name__: _described(m, field) for m in models}
    assert len(set(texts.values())) == 1, texts


@pytest.mark.parametrize(
    ("model", "pairs"),
    [
        (
            Pair,
            [
                ("old_answer", "new_answer"),
                ("old_status", "new_status"),
                ("old_error", "new_error"),
                ("old_finish_reason", "new_finish_reason"),
            ],
        ),
        (
            Divergence,
            [
                ("old_chars", "new_chars"),
                ("old_tokens", "new_tokens"),
                ("old_text", "new_text"),
                ("old_finish", "new_finish"),
            ],
        ),
        (ModelDiff, [("weights_old", "weights_new")]),
    ],
)
def test_an_old_new_pair_is_one_definition(model: type[BaseModel], pairs: list[tuple[str, str]]) -> None:
    for old, new in pairs:
        assert _described(model, old) == _described(model, new)


def test_the_latencies_say_their_unit_and_where_they_start() -> None:
    for field in ("ttft_ms", "tpot_ms", "e2e_ms"):
        assert ", ms:" in _described(LedgerRecord, field)
    for field in ("ttft_ms", "e2e_ms"):
        text = _described(LedgerRecord, field)
        assert "gateway had read the whole request" in text and "mirror was sent" in text


def test_the_ledger_rows_keep_their_fields_in_order() -> None:
    """The gateway writes these rows and the rollout gates, expr and reports read them: one definition per
    concept changed no name, default or position."""
    assert list(ShadowResult.model_fields) == [
        "upstream",
        "dropped",
        "status",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "completion_tokens",
        "finish_reason",
        "error",
    ]
    assert list(ShadowRecord.model_fields) == [
        "kind",
        "ts",
        "request_id",
        "path",
        "routed",
        "arm",
        "outcome",
        "status",
        "stream",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "completion_tokens",
        "tokens_source",
        "finish_reason",
        "shadow",
    ]
    fields = list(LedgerRecord.model_fields)
    assert fields[fields.index("model") : fields.index("shadowed")] == [
        "model",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "prompt_tokens",
        "completion_tokens",
        "finish_reason",
    ]
    row = ShadowResult(upstream="new")
    assert row.model_dump(exclude_none=True) == {"upstream": "new", "dropped": False}
