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
    """stop.kept: whether the returned text ends before the stop string (trimmed) or includes it."""

    KEPT = "kept"
    TRIMMED = "trimmed"


class StopMatching(StrEnum):
    """stop.matching: stop strings matched on the detokenized text, or only on token sequences."""

    TEXT = "text"
    TOKEN = "token"


class Presence(StrEnum):
    """usage.stream_*: whether a usage object arrives in the stream."""

    PRESENT = "present"
    ABSENT = "absent"


class Seeded(StrEnum):
    """sampling.seed_repeat: whether one seed reproduces the same text."""

    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"


class Cached(StrEnum):
    """usage.cached_tokens: prompt_tokens_details.cached_tokens on a repeated prefix (hit, zero, or absent)."""

    HIT = "reported, hit"
    ZERO = "reported, zero"
    NOT_REPORTED = "not reported"


class Overflow(StrEnum):
    """length.over_context: what a request asking for more than the context gets (or `error_value(status)`)."""

    CLAMPED = "clamped to context"
    STOPPED_EARLY = "accepted, stopped early"
    NO_ERROR_IN_BUDGET = "accepted (no error within budget)"


class LargeCap(StrEnum):
    """length.max_tokens_over_context: a max_tokens above the whole context accepted (or `error_value(status)`)."""

    ACCEPTED = "accepted"


class Defaults(StrEnum):
    """sampling.defaults: what a request that omits the sampling fields samples like."""

    GREEDY = "greedy"
    OPENAI = "same as temperature=1, top_p=1"
    OTHER = "sampled with other server defaults"
    UNREPRODUCIBLE = "sampled (seed not reproducible; cannot compare to T=1)"
