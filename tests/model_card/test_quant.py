"""Quantization-aware weight bytes: schemes from quantization_config, priced inventories, exact index sizes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from switchover.errors import BadInput
from switchover.model import card_from_config, load_model_card
from switchover.model.inventory import WeightGroup, weight_groups
from switchover.model.weight_bytes import group_bytes, is_quantized
from switchover.quantization import method_table, scheme_from_config
from tests.plan import configs as C

GIB = 2**30
GB = 1e9

DEEPSEEK_V3_FULL: dict[str, Any] = {
    **C.DEEPSEEK_V3,
    "q_lora_rank": 1536,
    "first_k_dense_replace": 3,
    "num_nextn_predict_layers": 1,
}
FP8_BLOCK = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}


@pytest.mark.parametrize(
    ("cfg", "billions"),
    [
        (C.LLAMA_8B, 8.03),  # meta-llama/Llama-3.1-8B: 8.03 B
        (C.QWQ_32B, 32.76),  # Qwen/QwQ-32B: 32.8 B
        (C.QWEN3_235B, 235.1),  # Qwen3-235B-A22B: 235 B
        (DEEPSEEK_V3_FULL, 671.0),  # DeepSeek-V3: 671 B without the 14 B MTP module
    ],
)
def test_parameter_inventory_matches_published_counts(cfg: dict[str, Any], billions: float) -> None:
    params = sum(g.params for g in weight_groups(cfg))
    assert params / 1e9 == pytest.approx(billions, rel=0.01)


@pytest.mark.parametrize(
    ("cfg", "qc", "published_gb"),
    [
        # Qwen/QwQ-32B-AWQ shards total 19.3 GB: 4-bit group 128 with zero points, embeddings and lm_head in bf16
        (C.QWQ_32B, {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, 19.3),
        # Qwen/Qwen3-235B-A22B-FP8: fp8 with a fp32 scale per 128x128 block, 236 GB
        (C.QWEN3_235B, FP8_BLOCK, 236.0),
        # neuralmagic Meta-Llama-3.1-8B-Instruct-FP8 (compressed-tensors, fp8 per channel): 9.08 GB
        (
            C.LLAMA_8B,
            {
                "quant_method": "compressed-tensors",
                "format": "float-quantized",
                "ignore": ["lm_head"],
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True},
                    }
                },
            },
            9.08,
        ),
    ],
)
def test_quantized_checkpoints_are_priced_close_to_their_published_size(
    cfg: dict[str, Any], qc: dict[str, Any], published_gb: float
) -> None:
    card = card_from_config({**cfg, "quantization_config": qc})
    assert card.weights.origin == "quantization-table"
    assert card.weights.warning is None
    assert card.weights.total_bytes / GB == pytest.approx(published_gb, rel=0.03)


def test_unquantized_estimate_carries_a_warning_and_says_bf16() -> None:
    w = card_from_config(C.LLAMA_8B).weights
    assert w.origin == "estimated" and w.warning is not None
    assert "2 bytes/param" in w.source


def test_unknown_method_is_noted_and_priced_at_16_bits() -> None:
    card = card_from_config({**C.LLAMA_8B, "quantization_config": {"quant_method": "zz-new-format"}})
    assert any("zz-new-format" in n for n in card.notes)
    assert card.weights.warning is not None and "unknown" in card.weights.warning
    assert card.weights.total_bytes == card_from_config(C.LLAMA_8B).weights.total_bytes


def test_mxfp4_quantizes_only_the_experts() -> None:
    gpt_oss = dict(
        architectures=["GptOssForCausalLM"],
        model_type="gpt_oss",
        num_hidden_layers=24,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        hidden_size=2880,
        intermediate_size=2880,
        num_local_experts=32,
        num_experts_per_tok=4,
        vocab_size=201088,
        max_position_embeddings=131072,
        tie_word_embeddings=False,
        quantization_config={
            "quant_method": "mxfp4",
            "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"],
        },
    )
    scheme = scheme_from_config(gpt_oss["quantization_config"])
    assert scheme is not None
    groups = weight_groups(gpt_oss)
    assert {g.role for g in groups if is_quantized(g, scheme)} == {"expert"}
    # vLLM logs "Model loading took 13.47 GiB" on H100 (llm-d empirical results): the 12.8 GiB of files plus the
    # experts' hidden dim padded from 2880 to 3072 once loaded
    assert card_from_config(gpt_oss).weights.total_bytes / GIB == pytest.approx(13.47, rel=0.01)


def test_ignore_list_keeps_named_modules_in_16_bits() -> None:
    qc = {
        "quant_method": "compressed-tensors",
        "ignore": ["re:.*self_attn.*", "lm_head"],
        "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}},
    }
    scheme = scheme_from_config(qc)
    assert scheme is not None
    attn = WeightGroup("model.layers.0.self_attn.q_proj", "attn", 4096, 4096)
    mlp = WeightGroup("model.layers.0.mlp.up_proj", "mlp", 14336, 4096)
    assert not is_quantized(attn, scheme) and is_quantized(mlp, scheme)
    assert group_bytes(attn, scheme) == 2 * 4096 * 4096
    # 4-bit data + one bf16 scale per 128 inputs
    assert group_bytes(mlp, scheme) == 14336 * 4096 / 2 + 14336 * 32 * 2


def test_gptq_group_size_minus_one_is_per_channel_and_counts_g_idx() -> None:
    scheme = scheme_from_config({"quant_method": "gptq", "bits": 8, "group_size": -1})
    assert scheme is not None and scheme.granularity == "channel"
    g = WeightGroup("model.layers.0.mlp.down_proj", "mlp", 100, 256)
    assert group_bytes(g, scheme) == 100 * 256 + 100 * 2 + 100 + 256 * 4


def test_bitsandbytes_double_quant_is_smaller_than_plain_4bit() -> None:
    plain = scheme_from_config({"quant_method": "bitsandbytes", "load_in_4bit": True})
    double = scheme_from_config(
        {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": True}
    )
    eight = scheme_from_config({"load_in_8bit": True})
    g = WeightGroup("model.layers.0.mlp.up_proj", "mlp", 4096, 4096)
    assert plain and double and eight
    assert group_bytes(g, double) < group_bytes(g, plain) < group_bytes(g, eight) < group_bytes(g, None)


@pytest.mark.parametrize(
    "qc",
    [
        {"quant_method": "awq", "bits": [4]},
        {"quant_method": "awq", "bits": 0},
        {"quant_method": "gptq", "bits": "x"},
        {"quant_method": "fp8", "weight_block_size": 5},
        {"quant_method": "fp8", "weight_block_size": [0, 0]},
        {"quant_method": "fp8", "weight_block_size": [128, 128, 1]},
        {"quant_method": ["awq"]},
        {"quant_method": "compressed-tensors", "config_groups": [1]},
        {
            "quant_method": "compressed-tensors",
            "config_groups": {"g": {"weights": {"strategy": "block", "block_structure": 7}}},
        },
        {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": -4}}}},
        {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": "z"},
        {"quant_method": "awq", "modules_to_not_convert": ["x"] * 20_000},
        "fp8",
    ],
)
def test_malformed_quantization_config_is_priced_at_16_bits_and_says_why(qc: Any) -> None:
    card = card_from_config({**C.LLAMA_8B, "quantization_config": qc})
    assert card.weights.origin == "estimated" and card.weights.warning is not None
    assert "could not be read" in card.weights.warning or "unknown" in card.weights.warning
    assert any("2 bytes/param" in n for n in card.notes)


def test_an_ignore_rule_that_could_backtrack_forever_is_not_evaluated_and_is_noted() -> None:
    qc = {
        "quant_method": "compressed-tensors",
        "ignore": ["re:(.*)*x$", "re:.*self_attn.*"],
        "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}},
    }
    scheme = scheme_from_config(qc)
    assert scheme is not None and scheme.ignore == ["re:.*self_attn.*"]
    card = card_from_config({**C.LLAMA_8B, "quantization_config": qc})  # returns at once, not after hours
    assert any("not evaluated" in n for n in card.notes)


def test_awq_matches_its_ignore_list_by_substring_as_the_table_says() -> None:
    assert method_table()["methods"]["awq"]["match"] == "substring"
    scheme = scheme_from_config({"quant_method": "awq", "modules_to_not_convert": ["self_attn"]})
    assert scheme is not None and scheme.match == "substring"
    assert not is_quantized(WeightGroup("model.layers.0.self_attn.q_proj", "attn", 64, 64), scheme)


def test_every_method_in_the_table_cites_a_source_and_aliases_resolve() -> None:
    table = method_table()
    for name, spec in table["methods"].items():
        assert spec["source"].strip(), name
    for alias, target in table["aliases"].items():
        assert target in table["methods"], alias


def _write(folder: Path, cfg: dict[str, Any], index_total: int | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    if index_total is not None:
        (folder / "model.safetensors.index.json").write_text(
            json.dumps(
                {"metadata": {"total_size": index_total}, "weight_map": {"a": "model-00001-of-00002.safetensors"}}
            )
        )
    return folder


def test_index_total_size_is_used_exactly_and_named(tmp_path: Path) -> None:
    card = load_model_card(_write(tmp_path / "m", {**C.LLAMA_8B, "quantization_config": FP8_BLOCK}, 9_083_000_000))
    assert card.weights.origin == "safetensors-index"
    assert card.weights.total_bytes == 9_083_000_000
    assert "metadata.total_size" in card.weights.source and card.weights.warning is None
    assert card.weights.scheme is not None and card.weights.scheme.startswith("fp8")


def test_index_without_total_size_is_bad_input(tmp_path: Path) -> None:
    folder = _write(tmp_path / "m", C.LLAMA_8B, None)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {}}))
    with pytest.raises(BadInput, match="total_size"):
        load_model_card(folder)


def test_mtp_layers_in_the_index_are_excluded_from_loaded_bytes(tmp_path: Path) -> None:
    stored = 688_586_727_753  # deepseek-ai/DeepSeek-V3 index metadata.total_size (includes the MTP layer)
    card = load_model_card(_write(tmp_path / "ds", {**DEEPSEEK_V3_FULL, "quantization_config": FP8_BLOCK}, stored))
    w = card.weights
    assert 0.9 * 11.5e9 < w.excluded_bytes < 1.3 * 11.5e9  # one MoE layer, ~11.5 GB in fp8
    assert w.total_bytes == stored - w.excluded_bytes and "MTP" in w.source


def test_modelopt_scheme_is_read_from_hf_quant_config(tmp_path: Path) -> None:
    folder = _write(tmp_path / "nv", C.LLAMA_8B, None)
    (folder / "hf_quant_config.json").write_text(
        json.dumps(
            {
                "producer": {"name": "modelopt"},
                "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]},
            }
        )
    )
    w = load_model_card(folder).weights
    assert w.origin == "quantization-table" and w.scheme is not None and "nvfp4" in w.scheme
    assert w.total_bytes < 0.4 * card_from_config(C.LLAMA_8B).weights.total_bytes


def test_tp_split_keeps_replicated_kv_heads_whole() -> None:
    w = card_from_config(C.QWEN3_235B).weights  # 4 KV heads: at TP8 each rank holds one whole head
    naive = w.total_bytes / 8
    assert w.per_rank_bytes(8) > naive
    assert w.per_rank_bytes(1) == w.total_bytes
    assert w.per_rank_bytes(4) == pytest.approx(w.total_bytes / 4, rel=0.001)


def test_a_tied_lm_head_stored_in_the_checkpoint_is_not_counted(tmp_path: Path) -> None:
    """Qwen3-0.6B stores 751.6 M parameters but vLLM loads 1.12 GiB: lm_head is tied to the embedding."""
    cfg = {**C.QWEN3_06B, "tie_word_embeddings": True}
    folder = tmp_path / "q"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "model.safetensors.index.json").write_text(
        json.dumps(
            {
                "metadata": {"total_size": 751_632_384 * 2},
                "weight_map": {"lm_head.weight": "model.safetensors", "model.embed_tokens.weight": "model.safetensors"},
            }
        )
    )
    w = load_model_card(folder).weights
    assert w.total_bytes / GIB == pytest.approx(1.12, abs=0.01)
    assert "tie_word_embeddings" in w.source


def test_a_tied_lm_head_in_the_shards_is_taken_out_at_its_stored_size(tmp_path: Path) -> None:
    """With the shards at hand the header gives lm_head's bytes: an fp32 copy is 4 bytes/param, not 2."""
    import numpy as np
    from safetensors.numpy import save_file

    cfg = {
        **C.LLAMA_8B,
        "num_hidden_layers": 1,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": 100,
        "intermediate_size": 128,
        "tie_word_embeddings": True,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    save_file(
        {
            "model.embed_tokens.weight": np.zeros((100, 64), dtype=np.float16),
            "lm_head.weight": np.zeros((100, 64), dtype=np.float32),
        },
        str(tmp_path / "model.safetensors"),
    )
    w = load_model_card(tmp_path).weights
    assert w.excluded_bytes == 100 * 64 * 4 and w.total_bytes == 100 * 64 * 2
    assert "estimated" not in w.source


def test_shards_the_index_does_not_list_are_not_counted_twice(tmp_path: Path) -> None:
    """Mistral repos ship consolidated.safetensors beside the indexed model-*.safetensors: same weights twice."""
    import numpy as np
    from safetensors.numpy import save_file

    (tmp_path / "config.json").write_text(json.dumps(C.LLAMA_8B))
    for name in ("model-00001-of-00001.safetensors", "consolidated.safetensors"):
        save_file({"w": np.zeros((10, 10), dtype=np.float16)}, str(tmp_path / name))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 200}, "weight_map": {"w": "model-00001-of-00001.safetensors"}})
    )
    w = load_model_card(tmp_path).weights
    assert w.origin == "safetensors" and w.total_bytes == 200 and w.files == ["model-00001-of-00001.safetensors"]
