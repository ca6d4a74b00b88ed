"""The probes' value vocabulary: the strings an observation (and a profile prediction) may hold, named once.

`Observation` stores them as plain strings, so saved reports and their comparison are unchanged."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """A request the server answered: taken (and the field used or dropped) or refused (`rejected(status)`)."""

    ACCEPTED = "accepted"
    IGNORED = "ignored"


def rejected_value(status: int | None) -> str:
    """The value of a refusal with this HTTP status."""
    return f"rejected {status}"


def error_value(status: int | None) -> str:
    """The value of an over-context request answered with this HTTP status."""
    return f"error {status}"


class StopKept(StrEnum):
    KEPT = "kept"
    TRIMMED = "trimmed"


class StopMatching(StrEnum):
    TEXT = "text"
    TOKEN = "token"


class Presence(StrEnum):
    PRESENT = "present"
    ABSENT = "absent"


class Seeded(StrEnum):
    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"


class Cached(StrEnum):
    HIT = "reported, hit"
    ZERO = "reported, zero"
    NOT_REPORTED = "not reported"


class Overflow(StrEnum):
    CLAMPED = "clamped to context"
    STOPPED_EARLY = "accepted, stopped early"
    NO_ERROR_IN_BUDGET = "accepted (no error within budget)"


class Defaults(StrEnum):
    GREEDY = "greedy"
    OPENAI = "same as temperature=1, top_p=1"
    OTHER = "sampled with other server defaults"
    UNREPRODUCIBLE = "sampled (seed not reproducible; cannot compare to T=1)"
