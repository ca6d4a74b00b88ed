"""Mergeable quantile sketches for long steps: DataDog's DDSketch (relative-error guarantee, exact merge), fed in
vectorised batches so a million requests cost numpy time, not a Python call per value.

A `Quantiles` holds a DDSketch with a logarithmic mapping. `add_many` maps a batch of values to bin keys with
numpy (the library's own formula, `ceil(log2(v) * multiplier) + offset`) and adds each distinct key once with its
count; a value exactly on a bin edge may land in the neighbouring bin, which is still within the relative accuracy
(the edge is where both bins' representatives are `accuracy` away). `to_dict`/`from_dict` is the serialised form
(checkpoints, worker processes); merging two is exact (bin counts add).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ddsketch import DDSketch

RELATIVE_ACCURACY = 0.005  # a quantile from a sketch is within 0.5% of the true value at its rank


class Quantiles:
    """A DDSketch over non-negative values (latencies), with batch insertion and a plain serialised form."""

    __slots__ = ("accuracy", "sketch")

    def __init__(self, accuracy: float = RELATIVE_ACCURACY) -> None:
        self.accuracy = accuracy
        self.sketch = DDSketch(accuracy)

    @property
    def count(self) -> int:
        return int(self.sketch.count)

    def add_many(self, values: np.ndarray) -> None:
        """Add a batch of finite values >= 0 (negative values are refused: latencies cannot be)."""
        v = np.asarray(values, dtype=np.float64)
        if v.size == 0:
            return
        if not np.isfinite(v).all() or (v < 0).any():
            raise ValueError("sketch values must be finite and >= 0")
        sk = self.sketch
        mapping = sk._mapping
        pos = v[v > mapping.min_possible]
        zeros = v.size - pos.size
        if pos.size:
            keys = np.ceil(np.log2(pos) * mapping._multiplier) + mapping._offset
            uniq, counts = np.unique(keys.astype(np.int64), return_counts=True)
            store = sk._store
            for k, c in zip(uniq.tolist(), counts.tolist(), strict=True):
                store.add(k, float(c))
        sk._zero_count += zeros
        sk._count += v.size
        sk._sum += float(v.sum())
        lo, hi = float(v.min()), float(v.max())
        sk._min = min(sk._min, lo)
        sk._max = max(sk._max, hi)

    def quantile(self, q: float) -> float | None:
        """The value at quantile q in [0, 1] (relative error <= accuracy); None when empty."""
        value = self.sketch.get_quantile_value(q)
        return None if value is None else float(value)

    def merge(self, other: Quantiles) -> None:
        """Fold another sketch in (exact: bin counts add)."""
        self.sketch.merge(other.sketch)

    def to_dict(self) -> dict[str, Any]:
        """Bins as {key: count} plus the exact count/sum/min/max: JSON-ready."""
        sk = self.sketch
        store = sk._store
        bins = {str(store.offset + i): c for i, c in enumerate(store.bins) if c}
        return {
            "accuracy": self.accuracy,
            "bins": bins,
            "zero_count": sk._zero_count,
            "count": sk._count,
            "sum": sk._sum,
            "min": sk._min if sk._count else None,
            "max": sk._max if sk._count else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Quantiles:
        """The inverse of `to_dict`."""
        q = cls(float(d["accuracy"]))
        sk = q.sketch
        for k, c in d["bins"].items():
            sk._store.add(int(k), float(c))
        sk._zero_count = float(d["zero_count"])
        sk._count = float(d["count"])
        sk._sum = float(d["sum"])
        sk._min = math.inf if d.get("min") is None else float(d["min"])
        sk._max = -math.inf if d.get("max") is None else float(d["max"])
        return q


__all__ = ["RELATIVE_ACCURACY", "Quantiles"]
