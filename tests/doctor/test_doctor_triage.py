"""`doctor`'s "tune or swap?" triage: the four complaints behind "this engine is not good on our inputs" route to
their own answer, and only missing operations metrics says swap; "garbled after fp8" routes to per-layer
quantization before cache keys."""

from __future__ import annotations

import sys
from unittest.mock import patch

import orjson
import pytest

from switchover.cli.app import main
from switchover.doctor import SYMPTOMS, diagnose


@pytest.mark.parametrize(
    ("query", "key", "verdict"),
    [
        ("TTFT is slow", "ttft-slow", "tune"),
        ("first token takes long on our prompts", "ttft-slow", "tune"),
        ("throughput collapses on long inputs", "long-input-throughput-collapse", "tune"),
        ("long prompts kill throughput", "long-input-throughput-collapse", "tune"),
        ("the quantization format will not load", "format-will-not-load", "convert"),
        ("awq checkpoint will not load", "format-will-not-load", "convert"),
        ("no ops metrics", "no-ops-metrics", "swap"),
        ("the engine has no queue depth metric", "no-ops-metrics", "swap"),
    ],
)
def test_each_of_the_four_questions_gets_its_own_answer(query: str, key: str, verdict: str) -> None:
    best = diagnose(query)[0]
    assert best.symptom.key == key
    assert best.symptom.causes[0].verdict == verdict


def test_tune_or_swap_asks_the_four_questions_and_only_missing_metrics_warrants_a_swap() -> None:
    best = diagnose("should we switch engines or tune this one?")[0]
    assert best.symptom.key == "tune-or-swap"
    verdicts = [c.verdict for c in best.symptom.causes]
    assert verdicts == ["tune", "tune", "convert", "swap"]
    swap = best.symptom.causes[3]
    assert "metrics" in swap.cause


def test_only_missing_operations_metrics_say_swap_anywhere_in_the_table() -> None:
    swaps = {s.key for s in SYMPTOMS for c in s.causes if c.verdict == "swap"}
    assert swaps == {"tune-or-swap", "no-ops-metrics"}
    for s in SYMPTOMS:
        for c in s.causes:
            if c.verdict == "swap":
                assert "metric" in c.cause


@pytest.mark.parametrize(
    "query", ["garbled after fp8", "output is gibberish after fp8 quantization", "fp8 model outputs nonsense"]
)
def test_garbled_after_fp8_points_at_per_layer_quantization_before_cache_keys(query: str) -> None:
    best = diagnose(query)[0]
    assert best.symptom.key == "garbled-after-fp8"
    first, second = best.symptom.causes[:2]
    assert "embedding" in first.cause and "16 bits" in first.fix and "before cache keys" in first.fix
    assert "cache key" in second.cause
    assert first.source.startswith("vLLM 0.32.0") and "/blob/v0.32.0/" in first.source


def test_plain_garbled_output_still_starts_with_cache_keys() -> None:
    """Without fp8 in the words the first suspect stays the cache key (a model switch, not a quantization)."""
    assert diagnose("garbled output")[0].symptom.key == "wrong-answers-few"


def test_the_cli_prints_the_verdict_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    with patch.object(sys, "argv", ["switchover", "doctor", "tune or swap"]), pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr().out
    assert exc.value.code in (0, None)
    assert "verdict: swap engines (the one answer that warrants it)" in out
    assert out.count("verdict: tune this engine") == 2
    with patch.object(sys, "argv", ["switchover", "doctor", "no ops metrics", "--json"]), pytest.raises(SystemExit):
        main()
    assert orjson.loads(capsys.readouterr().out)[0]["symptom"]["causes"][0]["verdict"] == "swap"
