"""Small model directories and GGUF files built in tmp: tokenizer, template, generation config, weights."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

CHATML = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
DEFAULT_SYSTEM = (
    "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are Bot.<|im_end|>\\n' }}{% endif %}" + CHATML
)
CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "The quick brown fox jumps over the lazy dog.",
    "hello world, hello tokens",
    "import os\nprint(os.getcwd())",
]


def build_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 20, trainer)
    return tok


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        raw = arr.astype(np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_model(
    root: Path,
    name: str,
    *,
    vocab: int = 300,
    template: str = CHATML,
    temperature: float | None = None,
    ctx: int = 2048,
    seed: int = 0,
    layers: int = 2,
) -> Path:
    d = root / name
    d.mkdir(parents=True)
    build_tokenizer(vocab).save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}))
    (d / "chat_template.jinja").write_text(template)
    gen = {"eos_token_id": 2} | ({"temperature": temperature} if temperature is not None else {})
    (d / "generation_config.json").write_text(json.dumps(gen))
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": ctx}))
    rng = np.random.default_rng(seed)
    write_safetensors(d / "model.safetensors", {f"layer{i}.w": rng.standard_normal((8, 8)) for i in range(layers)})
    return d


@pytest.fixture
def models(tmp_path: Path):
    return lambda name, **kw: make_model(tmp_path, name, **kw)
