"""Request validation that differs between engines (issue 13's audit of their sources): which of several length
fields wins, engine-native keys overriding OpenAI ones, max_tokens 0, sampling values out of OpenAI's ranges
(refused or silently clamped), n above the server's parallel slots, whether n samples differ under one seed, and
`user` / `metadata` passthrough. Sources: vLLM 0.32 `entrypoints/openai/chat_completion/protocol.py` and
`sampling_params.py` (`_verify_args`); llama.cpp b11434 `tools/server/server-schema.cpp` (fields, aliases in order,
soft limits clamp and hard limits refuse) and `server-common.cpp` (`n_predict` overrides `max_tokens`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from switchover.probe.catalog._util import end_if, not_answered, refusal, rejected
from switchover.probe.context import ProbeContext
from switchover.probe.registry import Declaration, probe
from switchover.probe.report import Observation
from switchover.probe.values import Outcome, rejected_value
from switchover.wire import RequestRecord


async def _no_eos(ctx: ProbeContext) -> dict[str, Any]:
    """logit_bias suppressing the end tokens (when the server's /tokenize finds them), so lengths are reached."""
    ends = await ctx.end_tokens()
    return {"logit_bias": {str(i): -100 for i, _ in ends}} if ends else {}


def _tokens(rec: RequestRecord) -> int | None:
    if rec.usage and rec.usage.completion_tokens is not None:
        return rec.usage.completion_tokens
    return None


def _outcome(rec: RequestRecord) -> str:
    rej = rejected(rec)
    return rejected_value(rej["status"]) if rej else Outcome.ACCEPTED


@dataclass(frozen=True, kw_only=True)
class WhichLimit(Declaration):
    """A probe that sends two length limits at once (temperature 0, EOS suppressed) and names the one the token count
    shows."""

    limits: dict[str, int]  # the two fields and their values, sent in this order
    outcomes: dict[int, str]  # the value when that many tokens came back (else "N tokens")

    async def observe(self, ctx: ProbeContext) -> Observation:
        asked = " + ".join(f"{field} {value}" for field, value in self.limits.items())
        params: dict[str, Any] = {"temperature": 0, **self.limits, **await _no_eos(ctx)}
        rec = await ctx.send(**params)
        end_if(refusal(rec, "the request"))
        n = _tokens(rec)
        if n is None:
            return Observation.failed(f"{asked}: no usage.completion_tokens, so the limit applied cannot be read")
        return Observation(
            value=self.outcomes.get(n, f"{n} tokens"), summary=f"{n} tokens for {asked}", detail={"tokens": n}
        )


WHICH_LIMIT = (
    WhichLimit(
        id="request.native_override",
        title="Engine-native length key next to max_tokens",
        category="request",
        request="max_tokens 4 and llama.cpp's native n_predict 10, temperature 0, EOS suppressed",
        observes="which limit the server applied (completion_tokens)",
        breaking=True,
        breaks="a client or proxy that sends both (copied from llama.cpp examples) gets 10 tokens where it asked "
        "for 4, or the reverse",
        limits={"max_tokens": 4, "n_predict": 10},
        outcomes={4: "max_tokens honoured", 10: "n_predict overrides"},
    ),
    WhichLimit(
        id="max_tokens.both_fields",
        title="max_tokens and max_completion_tokens together",
        category="length",
        request="max_tokens 3 and max_completion_tokens 6, temperature 0, EOS suppressed",
        observes="which of the two OpenAI fields wins",
        breaking=True,
        breaks="clients migrating field by field get the other length",
        limits={"max_tokens": 3, "max_completion_tokens": 6},
        outcomes={3: "max_tokens wins", 6: "max_completion_tokens wins"},
    ),
)

for _limit in WHICH_LIMIT:
    _limit.register(_limit.observe)


@dataclass(frozen=True, kw_only=True)
class EachCase(Declaration):
    """A probe that sends one request per case (each with the `common` fields) and records each accepted or
    refused."""

    cases: dict[str, dict[str, Any]]  # name -> the fields that make the case
    common: dict[str, Any]

    async def observe(self, ctx: ProbeContext) -> Observation:
        got: dict[str, str] = {}
        for name, params in self.cases.items():
            rec = await ctx.send(**self.common, **params)
            end_if(not_answered(rec, name))
            got[name] = _outcome(rec)
        return Observation(value=got, summary=", ".join(f"{k}: {v}" for k, v in got.items()))


EACH_CASE = (
    EachCase(
        id="sampling.out_of_range",
        title="Sampling values outside OpenAI's ranges",
        category="sampling",
        request="temperature 3, temperature -1, top_p 1.5, presence_penalty 3 (one request each, max_tokens 2)",
        observes="each refused (status) or accepted (silently clamped or used)",
        breaking=True,
        breaks="requests the old server refused are silently clamped (a negative temperature becomes greedy), or "
        "requests it accepted now fail",
        cases={
            "temperature=3": {"temperature": 3.0},
            "temperature=-1": {"temperature": -1.0},
            "top_p=1.5": {"top_p": 1.5},
            "presence_penalty=3": {"presence_penalty": 3.0},
        },
        common={"max_tokens": 2},
    ),
    EachCase(
        id="request.user_metadata",
        title="user and metadata fields",
        category="request",
        request='user "switchover-probe"; then metadata {"probe": "1"} (one request each)',
        observes="each accepted (and ignored or used) or refused",
        breaking=True,
        breaks="clients that tag requests for abuse tracking or cost attribution get HTTP 400",
        cases={"user": {"user": "switchover-probe"}, "metadata": {"metadata": {"probe": "1"}}},
        common={"temperature": 0, "max_tokens": 2},
    ),
)

for _case in EACH_CASE:
    _case.register(_case.observe)


@probe(
    id="max_tokens.zero",
    title="max_tokens 0",
    category="length",
    request="max_tokens 0, temperature 0",
    observes="refused (status) or accepted with how many tokens",
    breaking=True,
    breaks="a prompt-only request (warming a cache, counting tokens) now fails, or the reverse",
)
async def max_tokens_zero(ctx: ProbeContext) -> Observation:
    rec = await ctx.send(temperature=0, max_tokens=0)
    end_if(refusal(rec, "the request"))
    n = _tokens(rec)
    if n is None:  # accepted, but how many tokens it gave was not reported: not "None tokens"
        return Observation(
            value=Outcome.ACCEPTED,
            summary="accepted: no usage.completion_tokens to count the tokens",
            detail={"tokens": None, "finish_reason": rec.finish_reason, "text": rec.text[:40]},
        )
    return Observation(
        value=f"accepted, {n} tokens",
        summary=f"accepted: {n} tokens, finish {rec.finish_reason}",
        detail={"tokens": n, "finish_reason": rec.finish_reason, "text": rec.text[:40]},
    )


@probe(
    id="n.over_slots",
    title="n above the server's parallel slots",
    category="n",
    request="n=16 at temperature 1, max_tokens 4",
    observes="choices returned, or the refusal (llama.cpp limits n to its -np slots)",
    breaking=True,
    breaks="clients asking for many candidates get HTTP 400",
)
async def n_over_slots(ctx: ProbeContext) -> Observation:
    rec = await ctx.send(n=16, temperature=1.0, max_tokens=4)
    end_if(not_answered(rec, "n=16"))
    if (rej := rejected(rec)) is not None:
        return Observation(
            value={"choices": 0, "status": rej["status"]},
            summary=f"n=16 rejected: HTTP {rej['status']} {rej['message'][:80]}",
            detail=rej,
        )
    return Observation(value={"choices": len(rec.texts), "status": 200}, summary=f"{len(rec.texts)} choices")


@probe(
    id="n.sampled_distinct",
    title="n samples under one seed",
    category="n",
    request="n=3, temperature 1, seed 11, max_tokens 16, EOS suppressed",
    observes="whether the choices differ from each other or repeat one sample",
    breaking=True,
    breaks="best-of-n and self-consistency clients get n copies of one answer",
)
async def n_sampled_distinct(ctx: ProbeContext) -> Observation:
    rec = await ctx.send(n=3, temperature=1.0, seed=11, max_tokens=16, **await _no_eos(ctx))
    end_if(refusal(rec, "n=3"))
    texts = [rec.texts[i] for i in sorted(rec.texts)]
    distinct = len(set(texts))
    value = (
        "distinct" if distinct == len(texts) == 3 else "identical" if distinct == 1 else f"{distinct} of {len(texts)}"
    )
    return Observation(
        value=value, summary=f"{distinct} distinct of {len(texts)} choices", detail={"texts": [t[:40] for t in texts]}
    )
