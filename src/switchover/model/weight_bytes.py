"""Quantization-aware weight bytes: what a parameter inventory (`model/inventory.py`) weighs once loaded, priced
by the checkpoint's quantization scheme (`quantization.py`)."""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from switchover.model.inventory import WeightGroup, per_rank_params
from switchover.quantization import QuantScheme, is_ignored


def is_quantized(group: WeightGroup, scheme: QuantScheme) -> bool:
    """Whether the scheme quantizes this group (Linear, not kept, targeted, not ignored)."""
    if not group.linear or group.role in scheme.kept:
        return False
    if scheme.targets is not None and group.role not in scheme.targets:
        return False
    return not is_ignored(group.name, scheme)


def group_bytes(
    group: WeightGroup, scheme: QuantScheme | None, params: float | None = None, hidden: int | None = None
) -> float:
    """Bytes of a group (or of `params` of it, e.g. one TP rank's share) as loaded; with `hidden`, quantized
    weights get the engine's hidden-dim padding (the files hold the unpadded size)."""
    n = group.params if params is None else params
    if scheme is None or not is_quantized(group, scheme):
        return 2.0 * n
    share = n / group.params if group.params else 0.0
    out, inn, count = group.out_features, group.in_features, group.count
    if hidden and scheme.loaded_hidden_multiple and group.hidden_axis:
        padded = -(-hidden // scheme.loaded_hidden_multiple) * scheme.loaded_hidden_multiple
        if group.hidden_axis == "in":
            inn = padded
        else:
            out = padded
    if scheme.granularity == "tensor":
        scales = 1
    elif scheme.granularity == "channel":
        scales = out
    elif scheme.granularity == "group":
        scales = out * math.ceil(inn / (scheme.group_size or inn))
    else:
        bo, bi = scheme.block or (128, 128)
        scales = math.ceil(out / bo) * math.ceil(inn / bi)
    per_tensor = out * inn * scheme.bits / 8 + scales * scheme.scale_bytes + scheme.per_tensor_extra_bytes
    if scheme.zero_point:
        per_tensor += scales * scheme.bits / 8
    per_tensor += inn * scheme.index_bytes_per_input
    return per_tensor * count * share


class WeightBytes(BaseModel):
    """Estimated bytes of a parameter inventory under a scheme, in total and on one TP rank."""

    total_bytes: float
    params: int
    quantized_params: int
    rank_bytes_tp: dict[int, float] = Field(default_factory=dict)


def price(
    groups: list[WeightGroup],
    scheme: QuantScheme | None,
    kv_heads: int | None,
    tps: tuple[int, ...] = (1, 2, 4, 8, 16),
    hidden: int | None = None,
) -> WeightBytes:
    """Total bytes (as loaded) and per-rank bytes for common TP sizes."""
    total = sum(group_bytes(g, scheme, hidden=hidden) for g in groups)
    quantized = sum(g.params for g in groups if scheme is not None and is_quantized(g, scheme))
    ranks = {tp: sum(group_bytes(g, scheme, per_rank_params(g, tp, kv_heads), hidden) for g in groups) for tp in tps}
    return WeightBytes(
        total_bytes=total, params=sum(g.params for g in groups), quantized_params=quantized, rank_bytes_tp=ranks
    )
