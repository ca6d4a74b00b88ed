"""When to give up a migration (docs/rollout.md, `rollout abandon`): the criteria `rollout abandon` takes, kept apart
from the state machine so the CLI's help can list them without importing the rollout's machinery."""

from __future__ import annotations

from pydantic import BaseModel


class Criterion(BaseModel):
    """One of the abandonment criteria (docs/rollout.md)."""

    key: str
    text: str


# When to give up the migration (docs/rollout.md): consider stopping when any two of these hold.
ABANDON_CRITERIA: tuple[Criterion, ...] = (
    Criterion(
        key="hard_metrics",
        text="two of the three hard metrics miss structurally: not a tuning problem, "
        "the engine's way of working does not fit the input shape",
    ),
    Criterion(key="unreadable_logs", text="nobody on the team can read the new engine's scheduler logs"),
    Criterion(key="release_cadence", text="the new engine's release cadence cannot keep up with the fixes needed"),
    Criterion(
        key="narrow_gain",
        text="the gain is concentrated in one scenario; everything else needs extra compensating logic",
    ),
)
ABANDON_THRESHOLD = 2  # "any two of the above"
