"""The percentile every switchover figure uses: linear interpolation between closest ranks (numpy's default, as vLLM's
bench reports them). Sketches for long runs (bench/sketch.py) answer the same question within their error."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The q-th percentile with linear interpolation between closest ranks (numpy's default, as vLLM): the one
    definition every switchover figure uses."""
    if len(values) == 0:
        raise ValueError("percentile of no values")
    return float(np.percentile(np.asarray(values, dtype=float), q))
