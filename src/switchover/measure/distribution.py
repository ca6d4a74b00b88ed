"""A metric's distribution over a step's requests: count, mean, std, min, max and the percentiles every report
shows (numpy linear interpolation, as vLLM's and SGLang's benchmarks print them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

PERCENTILES = (50, 90, 95, 99)


class Dist(BaseModel):
    """Summary of one metric over a step's requests (percentiles: numpy linear interpolation, as vLLM)."""

    count: int
    mean: float
    std: float  # population std (ddof=0), as vLLM and SGLang print
    min: float
    max: float
    p50: float
    p90: float
    p95: float
    p99: float
    quantiles: Literal["exact", "sketch"] = Field(
        default="exact",
        description="exact: numpy over every value; sketch: a DDSketch (relative error 0.5%), for "
        "steps with more values than the exact limit (bench/samples.py)",
    )

    def get(self, stat: str) -> float:
        return float(getattr(self, stat))


def describe(values: Sequence[float] | np.ndarray) -> Dist | None:
    """count/mean/std/min/max/p50/p90/p95/p99; None for no values."""
    if len(values) == 0:
        return None
    a = np.asarray(values, dtype=float)
    p = np.percentile(a, PERCENTILES)
    return Dist(
        count=int(a.size),
        mean=float(a.mean()),
        std=float(a.std()),
        min=float(a.min()),
        max=float(a.max()),
        p50=float(p[0]),
        p90=float(p[1]),
        p95=float(p[2]),
        p99=float(p[3]),
    )
