"""The config.json fields the planner reads as numbers or lists, checked once before any arithmetic.

A config.json comes from a folder or a Hugging Face repo someone else wrote: a size given as a string, a list, NaN,
a negative or absurd number, or a period of 0 must be bad input naming the field (exit 2), never a TypeError,
a ZeroDivisionError or a layer loop over 10^12 layers.
"""

from __future__ import annotations

import math
from typing import Any

from switchover.errors import BadInput

MAX_LAYERS = 100_000  # the deepest shipped decoders have a few hundred layers; the planner loops over them
MAX_FIELD = 1 << 40  # no size, count or vocabulary in a config comes near 10^12

# whole numbers >= 0 (0 or absent: the feature is off, or the field falls back to another)
COUNTS = (
    "head_dim",
    "v_head_dim",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "kv_lora_rank",
    "q_lora_rank",
    "index_head_dim",
    "index_n_heads",
    "sliding_window",
    "sliding_window_pattern",
    "max_position_embeddings",
    "vocab_size",
    "intermediate_size",
    "ffn_dim",
    "n_inner",
    "intermediate_size_mlp",
    "dense_intermediate_size",
    "moe_intermediate_size",
    "expert_intermediate_size",
    "shared_expert_intermediate_size",
    "n_routed_experts",
    "num_experts",
    "num_local_experts",
    "moe_num_experts",
    "num_experts_per_tok",
    "num_experts_per_token",
    "moe_topk",
    "n_shared_experts",
    "num_shared_experts",
    "first_k_dense_replace",
    "moe_layer_freq",
    "decoder_sparse_step",
    "interleave_moe_layer_step",
    "expert_layer_offset",
    "attn_layer_offset",
    "full_attention_interval",
    "global_head_dim",
    "global_attention_head_dim",
    "num_global_key_value_heads",
    "global_num_key_value_heads",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "mamba_num_heads",
    "mamba_n_heads",
    "mamba_head_dim",
    "mamba_d_head",
    "ssm_state_size",
    "mamba_d_state",
    "n_groups",
    "mamba_n_groups",
    "conv_kernel",
    "mamba_d_conv",
    "mamba_dt_rank",
    "num_nextn_predict_layers",
    "mtp_num_hidden_layers",
    "num_mtp_layers",
)
PERIODS = ("attn_layer_period", "expert_layer_period")  # divisors: whole numbers >= 1
REALS = ("mamba_expand",)  # positive numbers
VISION_COUNTS = (
    "hidden_size",
    "embed_dim",
    "width",
    "num_hidden_layers",
    "depth",
    "layers",
    "intermediate_size",
    "patch_size",
    "out_hidden_size",
)


def _whole(value: Any) -> bool:
    """An int, or a float with no fraction (JSON writers emit 4096.0); never a bool."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or (math.isfinite(value) and value.is_integer())


def _check(cfg: dict[str, Any], source: str, prefix: str, keys: tuple[str, ...], lo: int) -> None:
    for key in keys:
        value = cfg.get(key)
        if value is None:
            continue
        if not _whole(value) or not lo <= value <= MAX_FIELD:
            raise BadInput(
                f"{source}: {prefix}{key} must be a whole number from {lo} to {MAX_FIELD}, got {str(value)[:40]!r}"
            )


def check_config_fields(cfg: dict[str, Any], source: str) -> None:
    """BadInput naming the first field of the (text) config that is not the number or list the planner reads."""
    _check(cfg, source, "", COUNTS, 0)
    _check(cfg, source, "", PERIODS, 1)
    for key in REALS:
        value = cfg.get(key)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 < value <= MAX_FIELD
        ):
            raise BadInput(f"{source}: {key} must be a positive number, got {str(value)[:40]!r}")
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        value = cfg.get(key)
        if isinstance(value, int | float) and _whole(value) and value > MAX_LAYERS:
            raise BadInput(f"{source}: {key} {value} is past {MAX_LAYERS} layers, not a real model")
    arch = cfg.get("architectures")
    if arch is not None and (not isinstance(arch, list) or not all(isinstance(a, str) for a in arch)):
        raise BadInput(f"{source}: architectures must be a list of names, got {str(arch)[:40]!r}")
    pattern, layers = cfg.get("hybrid_override_pattern"), cfg.get("num_hidden_layers")
    if isinstance(pattern, str) and isinstance(layers, int) and len(pattern) != layers:
        raise BadInput(f"{source}: hybrid_override_pattern has {len(pattern)} entries for num_hidden_layers={layers}")
    for key in ("model_type", "torch_dtype", "dtype"):
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            raise BadInput(f"{source}: {key} must be a name, got {str(cfg[key])[:40]!r}")
    types = cfg.get("layer_types")
    if isinstance(types, list) and not all(isinstance(t, str) for t in types):
        raise BadInput(f"{source}: layer_types must be a list of names")
    only = cfg.get("mlp_only_layers")
    if only is not None and (not isinstance(only, list) or not all(_whole(i) for i in only)):
        raise BadInput(f"{source}: mlp_only_layers must be a list of layer indices, got {str(only)[:40]!r}")
    vision = cfg.get("vision_config")
    if isinstance(vision, dict):
        _check(vision, source, "vision_config.", VISION_COUNTS, 0)
