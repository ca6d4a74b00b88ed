"""Models for `plan choose` and `hw diff -m`: what `plan capacity -m` accepts, plus `builtin:ID` for the public
configs shipped in plan/data/choose_models.yaml (so documented scenarios run offline), with the raw
quantization_config beside the card (the card keeps the method, not the variant a format is named from)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from switchover.errors import BadInput
from switchover.model.card import ModelCard, card_from_config, load_model_card
from switchover.model.hub import fetch_repo, looks_like_repo_id
from switchover.model.source import read_json

BUILTIN = "builtin:"


@cache
def builtin_models() -> dict[str, dict[str, Any]]:
    """id -> {source, config} of the shipped configs."""
    folder = resources.files("switchover.plan").joinpath("data")  # a namespace package: one part per call
    text = folder.joinpath("choose_models.yaml").read_text(encoding="utf-8")
    data: dict[str, dict[str, Any]] = yaml.safe_load(text)
    return data


def _raw_quant_config(ref: str) -> dict[str, Any] | None:
    """The quantization_config of a local model (folder or config.json) or cached HF repo; None for GGUF/none."""
    p = Path(ref).expanduser()
    if not p.exists() and looks_like_repo_id(ref):
        p = fetch_repo(ref)  # load_model_card already fetched it: this is the cache
    if p.is_file() and p.suffix == ".gguf":
        return None
    config = p / "config.json" if p.is_dir() else p
    cfg = read_json(config) if config.suffix == ".json" else None
    if cfg is None:
        return None
    qc = cfg.get("quantization_config")
    if not qc and isinstance(cfg.get("text_config"), dict):
        qc = cfg["text_config"].get("quantization_config")
    if not qc:
        qc = read_json(config.parent / "hf_quant_config.json")
    return qc if isinstance(qc, dict) else None


def resolve_model(ref: str) -> tuple[ModelCard, dict[str, Any] | None]:
    """(card, raw quantization_config) for a model reference; BadInput naming the reference otherwise."""
    if ref.startswith(BUILTIN):
        key = ref.removeprefix(BUILTIN)
        table = builtin_models()
        if key not in table:
            raise BadInput(f"--model {ref[:80]!r}: no such builtin config", hint=f"builtin: {', '.join(table)}")
        entry = table[key]
        card = card_from_config(entry["config"], name=key, source=f"builtin:{key} ({entry['source']})")
        qc = entry["config"].get("quantization_config")
        return card, qc if isinstance(qc, dict) else None
    card = load_model_card(ref)
    return card, _raw_quant_config(ref)
