"""A built-in gate's verdict: the record gates.py produces and the holding window and reports read."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from switchover.config.rollout import GateName

GateVerdict = Literal["pass", "hold", "fail"]


class GateResult(BaseModel):
    """One built-in gate: pass, hold or fail, the value seen, the line it was held to, and why."""

    gate: GateName
    verdict: GateVerdict
    hard: bool
    observed: float | None = None
    threshold: float
    samples: int
    reason: str
