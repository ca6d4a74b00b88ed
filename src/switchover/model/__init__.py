"""The model side of a migration: its shape for capacity planning (card), and its tokenizer, chat template and
generation defaults (fingerprints and diffs)."""

from switchover.model.card import (
    AttentionSpec,
    LayerKind,
    ModelCard,
    MoESpec,
    StateSpec,
    card_from_config,
    load_model_card,
)
from switchover.model.sizing import WeightsInfo

__all__ = [
    "AttentionSpec",
    "LayerKind",
    "MoESpec",
    "ModelCard",
    "StateSpec",
    "WeightsInfo",
    "card_from_config",
    "load_model_card",
]
