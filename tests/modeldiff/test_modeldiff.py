"""diff-model pieces on small generated models: tokenizer, template, generation defaults, weights, verdict, keys."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from switchover.errors import BadInput
from switchover.model.cachekey import cachekey, model_hashes
from switchover.model.diff import diff_models
from switchover.model.generation import diff_generation, effective, load_generation
from switchover.model.template import diff_templates, load_template, markers
from switchover.model.tokenizer import diff_tokenizers, load_corpus, load_tokenizer
from switchover.model.weights import weights_hash
from tests.modeldiff.conftest import DEFAULT_SYSTEM, build_tokenizer, write_safetensors


def test_same_tokenizer_has_the_same_fingerprint_and_no_count_shift(models) -> None:
    a, b = models("a"), models("b", seed=1)
    d = diff_tokenizers(load_tokenizer(a), load_tokenizer(b))
    assert d.same and d.total_ratio == 1.0 and d.only_new_count == 0 and not d.special_changes


def test_smaller_vocabulary_shifts_counts_and_overflows_the_budget(models) -> None:
    a, b = models("a", vocab=400), models("b", vocab=280)
    ta, tb = load_tokenizer(a), load_tokenizer(b)
    d = diff_tokenizers(
        ta,
        tb,
        corpus=[("code", "def add(a, b):\n    return a + b\n" * 4)],
        budget=ta.count("def add(a, b):\n    return a + b\n" * 4),
    )
    assert not d.same and d.only_old_count > 0
    assert d.counts[0].new > d.counts[0].old and d.counts[0].over_budget and d.over_budget == ["1"]


def test_gguf_and_hf_of_the_same_tokenizer_share_the_fingerprint(models, tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    hf = models("a")
    tj = json.loads((hf / "tokenizer.json").read_text())
    vocab = tj["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = [" ".join(m) if isinstance(m, list) else m for m in tj["model"]["merges"]]
    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(2048)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_merges(merges)
    w.add_token_types([3 if t.startswith("<|") else 1 for t in tokens])
    w.add_bos_token_id(vocab["<|endoftext|>"])
    w.add_eos_token_id(vocab["<|im_end|>"])
    w.add_chat_template((hf / "chat_template.jinja").read_text())
    w.add_tensor("layer0.w", np.ones((4, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    g, h = load_tokenizer(path), load_tokenizer(hf)
    assert g.info.fingerprint == h.info.fingerprint
    assert g.count("hello world") == h.count("hello world")
    assert load_template(path).sha256 == load_template(hf).sha256
    assert weights_hash(path).format == "gguf" and weights_hash(path).tensors == 1


def test_template_diff_shows_an_injected_default_system_prompt(models) -> None:
    a, b = models("a"), models("b", template=DEFAULT_SYSTEM)
    d = diff_templates(load_template(a), load_template(b))
    assert not d.same_renders
    changed = {r.conversation for r in d.renders if not r.same}
    assert changed == {"user only", "chinese"}
    assert "+<|im_start|>system" in next(r.unified for r in d.renders if r.conversation == "user only")
    assert d.new_markers.default_system and "You are Bot." in d.new_markers.default_system
    assert d.old_markers.default_system is None and d.old_markers.system == "own turn"


def test_markers_tell_a_dropped_system_prompt_apart() -> None:
    from switchover.model.template import Template

    t = Template(
        source="x",
        text="{% for m in messages %}{% if m['role'] != 'system' %}[{{ m['role'] }}]"
        "{{ m['content'] }}{% endif %}{% endfor %}",
    )
    assert markers(t).system == "dropped"


def test_effective_defaults_follow_the_engine_profile_and_the_model(models) -> None:
    m = load_generation(models("a", temperature=0.6))
    assert m.fields == {"temperature": 0.6}
    assert effective(m, "vllm")["temperature"] == (0.6, "model")  # --generation-config auto
    assert effective(m, "tgi")["temperature"][1] == "engine default"  # TGI does not apply it
    d = diff_generation(m, load_generation(models("b")), "vllm", "vllm")
    assert d.file_changes == {"temperature": (0.6, None)}
    row = next(r for r in d.engines["vllm"] if r.field == "temperature")
    assert row.changed and row.old == 0.6 and row.new == 1.0


def test_weights_hash_ignores_sharding_and_sees_any_changed_value(tmp_path: Path) -> None:
    arrs = {"a": np.arange(16.0).reshape(4, 4), "b": np.ones((3,))}
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    (one / "config.json").write_text("{}"), (two / "config.json").write_text("{}")
    write_safetensors(one / "model.safetensors", arrs)
    write_safetensors(two / "model-00001.safetensors", {"b": arrs["b"]})
    write_safetensors(two / "model-00002.safetensors", {"a": arrs["a"]})
    assert weights_hash(one).hash == weights_hash(two).hash
    assert weights_hash(one).params == 19
    changed = dict(arrs, b=np.array([1.0, 1.0, 1.5]))
    write_safetensors(one / "model.safetensors", changed)
    assert weights_hash(one).hash != weights_hash(two).hash


def test_truncated_or_missing_weights_are_bad_input(tmp_path: Path) -> None:
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text("{}")
    with pytest.raises(BadInput, match=r"no \*\.safetensors"):
        weights_hash(d)
    write_safetensors(d / "model.safetensors", {"a": np.ones((64, 64))})
    raw = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(raw[:-100])
    with pytest.raises(BadInput, match="truncated"):
        weights_hash(d)


def test_verdict_hot_switch_for_same_tokenizer_and_template(models) -> None:
    d = diff_models(models("v1", seed=1), models("v2", seed=2))
    assert d.verdict == "hot switch possible" and d.weights_same is False
    assert [r.what for r in d.reasons if r.blocking] == []


def test_verdict_dual_track_names_each_blocking_reason(models) -> None:
    d = diff_models(models("old", vocab=400), models("new", vocab=280, template=DEFAULT_SYSTEM, ctx=4096, layers=8))
    assert d.verdict == "dual-track required"
    blocking = {r.what for r in d.reasons if r.blocking}
    assert blocking == {
        "tokenizer changed",
        "chat template changed",
        "context length changed",
        "parameter scale changed",
    }


def test_cachekey_changes_with_template_weights_and_prompt(models) -> None:
    a, b = models("a"), models("b", template=DEFAULT_SYSTEM)
    ka = cachekey("hello", model_id="m", model_path=a)
    assert ka.key.startswith("m|") and len(ka.key.split("|")) == 5
    assert cachekey("hello", model_id="m", model_path=b).template != ka.template
    assert cachekey("hello", model_id="m", model_path=b).tokenizer == ka.tokenizer
    assert cachekey("hello!", model_id="m", model_path=a).prompt != ka.prompt
    assert model_hashes(a).weights == weights_hash(a).hash


def test_unreadable_model_paths_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no such file"):
        load_tokenizer(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match=r"no tokenizer\.json"):
        load_tokenizer(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "tokenizer.json").write_text("{")
    with pytest.raises(BadInput, match="malformed JSON"):
        load_tokenizer(bad)
    (tmp_path / "x.gguf").write_bytes(b"not a gguf")
    with pytest.raises(BadInput, match="GGUF"):
        load_tokenizer(tmp_path / "x.gguf")


def test_corpus_files_jsonl_and_text(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text('{"text": "a", "kind": "zh"}\n{"prompt": "b"}\n')
    assert load_corpus(f) == [("zh", "a"), ("user", "b")]
    t = tmp_path / "c.txt"
    t.write_text("one\n\ntwo\nlines\n")
    assert load_corpus(t) == [("user", "one"), ("user", "two\nlines")]
    f.write_text('{"nope": 1}\n')
    with pytest.raises(BadInput, match="line 1"):
        load_corpus(f)


def test_build_tokenizer_helper_is_deterministic() -> None:
    assert build_tokenizer(300).get_vocab() == build_tokenizer(300).get_vocab()


def test_diff_model_prints_bracketed_tokens_and_template_text_instead_of_parsing_them(models) -> None:
    """Mistral's [INST]/[/INST] markers are rich closing tags: printed raw they crashed the whole report."""
    from typer.testing import CliRunner

    from switchover.cli.app import app

    old = models("old")
    new = models("new", template="{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}")
    (new / "tokenizer_config.json").write_text(json.dumps({"bos_token": "[/INST]", "eos_token": "<|im_end|>"}))
    res = CliRunner().invoke(app, ["diff-model", str(old), str(new), "--no-weights"])
    assert not isinstance(res.exception, Exception) or isinstance(res.exception, SystemExit), res.exception
    assert "[/INST]" in res.stdout


def test_a_chat_template_file_that_is_binary_or_a_device_is_one_clear_error(tmp_path: Path) -> None:
    """chat_template.jinja is read bounded and as UTF-8 (binary was a UnicodeDecodeError, /dev/zero endless)."""
    (tmp_path / "config.json").write_text("{}")
    jinja = tmp_path / "chat_template.jinja"
    jinja.write_bytes(b"\xff\xfe\x00bin")
    with pytest.raises(BadInput, match="not UTF-8"):
        load_template(tmp_path)
    jinja.unlink()
    jinja.symlink_to("/dev/zero")
    with pytest.raises(BadInput, match="larger than"):
        load_template(tmp_path)
