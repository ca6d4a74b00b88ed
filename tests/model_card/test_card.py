"""ModelCard: layouts detected from config fields, exact weights from headers, refusals that name fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from switchover.errors import BadInput, ExitCode
from switchover.model import LayerKind, card_from_config, load_model_card
from switchover.model.sizing import read_safetensors_header
from tests.plan import configs as C


@pytest.mark.parametrize(
    ("cfg", "head_dim", "kv_heads", "family"),
    [
        (C.LLAMA_8B, 128, 8, "dense"),
        (C.QWEN3_06B, 128, 8, "dense"),  # not hidden/heads = 64
        (C.MISTRAL_SMALL_3, 128, 8, "dense"),  # not 5120/32 = 160
        (C.QWQ_32B, 128, 8, "dense"),  # use_sliding_window false: the 32768 window is ignored
        (C.DEEPSEEK_V3, 192, 1, "mla"),  # nope 128 + rope 64
        (C.GEMMA2_9B, 256, 8, "sliding"),
        (C.QWEN3_NEXT, 256, 2, "hybrid"),
        (C.JAMBA, 128, 8, "hybrid"),
    ],
)
def test_head_dim_kv_heads_and_family_come_from_the_config(
    cfg: dict[str, Any], head_dim: int, kv_heads: int, family: str
) -> None:
    card = card_from_config(cfg)
    assert card.attention.head_dim == head_dim
    assert card.attention.num_kv_heads == kv_heads
    assert card.family == family


def test_mha_when_kv_heads_absent_is_noted() -> None:
    cfg = {k: v for k, v in C.LLAMA_8B.items() if k != "num_key_value_heads"}
    card = card_from_config(cfg)
    assert card.attention.num_kv_heads == 32
    assert any("multi-head" in n for n in card.notes)


def test_head_dim_fallback_is_noted_not_silent() -> None:
    card = card_from_config(C.QWQ_32B)
    assert card.attention.head_dim == 128 and card.attention.head_dim_from.startswith("hidden_size")
    assert any("head_dim absent" in n for n in card.notes)


def test_gemma2_alternates_sliding_and_global_layers() -> None:
    card = card_from_config(C.GEMMA2_9B)
    assert card.layers[:4] == [LayerKind.SLIDING, LayerKind.FULL, LayerKind.SLIDING, LayerKind.FULL]
    assert card.count(LayerKind.SLIDING) == 21 and card.attention.sliding_window == 4096


def test_gemma3_text_config_is_unwrapped_with_five_local_to_one_global() -> None:
    card = card_from_config(C.GEMMA3_TEXT)
    assert card.num_layers == 48
    assert card.count(LayerKind.FULL) == 8 and card.count(LayerKind.SLIDING) == 40
    assert card.layers[5] == LayerKind.FULL


def test_mistral_v01_slides_on_every_layer() -> None:
    card = card_from_config(C.MISTRAL_V01)
    assert set(card.layers) == {LayerKind.SLIDING}


def test_qwen3_next_has_12_full_attention_layers_and_gdn_state() -> None:
    card = card_from_config(C.QWEN3_NEXT)
    assert card.count(LayerKind.FULL) == 12 and card.count(LayerKind.LINEAR) == 36
    assert card.state is not None and card.state.kind == "gdn"
    assert card.state.ssm_elements == 32 * 128 * 128
    assert card.state.conv_elements == 3 * (2 * 16 * 128 + 32 * 128)
    assert card.moe is not None and card.moe.num_experts == 512


def test_layer_types_list_drives_qwen35_layout() -> None:
    card = card_from_config(C.QWEN35_27B_SHAPE)
    assert card.count(LayerKind.LINEAR) == 48 and card.count(LayerKind.FULL) == 16


def test_jamba_attention_period_and_mamba1_state() -> None:
    card = card_from_config(C.JAMBA)
    assert [i for i, k in enumerate(card.layers) if k == LayerKind.FULL] == [4, 12, 20, 28]
    assert card.state is not None and card.state.kind == "mamba1"
    assert card.state.ssm_elements == 8192 * 16 and card.state.conv_elements == 3 * 8192


def test_nemotron_h_pattern_maps_mamba_attention_and_mlp_layers() -> None:
    card = card_from_config(C.NEMOTRON_H_SHAPE)
    assert card.layers == [
        LayerKind.MAMBA,
        LayerKind.NONE,
        LayerKind.MAMBA,
        LayerKind.FULL,
        LayerKind.MAMBA,
        LayerKind.NONE,
        LayerKind.MAMBA,
        LayerKind.NONE,
    ]
    assert card.state is not None and card.state.kind == "mamba2"
    assert card.state.ssm_elements == 128 * 64 * 128


def test_moe_experts_are_read() -> None:
    card = card_from_config(C.DEEPSEEK_V3)
    assert card.moe is not None and (card.moe.num_experts, card.moe.experts_per_token) == (256, 8)
    assert card.moe.shared_experts == 1


def test_estimated_params_for_llama_8b_are_close_to_8b() -> None:
    card = card_from_config(C.LLAMA_8B)
    assert card.weights.origin == "estimated"
    assert abs(card.weights.params / 8.03e9 - 1) < 0.01


@pytest.mark.parametrize(
    ("drop", "named"),
    [
        ("num_attention_heads", "num_attention_heads"),
        ("num_hidden_layers", "num_hidden_layers"),
        ("hidden_size", "hidden_size"),
    ],
)
def test_missing_core_fields_are_refused_by_name(drop: str, named: str) -> None:
    cfg = {k: v for k, v in C.LLAMA_8B.items() if k != drop}
    with pytest.raises(BadInput) as info:
        card_from_config(cfg)
    assert named in info.value.message
    assert info.value.exit_code == ExitCode.BAD_INPUT


def test_mla_without_rope_dim_is_refused() -> None:
    cfg = {k: v for k, v in C.DEEPSEEK_V3.items() if k != "qk_rope_head_dim"}
    with pytest.raises(BadInput, match="qk_rope_head_dim"):
        card_from_config(cfg)


def test_hybrid_without_state_fields_names_them() -> None:
    cfg = {k: v for k, v in C.QWEN3_NEXT.items() if k not in ("linear_num_value_heads", "linear_conv_kernel_dim")}
    with pytest.raises(BadInput) as info:
        card_from_config(cfg)
    assert "linear_num_value_heads" in info.value.message and "linear_conv_kernel_dim" in info.value.message


def test_recurrent_fields_without_a_layout_are_refused_not_guessed() -> None:
    cfg = {**C.LLAMA_8B, "architectures": ["FancyHybridForCausalLM"], "mamba_d_state": 16}
    with pytest.raises(BadInput, match="no layer layout"):
        card_from_config(cfg)


def test_unknown_layer_type_is_refused() -> None:
    cfg = {**C.LLAMA_8B, "layer_types": ["full_attention"] * 31 + ["retention"]}
    with pytest.raises(BadInput, match="retention"):
        card_from_config(cfg)


def test_malformed_config_json_names_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{\n  "num_hidden_layers": 2,\n')
    with pytest.raises(BadInput, match="malformed JSON at line"):
        load_model_card(tmp_path)


def test_non_object_config_and_bad_values_are_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(BadInput, match="JSON object"):
        load_model_card(tmp_path)
    with pytest.raises(BadInput, match="num_hidden_layers must be a positive integer"):
        card_from_config({**C.LLAMA_8B, "num_hidden_layers": "32"})


def test_missing_path_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no such file"):
        load_model_card(tmp_path / "nope")


def _tiny_dir(tmp_path: Path) -> Path:
    from safetensors.numpy import save_file

    cfg = {
        **C.LLAMA_8B,
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": 100,
        "intermediate_size": 128,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    save_file(
        {"a": np.zeros((100, 64), dtype=np.float16), "b": np.zeros((3, 5), dtype=np.float32)},
        str(tmp_path / "model-00001-of-00002.safetensors"),
    )
    save_file({"c": np.zeros((7,), dtype=np.int8)}, str(tmp_path / "model-00002-of-00002.safetensors"))
    return tmp_path


def test_safetensors_headers_give_exact_bytes_and_params(tmp_path: Path) -> None:
    card = load_model_card(_tiny_dir(tmp_path))
    w = card.weights
    assert w.origin == "safetensors"
    assert w.bytes_by_dtype == {"F16": 100 * 64 * 2, "F32": 15 * 4, "I8": 7}
    assert w.params == 6400 + 15 + 7
    assert w.total_bytes == 12800 + 60 + 7
    assert len(w.files) == 2


def test_corrupt_safetensors_is_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "x.safetensors"
    bad.write_bytes(b"\xff" * 8 + b"junk")
    with pytest.raises(BadInput, match="implausible"):
        read_safetensors_header(bad)


def test_gguf_metadata_and_tensor_table_are_read(tmp_path: Path) -> None:
    import gguf

    path = tmp_path / "m.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(3)
    writer.add_embedding_length(64)
    writer.add_head_count(8)
    writer.add_head_count_kv(2)
    writer.add_context_length(4096)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tensor("token_embd.weight", np.zeros((10, 64), dtype=np.float16))
    writer.add_tensor("output_norm.weight", np.zeros((64,), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    card = load_model_card(path)
    assert (card.num_layers, card.attention.num_heads, card.attention.num_kv_heads) == (3, 8, 2)
    assert card.attention.head_dim == 8 and card.max_position_embeddings == 4096
    assert card.weights.origin == "gguf" and card.weights.params == 640 + 64
    assert card.weights.total_bytes == 640 * 2 + 64 * 4
    assert card.dtype == "f16"
    from switchover.model.source import gguf_fields

    assert gguf_fields(path)["llama.block_count"] == 3  # the card reads the one cached GGUF reader's fields


def test_garbage_gguf_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "x.gguf"
    path.write_bytes(b"GGUFnot-really")
    with pytest.raises(BadInput, match="not a readable GGUF"):
        load_model_card(path)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("intermediate_size", "x"),
        ("head_dim", [128]),
        ("vocab_size", float("nan")),
        ("sliding_window", "4096"),
        ("max_position_embeddings", -1),
        ("num_experts", {"a": 1}),
        ("num_nextn_predict_layers", "1"),
        ("global_head_dim", 1.5),
        ("attn_layer_period", 0),
        ("mamba_expand", "2"),
        ("architectures", "Llama"),
        ("layer_types", [{"a": 1}] * 32),
        ("mlp_only_layers", 5),
        ("vocab_size", 10**400),
        ("model_type", 7),
        ("torch_dtype", ["bf16"]),
    ],
)
def test_config_fields_of_the_wrong_type_are_bad_input_naming_the_field(key: str, value: Any) -> None:
    with pytest.raises(BadInput, match=key):
        card_from_config({**C.LLAMA_8B, key: value})


def test_a_config_with_absurdly_many_layers_is_refused_before_any_loop() -> None:
    with pytest.raises(BadInput, match="num_hidden_layers"):
        card_from_config({**C.LLAMA_8B, "num_hidden_layers": 10**12})


def test_vision_config_sizes_are_checked_too() -> None:
    with pytest.raises(BadInput, match=r"vision_config\.depth"):
        card_from_config({**C.LLAMA_8B, "vision_config": {"hidden_size": 1024, "depth": "32"}})


def test_integral_floats_in_a_config_are_accepted() -> None:
    card = card_from_config({**C.LLAMA_8B, "intermediate_size": 14336.0, "vocab_size": 128256.0})
    assert card.mlp_width == 14336


def test_deeply_nested_config_json_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(BadInput):
        load_model_card(tmp_path)


def _safetensors(path: Path, header: Any, data: bytes = b"") -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)
    return path


@pytest.mark.parametrize(
    "entry",
    [
        "x",
        {"dtype": "F16", "shape": [2]},
        {"dtype": 5, "shape": [2], "data_offsets": [0, 4]},
        {"dtype": "F16", "shape": ["2"], "data_offsets": [0, 4]},
        {"dtype": "F16", "shape": [2], "data_offsets": [4, 0]},
        {"dtype": "F16", "shape": [2], "data_offsets": [-4, 4]},
        {"dtype": "F16", "shape": [2], "data_offsets": [0, 10**9]},
    ],
)
def test_garbage_safetensors_entries_are_bad_input_for_the_card_and_the_hash(tmp_path: Path, entry: Any) -> None:
    from switchover.model.weights import weights_hash

    (tmp_path / "config.json").write_text(json.dumps(C.LLAMA_8B))
    _safetensors(tmp_path / "model.safetensors", {"t": entry}, b"\0" * 4)
    with pytest.raises(BadInput, match="data_offsets"):
        load_model_card(tmp_path)
    with pytest.raises(BadInput, match="data_offsets"):
        weights_hash(tmp_path)


def test_a_header_length_past_the_file_or_a_nested_header_is_bad_input(tmp_path: Path) -> None:
    short = tmp_path / "a.safetensors"
    short.write_bytes((200).to_bytes(8, "little") + b"{}")
    with pytest.raises(BadInput, match="implausible"):
        read_safetensors_header(short)
    deep = tmp_path / "b.safetensors"
    raw = b"[" * 50_000 + b"]" * 50_000
    deep.write_bytes(len(raw).to_bytes(8, "little") + raw)
    with pytest.raises(BadInput, match="nested"):
        read_safetensors_header(deep)


def test_an_index_whose_weight_map_is_not_names_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(C.LLAMA_8B))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 10}, "weight_map": {"a": ["x.safetensors"]}})
    )
    with pytest.raises(BadInput, match="weight_map"):
        load_model_card(tmp_path)


def test_a_hybrid_pattern_that_does_not_match_the_layers_is_refused_even_beside_layer_types() -> None:
    cfg = {**C.QWEN3_NEXT, "hybrid_override_pattern": "M*"}
    with pytest.raises(BadInput, match="hybrid_override_pattern"):
        card_from_config(cfg)
