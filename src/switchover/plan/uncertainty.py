"""How far a blind capacity answer may be off: the range of the planner's own residuals on logged start-ups.

`plan/data/accuracy.yaml` is written by `python bench/plan_accuracy.py --write-residuals` from the evaluation
set in bench/data/plan_points.yaml (points never used to fit a coefficient): per engine, the lowest and highest
signed error predicted/logged - 1 of the blind answer. The true pool lies in [pred/(1+high), pred/(1+low)].
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, Field


class PoolRange(BaseModel):
    """The predicted pool with the range its evaluation residuals give."""

    tokens: int
    low_tokens: int
    high_tokens: int | None = Field(description="None: unbounded (some logged pool was far above the prediction)")
    points: int
    median_abs_error: float
    source: str


@cache
def _residuals() -> dict[str, Any]:
    try:
        text = resources.files("switchover.plan").joinpath("data").joinpath("accuracy.yaml").read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return {}
    data = yaml.safe_load(text) or {}
    return dict(data.get("engines") or {})


def residual_key(engine: str, dense: bool) -> str:
    """Residuals are kept per engine and per model kind: dense attention models apart from the rest."""
    return f"{engine}/{'dense' if dense else 'other'}"


def pool_range(engine: str, dense: bool, tokens: int) -> PoolRange | None:
    """The range around a blind prediction, or None when the engine has no evaluated points of this kind."""
    entry = _residuals().get(residual_key(engine, dense))
    if not entry or tokens <= 0:
        return None
    low, high = min(float(entry["low"]), 0.0), max(float(entry["high"]), 0.0)
    upper = None if low <= -0.95 else int(tokens / (1 + low))
    return PoolRange(
        tokens=tokens,
        low_tokens=int(tokens / (1 + high)),
        high_tokens=upper,
        points=int(entry["points"]),
        median_abs_error=float(entry["median_abs"]),
        source=f"blind residuals of {entry['points']} logged {residual_key(engine, dense)} start-ups "
        "(bench/plan_accuracy.py, evaluation set)",
    )
