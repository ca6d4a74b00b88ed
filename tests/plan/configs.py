"""config.json shapes of real models (values as published in their HF configs), shared by plan/card tests."""

from __future__ import annotations

from typing import Any

LLAMA_8B: dict[str, Any] = dict(  # meta-llama/Llama-3.1-8B-Instruct
    architectures=["LlamaForCausalLM"], model_type="llama", num_hidden_layers=32, num_attention_heads=32,
    num_key_value_heads=8, hidden_size=4096, head_dim=128, intermediate_size=14336, vocab_size=128256,
    max_position_embeddings=131072, torch_dtype="bfloat16")
QWEN3_06B: dict[str, Any] = dict(  # Qwen/Qwen3-0.6B: head_dim 128, not hidden/heads = 64
    architectures=["Qwen3ForCausalLM"], model_type="qwen3", num_hidden_layers=28, num_attention_heads=16,
    num_key_value_heads=8, hidden_size=1024, head_dim=128, intermediate_size=3072, vocab_size=151936,
    max_position_embeddings=40960, torch_dtype="bfloat16", sliding_window=None, use_sliding_window=False)
MISTRAL_SMALL_3: dict[str, Any] = dict(  # mistralai/Mistral-Small-24B: head_dim 128, not 5120/32 = 160
    architectures=["MistralForCausalLM"], model_type="mistral", num_hidden_layers=40, num_attention_heads=32,
    num_key_value_heads=8, hidden_size=5120, head_dim=128, intermediate_size=32768, vocab_size=131072,
    max_position_embeddings=32768, torch_dtype="bfloat16", sliding_window=None)
QWQ_32B: dict[str, Any] = dict(  # Qwen/QwQ-32B
    architectures=["Qwen2ForCausalLM"], model_type="qwen2", num_hidden_layers=64, num_attention_heads=40,
    num_key_value_heads=8, hidden_size=5120, intermediate_size=27648, vocab_size=152064,
    max_position_embeddings=40960, torch_dtype="bfloat16", sliding_window=32768, use_sliding_window=False)
QWEN3_235B: dict[str, Any] = dict(  # Qwen/Qwen3-235B-A22B: 4 KV heads, 128 experts
    architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", num_hidden_layers=94, num_attention_heads=64,
    num_key_value_heads=4, hidden_size=4096, head_dim=128, moe_intermediate_size=1536, num_experts=128,
    num_experts_per_tok=8, vocab_size=151936, max_position_embeddings=40960, torch_dtype="bfloat16")
DEEPSEEK_V3: dict[str, Any] = dict(  # deepseek-ai/DeepSeek-V3
    architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", num_hidden_layers=61, num_attention_heads=128,
    num_key_value_heads=128, hidden_size=7168, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
    v_head_dim=128, n_routed_experts=256, n_shared_experts=1, num_experts_per_tok=8, moe_intermediate_size=2048,
    intermediate_size=18432, vocab_size=129280, max_position_embeddings=163840, torch_dtype="bfloat16")
DEEPSEEK_V32 = {**DEEPSEEK_V3, "architectures": ["DeepseekV32ForCausalLM"], "index_head_dim": 128}
GEMMA2_9B: dict[str, Any] = dict(  # google/gemma-2-9b: alternating sliding (4096) / global
    architectures=["Gemma2ForCausalLM"], model_type="gemma2", num_hidden_layers=42, num_attention_heads=16,
    num_key_value_heads=8, hidden_size=3584, head_dim=256, intermediate_size=14336, vocab_size=256000,
    max_position_embeddings=8192, sliding_window=4096, torch_dtype="bfloat16")
GEMMA3_TEXT: dict[str, Any] = dict(  # google/gemma-3-12b text_config: 5 local : 1 global
    architectures=["Gemma3ForConditionalGeneration"], model_type="gemma3",
    text_config=dict(model_type="gemma3_text", num_hidden_layers=48, num_attention_heads=16, num_key_value_heads=8,
                     hidden_size=3840, head_dim=256, sliding_window=1024, sliding_window_pattern=6,
                     max_position_embeddings=131072, vocab_size=262208, intermediate_size=15360),
    torch_dtype="bfloat16")
MISTRAL_V01: dict[str, Any] = dict(  # mistralai/Mistral-7B-v0.1: every layer slides over 4096
    architectures=["MistralForCausalLM"], model_type="mistral", num_hidden_layers=32, num_attention_heads=32,
    num_key_value_heads=8, hidden_size=4096, intermediate_size=14336, vocab_size=32000,
    max_position_embeddings=32768, sliding_window=4096, torch_dtype="bfloat16")
QWEN3_NEXT: dict[str, Any] = dict(  # Qwen/Qwen3-Next-80B-A3B: 12 of 48 layers full attention, 2 KV heads x 256
    architectures=["Qwen3NextForCausalLM"], model_type="qwen3_next", num_hidden_layers=48, num_attention_heads=16,
    num_key_value_heads=2, hidden_size=2048, head_dim=256, full_attention_interval=4, linear_num_key_heads=16,
    linear_num_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
    num_experts=512, num_experts_per_tok=10, moe_intermediate_size=512, vocab_size=151936,
    max_position_embeddings=262144, torch_dtype="bfloat16")
QWEN35_27B_SHAPE: dict[str, Any] = dict(  # the shape capacity.md §1 quotes: 48 GDN layers, ~3.2 MB each
    architectures=["Qwen3_5ForCausalLM"], model_type="qwen3_5", num_hidden_layers=64, num_attention_heads=24,
    num_key_value_heads=4, hidden_size=5120, head_dim=256,
    layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 16, linear_num_key_heads=16,
    linear_num_value_heads=48, linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
    vocab_size=248320, max_position_embeddings=262144, torch_dtype="bfloat16")
JAMBA: dict[str, Any] = dict(  # ai21labs/Jamba-v0.1: attention every 8th layer (offset 4), Mamba elsewhere
    architectures=["JambaForCausalLM"], model_type="jamba", num_hidden_layers=32, num_attention_heads=32,
    num_key_value_heads=8, hidden_size=4096, attn_layer_period=8, attn_layer_offset=4, mamba_d_state=16,
    mamba_d_conv=4, mamba_expand=2, num_experts=16, num_experts_per_tok=2, vocab_size=65536,
    max_position_embeddings=262144, torch_dtype="bfloat16")
NEMOTRON_H_SHAPE: dict[str, Any] = dict(  # nvidia Nemotron-H style pattern: M mamba2, * attention, - MLP
    architectures=["NemotronHForCausalLM"], model_type="nemotron_h", num_hidden_layers=8, num_attention_heads=32,
    num_key_value_heads=8, hidden_size=4096, head_dim=128, hybrid_override_pattern="M-M*M-M-",
    mamba_num_heads=128, mamba_head_dim=64, ssm_state_size=128, n_groups=8, conv_kernel=4, vocab_size=131072,
    max_position_embeddings=8192, torch_dtype="bfloat16")
