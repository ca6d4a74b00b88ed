"""Generation defaults: what the model files ask for (generation_config.json / GGUF general.sampling.*) and what a
request without sampling fields actually gets on each engine (engine profiles: default sampling, and whether the
model's defaults are applied)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from switchover.engines import list_profiles, load_profile
from switchover.model.source import gguf_fields, read_json, resolve

SAMPLING = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "max_new_tokens",
)
_ALIASES = {
    "temp": "temperature",
    "repeat_penalty": "repetition_penalty",
    "penalty_repeat": "repetition_penalty",
    "max_tokens": "max_new_tokens",
}


def _canon(name: str) -> str:
    return _ALIASES.get(name, name)


class GenerationDefaults(BaseModel):
    source: str
    origin: str | None  # generation_config.json | GGUF general.sampling.* | None (the model sets nothing)
    fields: dict[str, Any] = Field(default_factory=dict)  # sampling fields only, canonical names
    eos_token_id: Any = None


def load_generation(path: str | Path) -> GenerationDefaults:
    kind, p = resolve(path)
    if kind == "gguf":
        meta = gguf_fields(p)
        fields = {
            _canon(k.removeprefix("general.sampling.")): v for k, v in meta.items() if k.startswith("general.sampling.")
        }
        fields = {k: v for k, v in fields.items() if k in SAMPLING}
        return GenerationDefaults(
            source=str(p),
            origin="GGUF general.sampling.*" if fields else None,
            fields=fields,
            eos_token_id=meta.get("tokenizer.ggml.eos_token_id"),
        )
    cfg = read_json(p / "generation_config.json")
    if cfg is None:
        return GenerationDefaults(source=str(p), origin=None)
    fields = {_canon(k): v for k, v in cfg.items() if _canon(k) in SAMPLING}
    return GenerationDefaults(
        source=str(p), origin="generation_config.json", fields=fields, eos_token_id=cfg.get("eos_token_id")
    )


class EffectiveRow(BaseModel):
    field: str
    old: Any
    old_from: str  # model | engine default | (none)
    new: Any
    new_from: str
    changed: bool


class GenerationDiff(BaseModel):
    old: GenerationDefaults
    new: GenerationDefaults
    file_changes: dict[str, tuple[Any, Any]] = Field(default_factory=dict)
    engines: dict[str, list[EffectiveRow]] = Field(default_factory=dict)  # "vllm" or "vllm -> llamacpp"
    notes: list[str] = Field(default_factory=list)


def effective(model: GenerationDefaults, engine: str) -> dict[str, tuple[Any, str]]:
    """What a request that omits sampling fields gets from `engine` serving this model: value and origin."""
    api = load_profile(engine).api
    out: dict[str, tuple[Any, str]] = {
        _canon(k): (v, "engine default") for k, v in api.default_sampling.items() if _canon(k) in SAMPLING
    }
    if api.generation_config_applied:
        for k, v in model.fields.items():
            out[k] = (v, "model")
    return out


def diff_generation(
    old: GenerationDefaults, new: GenerationDefaults, old_engine: str | None = None, new_engine: str | None = None
) -> GenerationDiff:
    """File-level changes, and effective defaults per engine (or old engine -> new engine when both are given)."""
    d = GenerationDiff(old=old, new=new)
    for k in sorted(set(old.fields) | set(new.fields)):
        if old.fields.get(k) != new.fields.get(k):
            d.file_changes[k] = (old.fields.get(k), new.fields.get(k))
    pairs = [(old_engine, new_engine)] if old_engine and new_engine else [(e, e) for e in list_profiles()]
    for a, b in pairs:
        assert a is not None and b is not None
        ea, eb = effective(old, a), effective(new, b)
        rows = []
        for k in [f for f in SAMPLING if f in ea or f in eb]:
            va, fa = ea.get(k, (None, "(none)"))
            vb, fb = eb.get(k, (None, "(none)"))
            rows.append(EffectiveRow(field=k, old=va, old_from=fa, new=vb, new_from=fb, changed=va != vb))
        d.engines[a if a == b else f"{a} -> {b}"] = rows
    for label, rows in d.engines.items():
        changed = [r.field for r in rows if r.changed]
        if changed:
            d.notes.append(f"{label}: a request without sampling fields changes {', '.join(changed)}")
    return d
