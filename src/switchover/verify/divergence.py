"""Greedy consistency between two outputs of the same prompt: where they part, and how far they agree."""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, Field

from switchover.fields import FinishReason

EARLY_CHARS = 8  # a divergence inside the first 8 characters is flagged
LENGTH_RATIO = 2.0  # ... and so is one output more than twice as long as the other
NEAR_TIE_NATS = 0.5  # at the divergence, the two tokens are this close in the new engine's logprobs

# what a divergence holds for each side (old_* and new_*: the same field once per side)
SideChars = Annotated[
    int, Field(description="Length of the side's output text (old_ or new_, as the field is named), characters")
]
SideTokens = Annotated[
    int | None, Field(description="Tokens in the side's output on the token_basis; None: no comparable tokens")
]
SideText = Annotated[str, Field(description="The side's whole output text")]


class Output(BaseModel):
    """One side's greedy output: text, tokens (when known), their logprobs and top alternatives."""

    text: str = ""
    tokens: list[str] | None = None  # the engine's own tokens (from logprobs or stream chunks)
    token_source: Literal["logprobs", "chunks"] | None = None  # where `tokens` came from
    ids: list[int] | None = None  # the text re-tokenized by ONE reference tokenizer, for comparing positions
    logprobs: list[float] | None = None
    top: list[dict[str, float]] | None = None
    finish_reason: FinishReason = None
    error: str | None = None


class Divergence(BaseModel):
    """Where two greedy outputs part and how much they still agree."""

    id: str
    kind: str = Field(description="The prompt's kind, from the prompt set (default 'user')")
    identical: bool = Field(description="Both requests succeeded and the two texts are equal")
    first_char: int | None = Field(
        default=None,
        description="Index of the first differing character (the shorter "
        "length when one text starts the other); None: identical, "
        "or a request failed",
    )
    first_token: int | None = Field(
        default=None,
        description="Index of the first differing token on the token_basis; "
        "None: the tokens agree, or none are comparable",
    )
    common_prefix: str = ""
    old_chars: SideChars = 0
    new_chars: SideChars = 0
    old_tokens: SideTokens = None
    new_tokens: SideTokens = None
    token_agreement: float | None = Field(
        default=None,
        description="Positions whose tokens agree / the longer length "
        "(1.0 for two empty outputs); None: no comparable "
        "tokens",
    )
    token_basis: str | None = Field(
        default=None,
        description="What the token figures compare (reference tokenizer "
        "ids, or the engines' own tokens from logprobs or "
        "chunks), or 'none: ...' with why there are none; None: "
        "a side has no tokens, or a request failed",
    )
    logprob_delta_mean: float | None = Field(
        default=None,
        description="Mean |old logprob - new logprob| over the "
        "common prefix of the engines' own tokens, "
        "nats; None: not both sides returned logprobs, "
        "or no common token",
    )
    logprob_delta_max: float | None = Field(
        default=None, description="The largest |old logprob - new logprob| over that prefix, nats"
    )
    tie_gap: float | None = Field(
        default=None,
        description="At the first differing token: the new engine's logprob of "
        "its own token minus its logprob of old's, nats (from its "
        "top alternatives); None: no differing token, or not both "
        "among them",
    )
    flags: list[str] = Field(
        default_factory=list,
        description="Why to look: a failed request, a divergence within "
        f"the first {EARLY_CHARS} characters, lengths more than "
        f"{LENGTH_RATIO:g}x apart",
    )
    old_text: SideText = ""
    new_text: SideText = ""
    old_finish: FinishReason = None
    new_finish: FinishReason = None


def first_difference(a: list[str] | str, b: list[str] | str) -> int | None:
    """Index of the first differing element; the shorter length when one is a prefix; None when equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def agreement(a: list[str], b: list[str]) -> float:
    """Share of positions whose tokens agree, over the longer sequence (1.0 for two empty outputs)."""
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    return sum(x == y for x, y in zip(a, b, strict=False)) / longest


def compare(case_id: str, kind: str, old: Output, new: Output) -> Divergence:
    """Compare two greedy outputs of the same prompt."""
    d = Divergence(
        id=case_id,
        kind=kind,
        identical=old.error is None and new.error is None and old.text == new.text,
        old_chars=len(old.text),
        new_chars=len(new.text),
        old_text=old.text,
        new_text=new.text,
        old_finish=old.finish_reason,
        new_finish=new.finish_reason,
    )
    if old.error or new.error:
        d.flags.append("request failed: " + "; ".join(e for e in (old.error, new.error) if e))
        return d
    d.first_char = first_difference(old.text, new.text)
    d.common_prefix = old.text if d.first_char is None else old.text[: d.first_char]
    seq_old, seq_new, d.token_basis = _comparable(old, new)
    if seq_old is not None and seq_new is not None:
        d.old_tokens, d.new_tokens = len(seq_old), len(seq_new)
        d.first_token = first_difference(seq_old, seq_new)
        d.token_agreement = round(agreement(seq_old, seq_new), 4)
    if old.tokens is not None and new.tokens is not None and old.token_source == new.token_source == "logprobs":
        engine_first = first_difference(old.tokens, new.tokens)
        common = engine_first if engine_first is not None else len(old.tokens)
        if old.logprobs is not None and new.logprobs is not None and common > 0:
            deltas = [
                abs(a - b)
                for a, b in zip(old.logprobs[:common], new.logprobs[:common], strict=False)
                if math.isfinite(a) and math.isfinite(b)
            ]
            if deltas:
                d.logprob_delta_mean = round(float(np.mean(deltas)), 4)
                d.logprob_delta_max = round(float(np.max(deltas)), 4)
        d.tie_gap = _tie_gap(old, new, engine_first)
    if not d.identical and d.first_char is not None and d.first_char < EARLY_CHARS:
        d.flags.append(f"diverges within the first {EARLY_CHARS} characters (at {d.first_char})")
    short, long_ = sorted((len(old.text), len(new.text)))
    if long_ > 0 and (short == 0 or long_ / short > LENGTH_RATIO):
        d.flags.append(f"lengths differ more than {LENGTH_RATIO:g}x ({len(old.text)} vs {len(new.text)} chars)")
    return d


def _comparable(old: Output, new: Output) -> tuple[list[str] | None, list[str] | None, str | None]:
    """Token sequences to compare position by position, and what they are: reference-tokenizer ids when both
    have them, else the engines' own tokens only when both came from the same place (a logprob token list
    against stream chunks compares different units, so there are no token figures then, and the basis says why)."""
    if old.ids is not None and new.ids is not None:
        return [str(i) for i in old.ids], [str(i) for i in new.ids], "reference tokenizer"
    if old.tokens is None or new.tokens is None:
        return None, None, None
    if old.token_source != new.token_source:
        return (
            None,
            None,
            (f"none: old tokens from {old.token_source}, new from {new.token_source} (pass --tokenizer to compare)"),
        )
    return old.tokens, new.tokens, f"engine tokens ({old.token_source})"


def _tie_gap(old: Output, new: Output, at: int | None) -> float | None:
    """At the first differing token: how much more the new engine preferred its token over the old one's."""
    if at is None or new.top is None or old.tokens is None or new.tokens is None:
        return None
    if at >= len(new.top) or at >= len(old.tokens) or at >= len(new.tokens):
        return None
    alts = new.top[at]
    if old.tokens[at] in alts and new.tokens[at] in alts:
        return round(alts[new.tokens[at]] - alts[old.tokens[at]], 4)
    return None


class GreedySummary(BaseModel):
    """Tolerant summaries over all prompts."""

    prompts: int
    identical: int = Field(description="Prompts whose two outputs are the same text")
    flagged: int = Field(description="Prompts with at least one flag (failed ones included)")
    failed: int = Field(description="Prompts whose request failed on either side; the figures below leave them out")
    token_agreement_mean: float | None = Field(
        default=None, description="Mean token_agreement over the prompts that have one; None: none has"
    )
    prefix_chars_p10: float | None = None
    prefix_chars_p50: float | None = None
    prefix_chars_p90: float | None = None
    prefix_tokens_p50: float | None = Field(
        default=None,
        description="Common prefix length, tokens on each prompt's token_basis: median; None: no comparable tokens",
    )
    logprob_delta_mean: float | None = Field(
        default=None,
        description="Mean of the prompts' logprob_delta_mean, nats; None: no prompt had logprobs on both sides",
    )
    near_ties: int = Field(
        default=0,
        description=f"Divergences whose two tokens were within {NEAR_TIE_NATS:g} nats in "
        "the new engine's logprobs (|tie_gap|)",
    )


def summarize(divs: list[Divergence]) -> GreedySummary:
    ok = [d for d in divs if not any(f.startswith("request failed") for f in d.flags)]
    s = GreedySummary(
        prompts=len(divs),
        identical=sum(d.identical for d in divs),
        flagged=sum(bool(d.flags) for d in divs),
        failed=len(divs) - len(ok),
    )
    if ok:
        prefix = np.array([len(d.common_prefix) for d in ok], dtype=float)
        s.prefix_chars_p10, s.prefix_chars_p50, s.prefix_chars_p90 = (
            round(float(np.percentile(prefix, q)), 1) for q in (10, 50, 90)
        )
    agree = [d.token_agreement for d in ok if d.token_agreement is not None]
    if agree:
        s.token_agreement_mean = round(float(np.mean(agree)), 4)
    ptoks = [d.first_token if d.first_token is not None else d.old_tokens for d in ok if d.old_tokens is not None]
    if ptoks:
        s.prefix_tokens_p50 = float(np.percentile(np.array(ptoks, dtype=float), 50))
    lds = [d.logprob_delta_mean for d in ok if d.logprob_delta_mean is not None]
    if lds:
        s.logprob_delta_mean = round(float(np.mean(lds)), 4)
    s.near_ties = sum(1 for d in ok if d.tie_gap is not None and abs(d.tie_gap) <= NEAR_TIE_NATS)
    return s
