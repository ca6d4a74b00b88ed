"""Checking observations against what the engine profile (engines/data/<engine>.yaml, cited from source) predicts.
Each probe declares its own prediction next to its `run()` (`@probe(expect=...)`); a mismatch means the live server
differs from the profile: another version, a non-default flag, or a profile error. The probe reports it, it does not
decide the verdict."""

from __future__ import annotations

from typing import Any

from switchover.engines import ApiSemantics
from switchover.probe.registry import all_probes
from switchover.probe.report import plain_value


def expected(probe_id: str, api: ApiSemantics) -> Any | None:
    """The value the profile predicts for the probe with this id at default launch flags; None when it predicts
    nothing (or there is no such probe)."""
    probe = next((p for p in all_probes() if p.id == probe_id), None)
    return plain_value(probe.expected(api)) if probe is not None else None


def matches(observed: Any, predicted: Any) -> bool:
    """Equal, or (for dicts) every predicted key equal in the observation."""
    if isinstance(predicted, dict) and isinstance(observed, dict):
        return all(observed.get(k) == v for k, v in predicted.items())
    return bool(observed == predicted)
