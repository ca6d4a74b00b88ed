"""Checkpoint integrity: missing shards and headers that contradict config.json are errors (exit 1), with the
shard, layer or field named; consistent checkpoints pass every check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from switchover.errors import CheckFailed, ExitCode
from switchover.model import load_model_card
from switchover.model.integrity import checkpoint_integrity

TINY: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": 2,
    "hidden_size": 16,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
    "intermediate_size": 32,
    "vocab_size": 40,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
BED = Path.home() / ".cache/switchover/testbed/models-r1"


def _tensors(
    cfg: dict[str, Any], layers: int | None = None, hidden: int | None = None, vocab: int | None = None
) -> dict[str, np.ndarray]:
    """A Llama checkpoint's tensors for `cfg` (a layer count, hidden size or vocabulary can be made to differ)."""
    h, v, inter = hidden or cfg["hidden_size"], vocab or cfg["vocab_size"], cfg["intermediate_size"]
    q, kv = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]
    out = {
        "model.embed_tokens.weight": np.zeros((v, h), np.float16),
        "lm_head.weight": np.zeros((v, h), np.float16),
        "model.norm.weight": np.zeros((h,), np.float16),
    }
    for i in range(cfg["num_hidden_layers"] if layers is None else layers):
        p = f"model.layers.{i}."
        out |= {
            p + "self_attn.q_proj.weight": np.zeros((q, h), np.float16),
            p + "self_attn.k_proj.weight": np.zeros((kv, h), np.float16),
            p + "self_attn.v_proj.weight": np.zeros((kv, h), np.float16),
            p + "self_attn.o_proj.weight": np.zeros((h, q), np.float16),
            p + "mlp.gate_proj.weight": np.zeros((inter, h), np.float16),
            p + "mlp.up_proj.weight": np.zeros((inter, h), np.float16),
            p + "mlp.down_proj.weight": np.zeros((h, inter), np.float16),
            p + "input_layernorm.weight": np.zeros((h,), np.float16),
            p + "post_attention_layernorm.weight": np.zeros((h,), np.float16),
        }
    return out


def _checkpoint(
    folder: Path,
    tensors: dict[str, np.ndarray],
    cfg: dict[str, Any] = TINY,
    shards: int = 1,
    keep: tuple[int, ...] | None = None,
) -> Path:
    """Write config.json and `shards` safetensors files (+ an index when sharded); `keep` lists the shards written."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    names = sorted(tensors)
    if shards == 1:
        save_file(tensors, str(folder / "model.safetensors"))
        return folder
    files = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    weight_map = {n: files[i % shards] for i, n in enumerate(names)}
    for i, f in enumerate(files):
        if keep is None or i in keep:
            save_file({n: tensors[n] for n in names if weight_map[n] == f}, str(folder / f))
    total = sum(t.nbytes for t in tensors.values())
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )
    return folder


def _severities(folder: Path, cfg: dict[str, Any] = TINY) -> dict[str, str]:
    report = checkpoint_integrity(folder, cfg)
    assert report is not None
    return {f.check: f.severity for f in report.findings}


def test_a_consistent_sharded_checkpoint_passes_every_check(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / "m", _tensors(TINY), shards=3)
    assert _severities(folder) == {"shards": "ok", "layers": "ok", "hidden_size": "ok", "vocab": "ok", "params": "ok"}
    card = load_model_card(folder)
    assert card.integrity is not None and not card.integrity.errors


def test_a_shard_named_in_the_index_but_missing_is_an_error_naming_it(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / "m", _tensors(TINY), shards=3, keep=(0, 2))
    with pytest.raises(CheckFailed, match=r"1 of the 3 shard\(s\).*model-00002-of-00003\.safetensors") as info:
        load_model_card(folder)
    assert info.value.exit_code == ExitCode.FAILED


def test_an_index_without_any_shard_on_disk_is_sized_from_the_index_and_said_unchecked(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / "m", _tensors(TINY), shards=2, keep=())
    card = load_model_card(folder)
    assert card.weights.origin == "safetensors-index"
    assert _severities(folder) == {"shards": "unchecked"}


def test_a_tensor_the_index_places_in_a_shard_that_lacks_it_is_an_error(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / "m", _tensors(TINY), shards=2)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.layers.9.mlp.up_proj.weight"] = "model-00001-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckFailed, match=r"model\.layers\.9\.mlp\.up_proj\.weight"):
        load_model_card(folder)


@pytest.mark.parametrize(
    ("change", "check", "message"),
    [
        ({"layers": 1}, "layers", r"1 decoder layer\(s\) for num_hidden_layers 2; layers 1 have no tensors"),
        ({"hidden": 24}, "hidden_size", r"\[40, 24\]: 24 does not match config\.json hidden_size 16"),
        ({"vocab": 48}, "vocab", r"48 does not match config\.json vocab_size 40"),
    ],
)
def test_headers_that_contradict_the_config_are_an_error_naming_the_field(
    tmp_path: Path, change: dict[str, int], check: str, message: str
) -> None:
    folder = _checkpoint(tmp_path / "m", _tensors(TINY, **change))
    assert _severities(folder)[check] == "error"
    with pytest.raises(CheckFailed, match=message):
        load_model_card(folder)


def test_extra_layers_and_a_parameter_drift_are_warnings_in_the_notes(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / "m", _tensors(TINY, layers=3))
    card = load_model_card(folder)
    assert _severities(folder)["layers"] == "warning" and _severities(folder)["params"] == "warning"
    assert any("3 decoder layers for num_hidden_layers 2" in n for n in card.notes)
    assert any("parameters in the headers" in n and "+" in n for n in card.notes)


def test_mtp_layers_the_config_declares_are_not_extra(tmp_path: Path) -> None:
    cfg = {**TINY, "num_nextn_predict_layers": 1}
    folder = _checkpoint(tmp_path / "m", _tensors(cfg, layers=3), cfg=cfg)
    assert _severities(folder, cfg)["layers"] == "ok"


def test_a_gap_in_the_layer_numbers_is_an_error_even_at_the_right_count(tmp_path: Path) -> None:
    tensors = _tensors(TINY, layers=3)
    for name in [n for n in tensors if n.startswith("model.layers.1.")]:
        del tensors[name]
    folder = _checkpoint(tmp_path / "m", tensors)
    assert _severities(folder)["layers"] == "error"


def test_unknown_tensor_names_leave_the_checks_unchecked_not_passed(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / "m", {"transformer.h.0.attn.weight": np.zeros((4, 4), np.float16)})
    sev = _severities(folder)
    assert sev["layers"] == "unchecked" and sev["hidden_size"] == "unchecked"


def test_plan_card_exits_1_on_a_missing_shard(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / "m", _tensors(TINY), shards=2, keep=(1,))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "switchover", "plan", "card", "-m", str(folder)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "model-00001-of-00002.safetensors" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("name", ["tiny-llama-v1", "tiny-llama-v2", "smollm2-135m-instruct-hf"])
def test_the_test_beds_real_checkpoints_pass_every_check(name: str) -> None:
    folder = BED / name
    if not (folder / "config.json").exists():
        pytest.skip(f"test bed model {name} not installed (scripts/testbed.py)")
    card = load_model_card(folder)
    assert card.integrity is not None
    assert {f.severity for f in card.integrity.findings} == {"ok"}, card.integrity.findings
