"""One metric's values over a step in bounded memory: exact up to a limit, then a seeded uniform reservoir of that
size, beside a DDSketch of every value and exact count/mean/std/min/max (Chan's parallel update).

Up to `limit` values nothing is lost: percentiles are numpy's, as before. Past it, a step's percentiles come from
the sketch (within its relative accuracy) and the knee's bootstrap and the A/B tests use the reservoir (a uniform
sample, so they stay valid with fewer values). Everything merges: across repeats, checkpoints and worker processes.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from switchover.bench.sketch import Quantiles
from switchover.measure.distribution import PERCENTILES, Dist, describe

BATCH = 8192  # values buffered before they are folded into the sketch and the running moments


class Samples:
    """Values of one metric; `add`/`extend` are O(1) per value, memory is O(limit)."""

    __slots__ = ("_m2", "_max", "_mean", "_min", "_pending", "_rng", "count", "kept", "limit", "sketch")

    def __init__(self, limit: int | None, seed: int = 0) -> None:
        self.limit = limit  # None: keep every value (exact, unbounded: for short, offline summaries)
        self.kept = array("d")  # every value while count <= limit, then a uniform reservoir of `limit` values
        self.sketch = Quantiles()
        self.count = 0
        self._pending = array("d")
        self._mean = 0.0
        self._m2 = 0.0
        self._min = float("inf")
        self._max = float("-inf")
        self._rng = np.random.default_rng(seed)

    def add(self, value: float) -> None:
        self._pending.append(value)
        if len(self._pending) >= BATCH:
            self.flush()

    def extend(self, values: list[float]) -> None:
        self._pending.extend(values)
        if len(self._pending) >= BATCH:
            self.flush()

    def add_array(self, values: np.ndarray) -> None:
        """`extend` for a float64 array (the vectorised accumulation of bench/batch.py)."""
        if values.size:
            self._pending.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
            if len(self._pending) >= BATCH:
                self.flush()

    def flush(self) -> None:
        """Fold the buffered values into the kept values, the sketch and the moments."""
        if not self._pending:
            return
        batch = np.frombuffer(self._pending, dtype=np.float64).copy()
        self._pending = array("d")
        self.sketch.add_many(batch)
        n_a, n_b = self.count, batch.size
        mean_b = float(batch.mean())
        m2_b = float(((batch - mean_b) ** 2).sum())
        delta = mean_b - self._mean
        total = n_a + n_b
        self._mean += delta * n_b / total
        self._m2 += m2_b + delta * delta * n_a * n_b / total
        self._min = min(self._min, float(batch.min()))
        self._max = max(self._max, float(batch.max()))
        self._keep(batch, n_a)
        self.count = total

    def _keep(self, batch: np.ndarray, seen: int) -> None:
        limit = self.limit
        if limit is None or seen + batch.size <= limit:
            self.kept.frombytes(batch.tobytes())
            return
        room = max(limit - len(self.kept), 0)
        if room:
            self.kept.frombytes(batch[:room].tobytes())
        rest = batch[room:]
        # reservoir (Algorithm R): the value numbered n (0-based) replaces a random slot when j = U[0, n] < limit
        numbers = np.arange(seen + room, seen + room + rest.size)
        js = (self._rng.random(rest.size) * (numbers + 1)).astype(np.int64)
        hit = js < limit
        kept = np.frombuffer(self.kept, dtype=np.float64)
        kept[js[hit]] = rest[hit]  # later hits overwrite earlier ones, as the sequential algorithm does

    @property
    def exact(self) -> bool:
        """Whether every value is still kept (percentiles are then exact)."""
        self.flush()
        return self.limit is None or self.count <= self.limit

    def values(self) -> np.ndarray:
        """Every value while exact, else the reservoir (a uniform sample of `limit` of them)."""
        self.flush()
        return np.frombuffer(self.kept, dtype=np.float64).copy()

    def dist(self) -> Dist | None:
        """count/mean/std/min/max exactly; percentiles exact while every value is kept, else from the sketch."""
        self.flush()
        if self.count == 0:
            return None
        if self.exact:
            return describe(self.values())
        qs = [self.sketch.quantile(p / 100) for p in PERCENTILES]
        p = [float(q) for q in qs if q is not None]
        if len(p) != len(qs):  # the sketch holds every value: empty here is a broken state, never a 0 percentile
            raise ValueError(f"sketch holds {self.sketch.count} values, samples count {self.count}")
        return Dist(
            count=self.count,
            mean=self._mean,
            std=float(np.sqrt(self._m2 / self.count)),
            min=self._min,
            max=self._max,
            p50=p[0],
            p90=p[1],
            p95=p[2],
            p99=p[3],
            quantiles="sketch",
        )

    def merge(self, other: Samples) -> None:
        """Fold `other` in: sketches and moments exactly; kept values concatenated while exact, else a uniform
        sample of both populations (hypergeometric split of the reservoir)."""
        self.flush()
        other.flush()
        if other.count == 0:
            return
        n_a, n_b = self.count, other.count
        total = n_a + n_b
        delta = other._mean - self._mean
        self._mean += delta * n_b / total
        self._m2 += other._m2 + delta * delta * n_a * n_b / total
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)
        self.sketch.merge(other.sketch)
        limit = self.limit
        if limit is None or total <= limit:
            self.kept.extend(other.kept)
        else:
            a, b = self.values(), other.values()
            take_a = int(self._rng.hypergeometric(n_a, n_b, limit)) if n_a else 0
            take_a = min(take_a, a.size)
            take_b = min(limit - take_a, b.size)
            pick = np.concatenate([self._rng.permutation(a)[:take_a], self._rng.permutation(b)[:take_b]])
            self.kept = array("d", pick.tolist())
        self.count = total

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready state (checkpoints, worker processes)."""
        self.flush()
        return {
            "limit": self.limit,
            "count": self.count,
            "kept": self.kept.tolist(),
            "sketch": self.sketch.to_dict(),
            "mean": self._mean,
            "m2": self._m2,
            "min": None if self.count == 0 else self._min,
            "max": None if self.count == 0 else self._max,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], seed: int = 0) -> Samples:
        s = cls(d["limit"], seed)
        s.count = int(d["count"])
        s.kept = array("d", d["kept"])
        s.sketch = Quantiles.from_dict(d["sketch"])
        if s.sketch.count != s.count or len(s.kept) > s.count:  # a checkpoint edited or cut: refuse, do not guess
            raise ValueError(
                f"inconsistent samples: {s.count} counted, {s.sketch.count} in the sketch, {len(s.kept)} kept"
            )
        s._mean, s._m2 = float(d["mean"]), float(d["m2"])
        if d.get("min") is not None:
            s._min, s._max = float(d["min"]), float(d["max"])
        return s


__all__ = ["Samples"]
