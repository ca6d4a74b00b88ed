"""Dequantize a llama-architecture GGUF into an HF safetensors folder that vLLM can serve.

usage: gguf_to_hf.py MODEL.gguf OUT_DIR   (runs in the vLLM venv; needs the `gguf` package)
transformers refuses to save a model loaded from GGUF, so the weights are moved into a fresh model built
from the same config without its quantization_config.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main() -> None:
    gguf = Path(sys.argv[1]).resolve()
    out = Path(sys.argv[2])
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    fresh.load_state_dict(loaded.state_dict(), strict=False)
    fresh.tie_weights()
    tok.save_pretrained(out)
    fresh.save_pretrained(out)
    print(f"{out}: {sum(p.numel() for p in fresh.parameters())} parameters")


if __name__ == "__main__":
    main()
