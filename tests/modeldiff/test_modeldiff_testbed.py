"""diff-model on the test bed's models: tiny v1 vs v2 (hot switch) and SmolLM2 vs tiny (dual-track)."""

from __future__ import annotations

from switchover.model.diff import diff_models
from switchover.testbed.layout import Layout
from switchover.testing import missing as absent

LAYOUT = Layout.default()


def _need(*paths) -> None:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        absent(f"test-bed models missing (run `switchover testbed setup`): {missing}")


def test_tiny_v1_to_v2_is_a_hot_switch() -> None:
    v1, v2 = LAYOUT.tiny_hf(1), LAYOUT.tiny_hf(2)
    _need(v1, v2)
    d = diff_models(v1, v2)
    assert d.tokenizer.same and d.template.same_renders
    assert d.verdict == "hot switch possible"
    assert d.weights_same is False and d.new.params > d.old.params


def test_smollm2_to_tiny_needs_dual_track_and_shows_tokenizer_and_template_diffs() -> None:
    old, new = LAYOUT.smollm2_hf, LAYOUT.tiny_hf(1)
    _need(old, new)
    d = diff_models(old, new, budget=60)
    assert d.verdict == "dual-track required"
    assert {"tokenizer changed", "chat template changed"} <= {r.what for r in d.reasons if r.blocking}
    assert d.tokenizer.old.vocab_size == 49152 and d.tokenizer.new.vocab_size == 4096
    assert d.tokenizer.total_ratio is not None and d.tokenizer.total_ratio > 1.2
    assert d.tokenizer.over_budget  # English fits 60 tokens with SmolLM2's tokenizer, not with the tiny one
    user_only = next(r for r in d.template.renders if r.conversation == "user only")
    assert not user_only.same and "-You are a helpful AI assistant named SmolLM" in user_only.unified
    assert d.template.old_markers.default_system and d.template.new_markers.default_system is None
