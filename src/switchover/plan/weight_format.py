"""Whether an engine loads a checkpoint's weight format on a GPU, and with which kernel: the format matrix's
verdict (engines/data/matrix/formats.yaml) as `plan capacity` reports it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from switchover.engines.compat import lookup_at, sm_of
from switchover.engines.formats import format_of_card
from switchover.model.card import ModelCard


class WeightFormat(BaseModel):
    """Whether the engine loads this checkpoint's weight format on this GPU, and with which kernel (the format
    matrix, engines/data/matrix/formats.yaml)."""

    format: str = Field(description="format key of the matrix, or 'unknown'")
    named_from: str = Field(description="how the format was named (quantization_config, GGUF, none)")
    loads: bool | None = Field(description="None: no fact in the matrix for this combination")
    kernel: str | None = None
    reason: str
    source: str | None = None
    verified: bool = False


def weight_format(
    card: ModelCard, qc: dict[str, Any] | None, engine: str, compute_capability: str | None, version: str | None = None
) -> WeightFormat:
    """The matrix's verdict for this checkpoint on `engine` at release `version` (None: the newest known) on a GPU
    of `compute_capability` (None: a GPU given by memory size only, so only a rule without a compute-capability
    range can answer)."""
    fmt, why = format_of_card(card, qc)
    if fmt is None:
        return WeightFormat(
            format="unknown",
            named_from=why,
            loads=None,
            reason=f"unknown: the checkpoint's format is not in the matrix ({why})",
        )
    v = lookup_at(engine, fmt, "cuda", sm_of(compute_capability), version)
    return WeightFormat(
        format=fmt,
        named_from=why,
        loads=v.loads,
        kernel=v.kernel,
        reason=v.reason,
        source=v.source,
        verified=v.verified,
    )
