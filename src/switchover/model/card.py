"""ModelCard: the shape of a model as the capacity planner needs it, read from config.json and weight headers.

Layouts are detected from the fields present (kv_lora_rank, layer_types, sliding_window, mamba/linear keys),
never from the architecture name alone. An architecture whose KV layout cannot be derived is refused with the
missing fields named (issue 5 §1; capacity.md §1 "recurring mistakes").
"""

from __future__ import annotations

import math
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from switchover.errors import BadInput, CheckFailed
from switchover.model.config_fields import check_config_fields
from switchover.model.hub import fetch_repo, looks_like_repo_id
from switchover.model.integrity import CheckpointIntegrity, checkpoint_integrity
from switchover.model.inventory import mtp_layers, text_config
from switchover.model.sizing import WeightsInfo, estimate_weights, exact_weights, mtp_bytes
from switchover.model.source import ggml_type_name, gguf_fields, read_json


class LayerKind(StrEnum):
    """What a decoder layer keeps per sequence."""

    FULL = "full"  # K and V for every token
    SLIDING = "sliding"  # K and V for the last `sliding_window` tokens
    MLA = "mla"  # one latent (kv_lora_rank + rope) per token, replicated on every TP rank
    LINEAR = "linear"  # gated-delta / linear attention: fixed conv + recurrent state
    MAMBA = "mamba"  # Mamba / Mamba2: fixed conv + SSM state
    NONE = "none"  # MLP-only layer (Nemotron-H "-"/"E"): no cache


CACHELESS_PER_TOKEN = {LayerKind.LINEAR, LayerKind.MAMBA, LayerKind.NONE}

DTYPE_BYTES: dict[str, float] = {
    "float32": 4,
    "fp32": 4,
    "f32": 4,
    "float": 4,
    "float16": 2,
    "fp16": 2,
    "f16": 2,
    "half": 2,
    "bfloat16": 2,
    "bf16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_e4m3fn": 1,
    "int8": 1,
    "q8_0": 1.0625,
    "q4_0": 0.5625,
    "q4_1": 0.625,
    "q5_0": 0.6875,
    "q5_1": 0.75,
    "iq4_nl": 0.5625,
    "nvfp4": 0.5625,
    "mxfp8": 1.03125,
}  # q*: GGML block sizes (ggml/src/ggml.c type traits); nvfp4: head_dim/2 + head_dim/16 (capacity.md §1)


class AttentionSpec(BaseModel):
    """Attention shape: head counts and per-head sizes as the config states them."""

    num_heads: int
    num_kv_heads: int
    head_dim: int = Field(description="K head size, from config head_dim when present")
    v_head_dim: int
    head_dim_from: str = Field(description="which config field gave head_dim")
    sliding_window: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    indexer_bytes_per_token: float = Field(default=0.0, description="DeepSeek-V3.2 NSA indexer K, per layer")
    global_head_dim: int | None = Field(default=None, description="Gemma-style global (full) layers' own head dim")
    global_kv_heads: int | None = Field(default=None, description="Gemma-style global layers' own KV heads")
    draft_layers: int = Field(
        default=0, description="MTP / next-token layers the checkpoint carries (KV when speculative decoding uses them)"
    )


class StateSpec(BaseModel):
    """Fixed per-sequence state of one linear-attention or Mamba layer (capacity.md §1, hybrid)."""

    kind: str = Field(description="gdn | mamba1 | mamba2")
    conv_elements: int
    ssm_elements: int
    ssm_dtype_bytes: int = Field(default=4, description="recurrent state is often kept in fp32")
    num_heads: int = Field(description="heads TP must divide")


class MoESpec(BaseModel):
    """Mixture-of-experts layout; EP must divide num_experts."""

    num_experts: int
    experts_per_token: int | None = None
    shared_experts: int = 0


class ModelCard(BaseModel):
    """Everything about a model that decides memory: layers by kind, attention shape, state, experts, weights."""

    name: str
    source: str
    architecture: str
    model_type: str
    num_layers: int
    hidden_size: int
    vocab_size: int | None
    max_position_embeddings: int | None
    dtype: str = Field(description="weights dtype as configured (torch_dtype / dtype), or the GGUF file type")
    layers: list[LayerKind]
    attention: AttentionSpec
    state: StateSpec | None = None
    moe: MoESpec | None = None
    weights: WeightsInfo
    mlp_width: int = Field(
        default=0,
        description="MLP activation elements per token: intermediate_size, or "
        "experts per token x expert size (+ shared) for MoE",
    )
    tied_embeddings: bool = Field(default=False, description="lm_head reuses the token embedding (tie_word_embeddings)")
    notes: list[str] = Field(default_factory=list)
    integrity: CheckpointIntegrity | None = Field(
        default=None,
        description="shards and headers against the index and config.json (model folders with safetensors or an index)",
    )

    def count(self, kind: LayerKind) -> int:
        """How many layers are of this kind."""
        return sum(1 for k in self.layers if k == kind)

    @property
    def family(self) -> str:
        """dense, mla, sliding or hybrid: which formula family applies."""
        kinds = set(self.layers) - {LayerKind.NONE}
        if kinds & {LayerKind.LINEAR, LayerKind.MAMBA}:
            return "hybrid"
        if LayerKind.MLA in kinds:
            return "mla"
        if LayerKind.SLIDING in kinds:
            return "sliding"
        return "dense"


# ---- config.json ---------------------------------------------------------------------------------------------


def _first(cfg: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return None


def _require(cfg: dict[str, Any], what: str, groups: list[tuple[str, ...]]) -> list[Any]:
    """Values for each group of alternative keys; BadInput naming every missing group."""
    values, missing = [], []
    for group in groups:
        value = _first(cfg, *group)
        if value is None:
            missing.append(" or ".join(group))
        values.append(value)
    if missing:
        raise BadInput(
            f"cannot size {what}: config.json lacks {', '.join(missing)}",
            hint="switchover refuses to guess a KV layout; add the fields or pick a supported architecture",
        )
    return values


def _layer_kinds(cfg: dict[str, Any], n_layers: int, arch: str, mla: bool) -> list[LayerKind]:
    attn = LayerKind.MLA if mla else LayerKind.FULL
    if isinstance(cfg.get("layer_types"), list):
        names = {
            "full_attention": attn,
            "attention": attn,
            "global": attn,
            "sliding_attention": LayerKind.SLIDING,
            "chunked_attention": LayerKind.SLIDING,
            "sliding": LayerKind.SLIDING,
            "linear_attention": LayerKind.LINEAR,
            "mamba": LayerKind.MAMBA,
        }
        unknown = sorted({t for t in cfg["layer_types"] if t not in names})
        if unknown:
            raise BadInput(f"cannot size {arch}: unknown layer_types {unknown}", hint=f"known: {sorted(names)}")
        kinds = [names[t] for t in cfg["layer_types"]]
        if len(kinds) != n_layers:
            raise BadInput(f"{arch}: layer_types has {len(kinds)} entries for num_hidden_layers={n_layers}")
        return kinds
    if isinstance(cfg.get("hybrid_override_pattern"), str):  # Nemotron-H: M mamba, * attention, -/E MLP
        pattern = cfg["hybrid_override_pattern"]
        table = {"M": LayerKind.MAMBA, "*": attn, "-": LayerKind.NONE, "E": LayerKind.NONE}
        if len(pattern) != n_layers or set(pattern) - set(table):
            raise BadInput(f"{arch}: hybrid_override_pattern {pattern!r} does not match {n_layers} layers of M*-E")
        return [table[c] for c in pattern]
    if cfg.get("full_attention_interval"):  # Qwen3-Next: every Nth layer is full attention
        every = int(cfg["full_attention_interval"])
        return [attn if (i + 1) % every == 0 else LayerKind.LINEAR for i in range(n_layers)]
    if cfg.get("attn_layer_period") is not None and cfg.get("attn_layer_offset") is not None:  # Jamba
        period, offset = int(cfg["attn_layer_period"]), int(cfg["attn_layer_offset"])
        return [attn if i % period == offset else LayerKind.MAMBA for i in range(n_layers)]
    window = cfg.get("sliding_window")
    if window and cfg.get("use_sliding_window", True) is not False:
        if cfg.get("max_position_embeddings") and window >= cfg["max_position_embeddings"]:
            return [attn] * n_layers
        pattern = cfg.get("sliding_window_pattern")
        if pattern:  # Gemma 3: every `pattern`-th layer is global
            return [attn if (i + 1) % int(pattern) == 0 else LayerKind.SLIDING for i in range(n_layers)]
        if cfg.get("model_type") == "gemma2":  # Gemma 2 alternates, even layers slide (modeling_gemma2.py)
            return [LayerKind.SLIDING if i % 2 == 0 else attn for i in range(n_layers)]
        return [LayerKind.SLIDING] * n_layers  # Mistral v0.1 / Phi-3: every layer slides
    return [attn] * n_layers


def _state_spec(cfg: dict[str, Any], arch: str, kinds: list[LayerKind], hidden: int) -> StateSpec | None:
    if LayerKind.LINEAR in kinds:
        nk, nv, dk, dv, k = _require(
            cfg,
            f"{arch} linear-attention state",
            [
                ("linear_num_key_heads",),
                ("linear_num_value_heads",),
                ("linear_key_head_dim",),
                ("linear_value_head_dim",),
                ("linear_conv_kernel_dim",),
            ],
        )
        return StateSpec(
            kind="gdn", conv_elements=(k - 1) * (2 * nk * dk + nv * dv), ssm_elements=nv * dk * dv, num_heads=nv
        )
    if LayerKind.MAMBA not in kinds:
        return None
    if _first(cfg, "mamba_num_heads", "mamba_n_heads") is not None:  # Mamba2 (Nemotron-H, Granite-4)
        heads, head_dim, d_state, groups, conv = _require(
            cfg,
            f"{arch} mamba2 state",
            [
                ("mamba_num_heads", "mamba_n_heads"),
                ("mamba_head_dim", "mamba_d_head"),
                ("ssm_state_size", "mamba_d_state"),
                ("n_groups", "mamba_n_groups"),
                ("conv_kernel", "mamba_d_conv"),
            ],
        )
        d_inner = heads * head_dim
        return StateSpec(
            kind="mamba2",
            conv_elements=(conv - 1) * (d_inner + 2 * groups * d_state),
            ssm_elements=heads * head_dim * d_state,
            num_heads=heads,
        )
    expand, d_state, conv = _require(
        cfg, f"{arch} mamba state", [("mamba_expand",), ("mamba_d_state",), ("mamba_d_conv",)]
    )
    d_inner = int(expand * hidden)
    return StateSpec(
        kind="mamba1", conv_elements=(conv - 1) * d_inner, ssm_elements=d_inner * d_state, num_heads=d_inner
    )


def _moe_spec(cfg: dict[str, Any]) -> MoESpec | None:
    experts = _first(cfg, "n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts")
    if not experts or int(experts) <= 1:
        return None
    return MoESpec(
        num_experts=int(experts),
        experts_per_token=_first(cfg, "num_experts_per_tok", "num_experts_per_token", "moe_topk"),
        shared_experts=int(_first(cfg, "n_shared_experts", "num_shared_experts") or 0),
    )


def card_from_config(cfg: dict[str, Any], name: str = "model", source: str = "config.json") -> ModelCard:
    """Build a card from a parsed config.json (weights estimated unless attached later)."""
    if not isinstance(cfg, dict):
        raise BadInput(f"{source}: config.json must be a JSON object")
    cfg = text_config(cfg)  # multimodal wrappers keep the decoder in text_config (or llm_config)
    check_config_fields(cfg, source)
    arch = (cfg.get("architectures") or [cfg.get("model_type") or "unknown"])[0]
    n_layers, n_heads, hidden = _require(
        cfg,
        arch,
        [
            ("num_hidden_layers", "n_layer", "num_layers"),
            ("num_attention_heads", "n_head"),
            ("hidden_size", "d_model", "n_embd"),
        ],
    )
    notes: list[str] = []
    for key, value in (("num_hidden_layers", n_layers), ("num_attention_heads", n_heads), ("hidden_size", hidden)):
        if not isinstance(value, int) or value <= 0:
            raise BadInput(f"{source}: {key} must be a positive integer, got {value!r}")
    mla = cfg.get("kv_lora_rank") is not None
    kv_heads = _first(cfg, "num_key_value_heads", "num_kv_heads", "n_head_kv")
    if kv_heads is None:
        kv_heads = n_heads
        if not mla:
            notes.append("num_key_value_heads absent: multi-head attention (kv heads = attention heads)")
    if not isinstance(kv_heads, int) or kv_heads <= 0:
        raise BadInput(f"{source}: num_key_value_heads must be a positive integer, got {kv_heads!r}")
    if cfg.get("head_dim"):
        head_dim, head_from = int(cfg["head_dim"]), "head_dim"
    elif mla and cfg.get("qk_nope_head_dim") and cfg.get("qk_rope_head_dim"):
        head_dim = int(cfg["qk_nope_head_dim"]) + int(cfg["qk_rope_head_dim"])
        head_from = "qk_nope_head_dim + qk_rope_head_dim (MLA query/key size; the cache holds the latent)"
    else:
        if hidden % n_heads:
            raise BadInput(
                f"cannot size {arch}: no head_dim and hidden_size {hidden} is not a multiple of "
                f"num_attention_heads {n_heads}"
            )
        head_dim, head_from = hidden // n_heads, "hidden_size/num_attention_heads (no head_dim in config)"
        notes.append(f"head_dim absent from config: using hidden/heads = {head_dim}, as the HF model class does")
    v_head_dim = int(cfg.get("v_head_dim") or head_dim)
    rope = None
    indexer = 0.0
    if mla:
        (rope,) = _require(cfg, f"{arch} MLA cache", [("qk_rope_head_dim",)])
        if cfg.get("index_head_dim"):  # DeepSeek-V3.2 NSA indexer: fp8 K + fp32 scale per 128 (capacity.md §1)
            indexer = cfg["index_head_dim"] + cfg["index_head_dim"] / 128 * 4
    kinds = _layer_kinds(cfg, n_layers, arch, mla)
    state = _state_spec(cfg, arch, kinds, hidden)
    leftovers = sorted(k for k in cfg if any(s in k for s in ("mamba", "ssm_", "linear_attn", "rwkv")))
    if state is None and leftovers:
        raise BadInput(
            f"cannot size {arch}: it has recurrent-state fields {leftovers} but no layer layout",
            hint="needs layer_types, hybrid_override_pattern, full_attention_interval or "
            "attn_layer_period/attn_layer_offset",
        )
    window = cfg.get("sliding_window") if LayerKind.SLIDING in kinds else None
    attention = AttentionSpec(
        num_heads=n_heads,
        num_kv_heads=1 if mla else kv_heads,
        head_dim=head_dim,
        v_head_dim=v_head_dim,
        head_dim_from=head_from,
        sliding_window=window,
        kv_lora_rank=cfg.get("kv_lora_rank"),
        qk_rope_head_dim=rope,
        indexer_bytes_per_token=indexer,
        global_head_dim=_first(cfg, "global_head_dim", "global_attention_head_dim"),
        global_kv_heads=_first(cfg, "num_global_key_value_heads", "global_num_key_value_heads"),
        draft_layers=mtp_layers(cfg),
    )
    dtype = str(_first(cfg, "torch_dtype", "dtype") or "bfloat16")
    moe = _moe_spec(cfg)
    weights, wnotes = estimate_weights(cfg, kv_heads, cfg.get("quantization_config"))
    inter = int(_first(cfg, "intermediate_size", "ffn_dim", "n_inner") or 4 * hidden)
    if moe is not None:
        expert = int(_first(cfg, "moe_intermediate_size", "expert_intermediate_size") or inter)
        shared = int(cfg.get("shared_expert_intermediate_size") or expert * moe.shared_experts)
        inter = expert * int(moe.experts_per_token or 1) + shared
    notes += wnotes
    card = ModelCard(
        name=name,
        source=source,
        architecture=arch,
        model_type=str(cfg.get("model_type") or ""),
        num_layers=n_layers,
        hidden_size=hidden,
        vocab_size=cfg.get("vocab_size"),
        max_position_embeddings=cfg.get("max_position_embeddings"),
        dtype=dtype,
        layers=kinds,
        attention=attention,
        state=state,
        moe=moe,
        weights=weights,
        mlp_width=inter,
        notes=notes,
        # the HF default for Gemma is tied, as model/inventory.py prices it
        tied_embeddings=bool(cfg.get("tie_word_embeddings", str(cfg.get("model_type", "")).startswith("gemma"))),
    )
    return card


# ---- weight headers ------------------------------------------------------------------------------------------


def card_from_gguf(path: Path) -> ModelCard:
    """Card from GGUF metadata and tensor table (source.gguf_fields: one cached reader, malformed fields skipped)."""
    meta = gguf_fields(path)
    try:
        from gguf import LlamaFileType
    except ImportError:  # pragma: no cover - gguf_fields needs the same package
        raise BadInput("reading GGUF needs the `gguf` package", hint="pip install 'switchover[model]'") from None

    def field(key: str) -> Any:
        return meta.get(key)

    arch = field("general.architecture") or "unknown"
    p = f"{arch}."
    kv_heads = field(p + "attention.head_count_kv")
    if isinstance(kv_heads, list):
        kv_heads = max(kv_heads, default=None)
    cfg: dict[str, Any] = {
        "architectures": [f"gguf:{arch}"],
        "model_type": arch,
        "num_hidden_layers": field(p + "block_count"),
        "num_attention_heads": field(p + "attention.head_count"),
        "num_key_value_heads": kv_heads,
        "hidden_size": field(p + "embedding_length"),
        "head_dim": field(p + "attention.key_length"),
        "v_head_dim": field(p + "attention.value_length"),
        "max_position_embeddings": field(p + "context_length"),
        "sliding_window": field(p + "attention.sliding_window"),
        "num_experts": field(p + "expert_count"),
        "num_experts_per_tok": field(p + "expert_used_count"),
        "kv_lora_rank": field(p + "attention.kv_lora_rank"),
        "qk_rope_head_dim": field(p + "rope.dimension_count") if field(p + "attention.kv_lora_rank") else None,
        "vocab_size": field(p + "vocab_size"),
    }
    tokens = field("tokenizer.ggml.tokens")
    if cfg["vocab_size"] is None and isinstance(tokens, list):
        cfg["vocab_size"] = len(tokens)
    file_type = field("general.file_type")
    try:
        dtype = LlamaFileType(file_type).name.removeprefix("MOSTLY_").removeprefix("ALL_").lower()
    except (ValueError, TypeError):
        dtype = f"file_type {str(file_type)[:20]}"
    card = card_from_config({k: v for k, v in cfg.items() if v is not None}, name=path.stem, source=str(path))
    by_type: dict[str, int] = {}
    params = 0
    for _name, ty, shape, _offset, nbytes in meta["__tensors__"]:
        kind = ggml_type_name(ty)
        by_type[kind] = by_type.get(kind, 0) + nbytes
        params += math.prod(shape)
    weights = WeightsInfo(
        origin="gguf",
        total_bytes=sum(by_type.values()),
        params=params,
        bytes_by_dtype=by_type,
        files=[path.name],
        quantization=dtype,
        source=f"exact: GGUF tensor table of {path.name}",
    )
    return card.model_copy(update={"weights": weights, "dtype": dtype})


def load_model_card(path: str | Path) -> ModelCard:
    """A card from a model directory (config.json + safetensors, or one .gguf), a config.json, a .gguf file, or a
    Hugging Face repo id (config, index and tokenizer files fetched into the HF cache; offline from the cache)."""
    p = Path(path).expanduser()
    if not p.exists() and isinstance(path, str) and looks_like_repo_id(path):
        card = load_model_card(fetch_repo(path))
        return card.model_copy(update={"name": path, "source": f"hf:{path} ({card.source})"})
    if not p.exists():
        raise BadInput(f"{p}: no such file or directory")
    if p.is_file() and p.suffix == ".gguf":
        return card_from_gguf(p)
    config = p / "config.json" if p.is_dir() else p
    if p.is_dir() and not config.exists():
        ggufs = sorted(p.glob("*.gguf"))
        if len(ggufs) == 1:
            return card_from_gguf(ggufs[0])
        raise BadInput(f"{p}: no config.json" + (f" and {len(ggufs)} .gguf files; name one" if ggufs else ""))
    cfg = read_json(config)  # size-capped, nesting-safe; BadInput when malformed or not an object
    if cfg is None:
        raise BadInput(f"{config}: no such file")
    if "build_config" in cfg and "pretrained_config" in cfg:  # formats.yaml trtllm-engine: not a checkpoint
        raise BadInput(
            f"{config.parent}: a compiled TensorRT-LLM engine, not a checkpoint: its sizes are fixed at "
            "build time and it runs only on the GPU architecture it was built on",
            hint="plan with the checkpoint it was built from; `switchover hw diff A B -m "
            f"{config.parent}` says whether host B can run it",
        )
    name = config.parent.name if config.name == "config.json" else config.stem
    if not cfg.get("quantization_config"):
        # ModelOpt writes its scheme beside config.json
        hf_quant = read_json(config.parent / "hf_quant_config.json")
        if hf_quant is not None:
            cfg = {**cfg, "quantization_config": hf_quant}
    card = card_from_config(cfg, name=name, source=str(config))
    exact = exact_weights(config.parent, card.weights, cfg)
    if exact is not None:
        excluded = mtp_bytes(cfg, card.weights)
        if excluded:
            exact = exact.model_copy(
                update={
                    "total_bytes": exact.total_bytes - excluded,
                    "excluded_bytes": exact.excluded_bytes + excluded,
                    "source": exact.source + f"; minus {excluded / 2**30:.2f} GiB of MTP layers (estimated; loaded "
                    "only with speculative decoding)",
                }
            )
        card = card.model_copy(update={"weights": exact})
    return _checked(card, config.parent, cfg)


def _checked(card: ModelCard, folder: Path, cfg: dict[str, Any]) -> ModelCard:
    """The card with its checkpoint's integrity; CheckFailed (exit 1) naming every error, since an engine cannot
    load a checkpoint with a missing shard or tensors that contradict config.json."""
    report = checkpoint_integrity(folder, cfg)
    if report is None:
        return card
    if report.errors:
        raise CheckFailed(
            f"{folder}: checkpoint integrity: " + "; ".join(f.message for f in report.errors),
            hint="re-download the missing or mismatched files, or fix config.json",
        )
    warnings = [f"checkpoint: {f.message}" for f in report.findings if f.severity == "warning"]
    return card.model_copy(update={"integrity": report, "notes": card.notes + warnings})
