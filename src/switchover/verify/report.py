"""Typed results of `switchover verify`."""

from __future__ import annotations

from pydantic import BaseModel, Field

from switchover.verify.divergence import Divergence, GreedySummary


class StructuredCase(BaseModel):
    """One JSON-schema prompt on one side."""

    id: str
    status: str  # valid | invalid | rejected | error
    reason: str | None = None
    text: str = ""


class StructuredSide(BaseModel):
    url: str
    cases: list[StructuredCase]
    valid: int
    total: int

    @property
    def unanswered(self) -> int:
        """Requests that got no answer (timeout, connection): nothing was learnt about validity from them."""
        return sum(c.status == "error" for c in self.cases)

    @property
    def judged(self) -> int:
        """The denominator of the rate: answered outputs and refusals of the response_format (HTTP status)."""
        return self.total - self.unanswered

    @property
    def rate(self) -> float | None:
        """Share of valid outputs among the judged requests; None when none was judged (not 0)."""
        return self.valid / self.judged if self.judged else None

    def summary(self) -> str:
        out = f"{self.valid}/{self.judged} valid"
        return out + (f" ({self.unanswered} more got no answer)" if self.unanswered else "")


class LongInputCheck(BaseModel):
    """One long input on one side: what came back and what looked wrong."""

    target_fraction: float
    prompt_tokens: int | None = None
    status: str  # ok | error
    error: str | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    repetition: float | None = None
    loop: bool = False
    early_stop: bool | None = False  # None: the server gave no token count, so not judged
    script_drift: str | None = None
    text: str = ""


class Boundary(BaseModel):
    """The longest input that actually succeeded, found by bisection on the live server."""

    configured_context: int | None
    longest_ok_prompt_tokens: int | None = None  # usage.prompt_tokens (chat template included)
    longest_ok_text_tokens: int | None = None  # the user text alone, by the server's /tokenize (None without it)
    shortest_failed_text_tokens: int | None = None
    longest_ok_target_tokens: int | None = None  # the bisection's own variable: the text length it aimed at
    shortest_failed_target_tokens: int | None = None
    failure: str | None = None
    steps: int = 0


class LongInputSide(BaseModel):
    url: str
    context: int | None
    checks: list[LongInputCheck] = Field(default_factory=list)
    boundary: Boundary | None = None
    skipped: str | None = None


class EquivalenceReport(BaseModel):
    """Everything `verify` measured."""

    old_url: str
    new_url: str
    model_old: str | None
    model_new: str | None
    greedy: list[Divergence] = Field(default_factory=list)
    summary: GreedySummary | None = None
    structured: list[StructuredSide] = Field(default_factory=list)
    long_inputs: list[LongInputSide] = Field(default_factory=list)
    partial: bool = False
    partial_reason: str | None = None
