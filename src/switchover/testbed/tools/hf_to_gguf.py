"""Run llama.cpp's convert_hf_to_gguf.py on our tiny models (runs in the vLLM venv).

usage: hf_to_gguf.py LLAMA_CPP_DIR HF_DIR OUT.gguf [converter args...]
The converter recognises BPE pre-tokenizers only by a hash of known vocabularies; ours is byte-level BPE
with the GPT-2 split regex, so every model class is told to report 'gpt-2'.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main() -> None:
    llama_dir = Path(sys.argv[1]).resolve()
    hf_dir, out = sys.argv[2], sys.argv[3]
    sys.path[:0] = [str(llama_dir), str(llama_dir / "gguf-py")]
    import conversion.base as base  # from the llama.cpp tree just put on the path

    for obj in vars(base).values():
        if isinstance(obj, type) and hasattr(obj, "get_vocab_base_pre"):
            obj.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
    script = llama_dir / "convert_hf_to_gguf.py"
    sys.argv = [str(script), hf_dir, "--outfile", out, *sys.argv[4:]]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
