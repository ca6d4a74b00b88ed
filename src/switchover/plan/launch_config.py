"""Launch settings that are not command-line words: the YAML of a config-file flag (vLLM and SGLang `--config`,
trtllm-serve `--extra_llm_api_options` / `--config`, keys spelled like the options or nested LLM-API fields), a
launch pasted as such a YAML, and environment variables (engine arguments given as env vars, CUDA_VISIBLE_DEVICES,
library settings). Each becomes one record of what was set, never dropped unsaid."""

from __future__ import annotations

import re
from typing import Any

from switchover.engines import EngineProfile
from switchover.yamlfile import load_document

# Library settings every engine process reads the same way (Hugging Face hub, NCCL, CUDA, PyTorch, OpenMP): passed
# on unchanged to whatever engine runs next. CUDA_VISIBLE_DEVICES is a fact of its own (which GPUs the process sees).
LIBRARY_ENV = (
    "HF_",
    "HUGGING_FACE_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "TOKENIZERS_",
    "NCCL_",
    "CUDA_",
    "TORCH_",
    "PYTORCH_",
    "OMP_",
    "MKL_",
    "NVIDIA_",
    "GLOO_",
    "UCX_",
    "TRITON_",
    "NVTE_",
)
VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
# CUDA C++ Programming Guide, "CUDA Environment Variables": the devices a process sees, in order
VISIBLE_DEVICES_SOURCE = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#env-vars"
MODEL_KEYS = ("model", "model_path", "model-path", "model_id", "model-id", "model_name_or_path")


def visible_devices(value: str) -> int | None:
    """How many GPUs CUDA_VISIBLE_DEVICES (or docker --gpus) selects: `0,1` -> 2, `device=0,1` -> 2, `2` (docker's
    count) -> 2; None for `all`, an empty value or something else."""
    text = value.strip().strip("'\"")
    if text.startswith("device="):
        text = text[len("device=") :]
    if not text or text.lower() in ("all", "none", "void"):
        return None
    items = [x for x in text.split(",") if x.strip()]
    if all(re.fullmatch(r"\s*(\d+|GPU-[0-9a-fA-F-]+|MIG-[\w/-]+)\s*", x) for x in items):
        return len(items)
    return None


def env_kind(profile: EngineProfile, name: str) -> str:
    """What an environment variable is to this engine: 'devices', 'library' (read by a library, same in any engine),
    'engine' (one of the engine's own VLLM_... variables) or 'other'."""
    if name == VISIBLE_DEVICES:
        return "devices"
    if any(name.startswith(p) for p in profile.launch.env_prefixes):
        return "engine"
    if name.startswith(LIBRARY_ENV):
        return "library"
    return "other"


def read_yaml_mapping(text: str, what: str) -> dict[str, Any] | list[Any] | None:
    """A YAML document as data (None when it is a scalar: not a mapping of settings)."""
    data = load_document(text, what).data
    return data if isinstance(data, dict | list) else None


def yaml_keys(profile: EngineProfile) -> dict[str, str]:
    """YAML key (dotted; each of its '|' spellings) -> intent, from the profile's `yaml_key`s."""
    return {key: intent for intent, spec in profile.flags.items() if spec.yaml_key for key in spec.yaml_key.split("|")}


def yaml_sections(profile: EngineProfile) -> dict[str, dict[str, str]]:
    """Top-level YAML key of a section (kv_cache_config, speculative_config) -> {the rest of each key inside it
    ('|' between spellings): intent}: the intents a section's mapping sets, as a JSON flag's keys."""
    out: dict[str, dict[str, str]] = {}
    for intent, spec in profile.flags.items():
        if not spec.yaml_key or "." not in spec.yaml_key:
            continue
        spellings = spec.yaml_key.split("|")
        top = spellings[0].split(".", 1)[0]
        inner = [s.split(".", 1)[1] for s in spellings if s.startswith(top + ".")]
        out.setdefault(top, {})["|".join(inner)] = intent
    return out


def option_spellings(key: str) -> list[str]:
    """How a config key may name a command-line option: as written, with dashes, with underscores."""
    bare = key.lstrip("-")
    return list(dict.fromkeys([f"--{bare}", f"--{bare.replace('_', '-')}", f"--{bare.replace('-', '_')}"]))
