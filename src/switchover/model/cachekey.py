"""Cache keys that change when the model does: model id + weights hash + tokenizer hash + template hash + prompt
hash (a prefix, semantic or tokenizer cache keyed without them serves the old model's state)."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from switchover.model.source import resolve


class ModelHashes(BaseModel):
    """The three model-side parts of a cache key."""

    weights: str
    tokenizer: str
    template: str


class CacheKey(BaseModel):
    key: str
    model_id: str
    weights: str
    tokenizer: str
    template: str
    prompt: str


@lru_cache(maxsize=16)
def _hashes(path: str, mtime_ns: int) -> ModelHashes:
    from switchover.model.template import load_template
    from switchover.model.tokenizer import load_tokenizer
    from switchover.model.weights import weights_hash

    tpl = load_template(path).sha256 or "no-template"
    return ModelHashes(weights=weights_hash(path).hash, tokenizer=load_tokenizer(path).info.fingerprint, template=tpl)


def model_hashes(path: str | Path) -> ModelHashes:
    """Weights, tokenizer and template hashes of a model (cached per path and modification time)."""
    _, p = resolve(path)
    return _hashes(str(p.resolve()), p.stat().st_mtime_ns)


def cachekey(
    prompt: str,
    *,
    model_id: str,
    model_path: str | Path | None = None,
    hashes: ModelHashes | None = None,
    width: int = 16,
) -> CacheKey:
    """A cache key for `prompt` under a model; give the model's files (`model_path`) or precomputed `hashes`.

    >>> cachekey("hi", model_id="m", hashes=ModelHashes(weights="a" * 32, tokenizer="b" * 64, template="c" * 64)).key
    'm|aaaaaaaaaaaaaaaa|bbbbbbbbbbbbbbbb|cccccccccccccccc|8f434346648f6b96'
    """
    if hashes is None:
        if model_path is None:
            raise ValueError("cachekey needs model_path or hashes")
        hashes = model_hashes(model_path)
    ph = hashlib.sha256(prompt.encode()).hexdigest()
    parts = [model_id, hashes.weights[:width], hashes.tokenizer[:width], hashes.template[:width], ph[:width]]
    return CacheKey(
        key="|".join(parts), model_id=model_id, weights=parts[1], tokenizer=parts[2], template=parts[3], prompt=parts[4]
    )
