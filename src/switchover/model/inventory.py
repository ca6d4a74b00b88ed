"""Parameter inventory from config.json: every weight group with its shape, role and how TP shards it.

Used when no weight files are at hand (a config, or a repo id whose index is missing), to size weights under a
quantization scheme, and to split an exact byte count across TP ranks (replicated parts are not divided).
Names follow the HF Llama/DeepSeek conventions so a checkpoint's ignore lists (`re:.*mlp.gate$`, `lm_head`)
can be matched against them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Role = Literal["embed", "lm_head", "attn", "mlp", "expert", "shared_expert", "router", "norm", "vision", "mtp"]
Shard = Literal["tp", "replicated", "kv"]


@dataclass(frozen=True)
class WeightGroup:
    """`count` identical Linear (or embedding/norm) weights of shape [out, in]."""

    name: str  # representative module name (layer 0 / expert 0 of the group), for ignore-list matching
    role: Role
    out_features: int
    in_features: int
    count: int = 1
    linear: bool = True
    shard: Shard = "tp"
    hidden_axis: Literal["in", "out"] | None = None  # which dim is the model's hidden size (for padding)

    @property
    def params(self) -> int:
        """Parameters in the whole group."""
        return self.out_features * self.in_features * self.count


def _get(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return default


def _moe_layers(cfg: dict[str, Any], n_layers: int) -> set[int]:
    """Indices of layers whose MLP is a mixture of experts."""
    experts = _get(cfg, "n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts")
    if not experts or int(experts) <= 1:
        return set()
    first_dense = int(_get(cfg, "first_k_dense_replace", default=0))
    freq = int(_get(cfg, "moe_layer_freq", "decoder_sparse_step", "interleave_moe_layer_step", default=1) or 1)
    only_mlp = set(_get(cfg, "mlp_only_layers", default=[]) or [])
    if cfg.get("expert_layer_period") is not None:  # Jamba: MoE every period-th layer from the offset
        period, offset = int(cfg["expert_layer_period"]), int(cfg.get("expert_layer_offset") or 0)
        return {i for i in range(n_layers) if i % period == offset}
    return {i for i in range(n_layers) if i >= first_dense and (i + 1) % freq == 0 and i not in only_mlp}


def _attention(cfg: dict[str, Any], prefix: str, hidden: int, n: int) -> list[WeightGroup]:
    heads = int(cfg["num_attention_heads"])
    if cfg.get("kv_lora_rank") is not None:  # MLA (DeepSeek-V2/V3, Kimi): modeling_deepseek_v3.py
        rank, rope = int(cfg["kv_lora_rank"]), int(cfg["qk_rope_head_dim"])
        nope, v = int(cfg.get("qk_nope_head_dim") or 128), int(cfg.get("v_head_dim") or 128)
        q_rank = cfg.get("q_lora_rank")
        groups = [
            WeightGroup(f"{prefix}.kv_a_proj_with_mqa", "attn", rank + rope, hidden, n, shard="replicated"),
            WeightGroup(f"{prefix}.kv_b_proj", "attn", heads * (nope + v), rank, n),
            WeightGroup(f"{prefix}.o_proj", "attn", hidden, heads * v, n),
        ]
        if q_rank:
            groups += [
                WeightGroup(f"{prefix}.q_a_proj", "attn", int(q_rank), hidden, n, shard="replicated"),
                WeightGroup(f"{prefix}.q_b_proj", "attn", heads * (nope + rope), int(q_rank), n),
            ]
        else:
            groups.append(WeightGroup(f"{prefix}.q_proj", "attn", heads * (nope + rope), hidden, n))
        if cfg.get("index_head_dim"):  # DeepSeek-V3.2 NSA indexer
            ih, iheads = int(cfg["index_head_dim"]), int(cfg.get("index_n_heads") or 64)
            groups += [
                WeightGroup(
                    f"{prefix}.indexer.wq_b", "attn", iheads * ih, int(q_rank or hidden), n, shard="replicated"
                ),
                WeightGroup(f"{prefix}.indexer.wk", "attn", ih, hidden, n, shard="replicated"),
            ]
        return groups
    kv = int(_get(cfg, "num_key_value_heads", "num_kv_heads", default=heads))
    hd = int(cfg.get("head_dim") or hidden // heads)
    return [
        WeightGroup(f"{prefix}.q_proj", "attn", heads * hd, hidden, n),
        WeightGroup(f"{prefix}.k_proj", "attn", kv * hd, hidden, n, shard="kv"),
        WeightGroup(f"{prefix}.v_proj", "attn", kv * hd, hidden, n, shard="kv"),
        WeightGroup(f"{prefix}.o_proj", "attn", hidden, heads * hd, n),
    ]


def _linear_attention(cfg: dict[str, Any], prefix: str, hidden: int, n: int) -> list[WeightGroup]:
    """Gated DeltaNet (Qwen3-Next / Qwen3.5): modeling_qwen3_next.py Qwen3NextGatedDeltaNet."""
    nk, nv = int(cfg["linear_num_key_heads"]), int(cfg["linear_num_value_heads"])
    dk, dv, k = int(cfg["linear_key_head_dim"]), int(cfg["linear_value_head_dim"]), int(cfg["linear_conv_kernel_dim"])
    return [
        WeightGroup(f"{prefix}.in_proj_qkvz", "attn", 2 * nk * dk + 2 * nv * dv, hidden, n),
        WeightGroup(f"{prefix}.in_proj_ba", "attn", 2 * nv, hidden, n),
        WeightGroup(f"{prefix}.conv1d", "attn", 2 * nk * dk + nv * dv, k, n, linear=False),
        WeightGroup(f"{prefix}.out_proj", "attn", hidden, nv * dv, n),
    ]


def _mamba(cfg: dict[str, Any], prefix: str, hidden: int, n: int) -> list[WeightGroup]:
    """Mamba2 (Nemotron-H, Granite-4) or Mamba1 (Jamba) mixer weights."""
    heads = _get(cfg, "mamba_num_heads", "mamba_n_heads")
    if heads is not None:
        d_inner = int(heads) * int(_get(cfg, "mamba_head_dim", "mamba_d_head", default=64))
        ng, ds = (
            int(_get(cfg, "n_groups", "mamba_n_groups", default=1)),
            int(_get(cfg, "ssm_state_size", "mamba_d_state", default=128)),
        )
        conv = int(_get(cfg, "conv_kernel", "mamba_d_conv", default=4))
        return [
            WeightGroup(f"{prefix}.in_proj", "attn", 2 * d_inner + 2 * ng * ds + int(heads), hidden, n),
            WeightGroup(f"{prefix}.conv1d", "attn", d_inner + 2 * ng * ds, conv, n, linear=False),
            WeightGroup(f"{prefix}.out_proj", "attn", hidden, d_inner, n),
        ]
    d_inner = int(float(_get(cfg, "mamba_expand", default=2)) * hidden)
    ds, conv = int(_get(cfg, "mamba_d_state", default=16)), int(_get(cfg, "mamba_d_conv", default=4))
    dt_rank = int(_get(cfg, "mamba_dt_rank", default=-(-hidden // 16)))
    return [
        WeightGroup(f"{prefix}.in_proj", "attn", 2 * d_inner, hidden, n),
        WeightGroup(f"{prefix}.x_proj", "attn", dt_rank + 2 * ds, d_inner, n),
        WeightGroup(f"{prefix}.dt_proj", "attn", d_inner, dt_rank, n),
        WeightGroup(f"{prefix}.A_log", "attn", d_inner, ds + conv, n, linear=False),
        WeightGroup(f"{prefix}.out_proj", "attn", hidden, d_inner, n),
    ]


def _mlp(prefix: str, role: Role, hidden: int, inter: int, n: int, gated: bool = True) -> list[WeightGroup]:
    up = [WeightGroup(f"{prefix}.gate_proj", role, inter, hidden, n, hidden_axis="in")] if gated else []
    return [
        *up,
        WeightGroup(f"{prefix}.up_proj", role, inter, hidden, n, hidden_axis="in"),
        WeightGroup(f"{prefix}.down_proj", role, hidden, inter, n, hidden_axis="out"),
    ]


def _moe(cfg: dict[str, Any], prefix: str, hidden: int, n: int) -> list[WeightGroup]:
    experts = int(_get(cfg, "n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts"))
    inter = int(_get(cfg, "moe_intermediate_size", "expert_intermediate_size", "intermediate_size", default=4 * hidden))
    groups = [
        WeightGroup(f"{prefix}.gate", "router", experts, hidden, n, shard="replicated"),
        *_mlp(f"{prefix}.experts.0", "expert", hidden, inter, n * experts),
    ]
    shared_inter = cfg.get("shared_expert_intermediate_size")
    shared = int(_get(cfg, "n_shared_experts", "num_shared_experts", default=0) or 0)
    if shared_inter:  # Qwen2-MoE / Qwen3-Next: one shared expert of its own size, plus a 1-output gate
        groups += _mlp(f"{prefix}.shared_expert", "shared_expert", hidden, int(shared_inter), n)
        groups.append(WeightGroup(f"{prefix}.shared_expert_gate", "router", 1, hidden, n, shard="replicated"))
    elif shared:
        groups += _mlp(f"{prefix}.shared_experts", "shared_expert", hidden, inter * shared, n)
    return groups


def _vision(vc: dict[str, Any], text_hidden: int) -> list[WeightGroup]:
    """A ViT encoder plus a projector, sized from vision_config (an estimate: towers differ in details)."""
    h = int(_get(vc, "hidden_size", "embed_dim", "width", default=0) or 0)
    depth = int(_get(vc, "num_hidden_layers", "depth", "layers", default=0) or 0)
    if not h or not depth:
        return []
    inter = int(_get(vc, "intermediate_size", default=4 * h))
    patch = int(_get(vc, "patch_size", default=14))
    out = int(_get(vc, "out_hidden_size", default=text_hidden))
    return [
        WeightGroup("vision_tower.attn", "vision", 4 * h, h, depth, shard="replicated"),
        WeightGroup("vision_tower.mlp", "vision", 2 * inter, h, depth, shard="replicated"),
        WeightGroup("vision_tower.patch_embed", "vision", h, 3 * patch * patch * 2, linear=False, shard="replicated"),
        WeightGroup("multi_modal_projector", "vision", out, h * 4, shard="replicated"),
    ]


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The decoder's fields: multimodal wrappers keep them in text_config (or llm_config)."""
    for key in ("text_config", "llm_config"):
        if isinstance(cfg.get(key), dict):
            return {**{k: v for k, v in cfg.items() if k != key}, **cfg[key]}
    return cfg


def _layer_mixers(cfg: dict[str, Any], n_layers: int) -> list[str]:
    """Per layer: attention | linear | mamba | none (MLP-only), from the same fields the card reads."""
    if isinstance(cfg.get("layer_types"), list):
        table = {"linear_attention": "linear", "mamba": "mamba"}
        return [table.get(t, "attention") for t in cfg["layer_types"]]
    if isinstance(cfg.get("hybrid_override_pattern"), str):
        table = {"M": "mamba", "*": "attention", "-": "none", "E": "none"}
        return [table.get(c, "none") for c in cfg["hybrid_override_pattern"]]
    if cfg.get("full_attention_interval"):
        every = int(cfg["full_attention_interval"])
        return ["attention" if (i + 1) % every == 0 else "linear" for i in range(n_layers)]
    if cfg.get("attn_layer_period") is not None and cfg.get("attn_layer_offset") is not None:
        period, offset = int(cfg["attn_layer_period"]), int(cfg["attn_layer_offset"])
        return ["attention" if i % period == offset else "mamba" for i in range(n_layers)]
    return ["attention"] * n_layers


def weight_groups(raw: dict[str, Any]) -> list[WeightGroup]:
    """Every weight of the served model (MTP/next-token heads excluded: engines load them only for speculation)."""
    cfg = text_config(raw)
    hidden, n_layers = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"])
    vocab = int(cfg.get("vocab_size") or 0)
    tied = cfg.get("tie_word_embeddings", str(cfg.get("model_type", "")).startswith("gemma"))
    groups = [WeightGroup("model.embed_tokens", "embed", vocab, hidden, linear=False)]
    if not tied:
        groups.append(WeightGroup("lm_head", "lm_head", vocab, hidden))
    moe_layers = _moe_layers(cfg, n_layers)
    mixers = _layer_mixers(cfg, n_layers)
    pattern = cfg.get("hybrid_override_pattern") if isinstance(cfg.get("hybrid_override_pattern"), str) else None
    dense_inter = int(_get(cfg, "intermediate_size_mlp", "intermediate_size", default=4 * hidden))
    if moe_layers and cfg.get("moe_intermediate_size") is None and cfg.get("intermediate_size_mlp") is None:
        dense_inter = int(_get(cfg, "dense_intermediate_size", "intermediate_size", default=4 * hidden))
    counts: dict[tuple[str, str], int] = {}
    for i in range(n_layers):
        mixer = mixers[i] if i < len(mixers) else "attention"
        # Nemotron-H: one block kind per layer; "-" is a non-gated MLP, "E" an MoE
        ffn = {"-": "mlp", "E": "moe"}.get(pattern[i], "") if pattern else ("moe" if i in moe_layers else "mlp")
        counts[(mixer, ffn)] = counts.get((mixer, ffn), 0) + 1
    for (mixer, ffn), n in sorted(counts.items()):
        if mixer == "attention":
            groups += _attention(cfg, "model.layers.0.self_attn", hidden, n)
        elif mixer == "linear":
            groups += _linear_attention(cfg, "model.layers.0.linear_attn", hidden, n)
        elif mixer == "mamba":
            groups += _mamba(cfg, "model.layers.0.mamba", hidden, n)
        if ffn == "moe":
            groups += _moe(cfg, "model.layers.0.mlp", hidden, n)
        elif ffn == "mlp":
            groups += _mlp("model.layers.0.mlp", "mlp", hidden, dense_inter, n, gated=pattern is None)
    groups.append(
        WeightGroup(
            "model.layers.0.input_layernorm", "norm", 2 * n_layers + 1, hidden, linear=False, shard="replicated"
        )
    )
    if isinstance(raw.get("vision_config"), dict):
        groups += _vision(raw["vision_config"], hidden)
    return groups


def mtp_layers(raw: dict[str, Any]) -> int:
    """Next-token-prediction layers stored in the checkpoint but not loaded without speculative decoding."""
    cfg = text_config(raw)
    return int(_get(cfg, "num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers", default=0) or 0)


def per_rank_params(group: WeightGroup, tp: int, kv_heads: int | None = None) -> float:
    """Parameters of a group on one TP rank: replicated groups stay whole; KV projections keep one head per rank
    when TP exceeds the KV heads (vLLM QKVParallelLinear replicates them)."""
    if group.shard == "replicated" or tp <= 1:
        return float(group.params)
    if group.shard == "kv" and kv_heads and tp > kv_heads:
        return group.params / kv_heads
    return group.params / tp
