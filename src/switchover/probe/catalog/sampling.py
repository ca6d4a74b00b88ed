"""Sampling parameters: ignored knobs, seeds, determinism, n, and the defaults a bare request gets."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from switchover.probe.catalog._util import end_if, not_answered, rejected, send_ok, unusable
from switchover.probe.context import ProbeContext
from switchover.probe.registry import Declaration, probe
from switchover.probe.report import Observation
from switchover.probe.values import Defaults, Outcome, Seeded

_N = 16  # tokens per sampled output: enough that two random draws essentially never agree


@probe(
    id="sampling.top_k_1",
    title="top_k=1 honoured",
    category="sampling",
    request="temperature 1 with top_k=1 under three different seeds, and the temperature-0 output",
    observes="whether at least 2 of the 3 equal the greedy output (top_k=1 makes sampling greedy; exact "
    "logit ties can still split one of them)",
    breaking=True,
    breaks="clients that rely on top_k (e.g. top_k=1 for stable output) get random text",
)
async def top_k_1(ctx: ProbeContext) -> Observation:
    greedy = await send_ok(ctx, "greedy request", temperature=0, max_tokens=_N)
    texts = []
    for seed in (11, 22, 33):
        rec = await ctx.send(temperature=1.0, top_k=1, seed=seed, max_tokens=_N)
        end_if(not_answered(rec, "top_k=1"))
        rej = rejected(rec)
        if rej:
            return Observation(value="rejected", summary=f"top_k rejected: HTTP {rej['status']}", detail=rej)
        texts.append(rec.text)
    greedy_like = sum(t == greedy.text for t in texts)
    honoured = greedy_like >= 2
    return Observation(
        value="honoured" if honoured else "ignored",
        summary=f"{greedy_like} of 3 seeds gave the greedy text",
        detail={"greedy": greedy.text[:40], "texts": [t[:40] for t in texts]},
    )


@dataclass(frozen=True, kw_only=True)
class TwoRequests(Declaration):
    """A probe that sends two requests and reports whether their texts agree."""

    category: str = "sampling"
    first: dict[str, Any]
    second: dict[str, Any]
    what: str  # names the requests in a failure
    if_same: str  # the value when both texts are equal ...
    if_differ: str  # ... and when they differ
    said_same: str  # the summary when equal ...
    said_differ: str  # ... and when they differ
    keys: tuple[str, str]  # detail keys for the two texts

    async def observe(self, ctx: ProbeContext) -> Observation:
        texts = [(await send_ok(ctx, self.what, max_tokens=_N, **params)).text for params in (self.first, self.second)]
        same = texts[0] == texts[1]
        return Observation(
            value=self.if_same if same else self.if_differ,
            summary=self.said_same if same else self.said_differ,
            detail={self.keys[0]: texts[0][:40], self.keys[1]: texts[1][:40]},
        )


TWO_REQUESTS = (
    TwoRequests(
        id="sampling.temperature",
        title="temperature 0 vs 2 changes the output",
        request="the same prompt at temperature 0 and at temperature 2 (seed 7)",
        observes="whether the output changes",
        breaking=True,
        breaks="temperature is ignored: creative/diverse sampling silently becomes fixed output, or the reverse",
        first={"temperature": 0},
        second={"temperature": 2.0, "seed": 7},
        what="temperature request",
        if_same=Outcome.IGNORED,
        if_differ="changes",
        said_same="same output at 0 and 2",
        said_differ="output changes",
        keys=("t0", "t2"),
    ),
    TwoRequests(
        id="sampling.seed_repeat",
        title="Same seed reproduces the output",
        request="temperature 1, seed 1234, twice",
        observes="whether both outputs are identical",
        breaking=True,
        breaks="reproducible sampling (tests, caches keyed on seed) stops reproducing",
        first={"temperature": 1.0, "seed": 1234},
        second={"temperature": 1.0, "seed": 1234},
        what="seeded request",
        if_same=Seeded.REPRODUCED,
        if_differ=Seeded.NOT_REPRODUCED,
        said_same="identical",
        said_differ="different outputs for the same seed",
        keys=("a", "b"),
        expect=lambda api: {"honored": Seeded.REPRODUCED, "needs_flag": Seeded.NOT_REPRODUCED}.get(
            api.seed_per_request
        ),
    ),
    TwoRequests(
        id="sampling.seed_vary",
        title="Different seeds give different outputs",
        request="temperature 1 with seed 1 and seed 2",
        observes="whether the outputs differ",
        breaking=False,
        breaks="n-of-k sampling by seed returns duplicates",
        first={"temperature": 1.0, "seed": 1},
        second={"temperature": 1.0, "seed": 2},
        what="seeded request",
        if_same="identical",
        if_differ="differ",
        said_same="seeds 1 and 2 gave the same text",
        said_differ="seeds 1 and 2 differ",
        keys=("seed1", "seed2"),
    ),
)

for _spec in TWO_REQUESTS:
    _spec.register(_spec.observe)


@probe(
    id="sampling.greedy_repeat",
    title="temperature 0 is deterministic",
    category="sampling",
    request="temperature 0, three times",
    observes="whether all three outputs are identical",
    breaking=True,
    breaks="golden-output tests and response caches keyed on greedy requests start missing",
)
async def greedy_repeat(ctx: ProbeContext) -> Observation:
    texts = [(await send_ok(ctx, "greedy request", temperature=0, max_tokens=32)).text for _ in range(3)]
    same = len(set(texts)) == 1
    return Observation(
        value="deterministic" if same else "varies",
        summary="3 of 3 identical" if same else f"{len(set(texts))} distinct outputs of 3",
        detail={"texts": [t[:40] for t in texts]},
    )


def _defaults_expected(d: dict[str, Any]) -> Defaults | None:
    """What a bare request samples like, from the profile's default sampling settings."""
    if d.get("temperature") == 0:
        return Defaults.GREEDY
    if (
        d.get("temperature") == 1.0
        and d.get("top_p", 1.0) == 1.0
        and d.get("top_k", 0) in (0, -1)
        and not d.get("min_p")
    ):
        return Defaults.OPENAI  # when the model's generation_config sets no sampling
    if d.get("temperature") is not None:
        return Defaults.OTHER
    return None


@probe(
    id="sampling.defaults",
    title="Sampling when fields are omitted",
    category="sampling",
    request="seed 99 with no sampling fields (twice), then seed 99 with temperature=1, top_p=1 explicit, "
    "then temperature 0",
    observes="whether a bare request samples like the OpenAI defaults (T=1, top_p=1), like greedy, or "
    "like some other server-side default (engine defaults or generation_config.json)",
    breaking=True,
    breaks="requests that omit sampling fields change style: the server applies different defaults",
    expect=lambda api: _defaults_expected(api.default_sampling),
)
async def defaults(ctx: ProbeContext) -> Observation:
    bare = await ctx.send(seed=99, max_tokens=_N)
    bare2 = await ctx.send(seed=99, max_tokens=_N)
    explicit = await ctx.send(seed=99, temperature=1.0, top_p=1.0, max_tokens=_N)
    greedy = await ctx.send(temperature=0, max_tokens=_N)
    for rec in (bare, bare2, explicit, greedy):
        end_if(unusable(rec, "defaults request"))
    detail = {"bare": bare.text[:40], "explicit_t1": explicit.text[:40], "greedy": greedy.text[:40]}
    if bare.text == greedy.text and bare2.text == greedy.text:
        value = Defaults.GREEDY
    elif bare.text != bare2.text:
        value = Defaults.UNREPRODUCIBLE
    elif bare.text == explicit.text:
        value = Defaults.OPENAI
    else:
        value = Defaults.OTHER
    return Observation(value=value, summary=value, detail=detail)


_N_CHOICES: dict[str, dict[str, int]] = {
    "supported": {"choices": 3, "status": 200},
    "limited": {"choices": 3, "status": 200},
    "ignored": {"choices": 1, "status": 200},
}


@probe(
    id="n.honoured",
    title="n > 1 returns n choices",
    category="n",
    request="n=3 at temperature 1",
    observes="the number of choices returned (or the error)",
    breaking=True,
    breaks="clients asking for several candidates get one (or an error) and index past the end",
    expect=lambda api: _N_CHOICES.get(api.n_gt_1),
)
async def n_honoured(ctx: ProbeContext) -> Observation:
    rec = await ctx.send(n=3, temperature=1.0, max_tokens=8)
    end_if(not_answered(rec, "n=3"))
    rej = rejected(rec)
    if rej:
        return Observation(
            value={"choices": 0, "status": rej["status"]},
            summary=f"n=3 rejected: HTTP {rej['status']} {rej['message'][:60]}",
            detail=rej,
        )
    count = len(rec.texts)
    return Observation(value={"choices": count, "status": 200}, summary=f"{count} choice(s) for n=3")


@probe(
    id="n.parallel",
    title="n > 1 runs in parallel or serially",
    category="n",
    request="temperature 1, max_tokens 32: n=1 then n=4 (best of 2 each)",
    observes="latency of n=4 relative to n=1 (up to 2.4x: parallel; about 4x: serial)",
    breaking=False,
    breaks="latency of multi-candidate requests grows with n",
)
async def n_parallel(ctx: ProbeContext) -> Observation:
    async def best(n: int) -> tuple[float | None, int]:
        times: list[float] = []
        choices = 0
        for _ in range(2):
            rec = await ctx.send(n=n, temperature=1.0, max_tokens=32, seed=5)
            if rec.failure is not None or rec.e2e_ns is None:
                return None, 0
            times.append(rec.e2e_ns / 1e6)
            choices = len(rec.texts)
            await asyncio.sleep(0)
        return min(times), choices

    t1, _ = await best(1)
    t4, choices = await best(4)
    if t1 is None or t4 is None or choices < 4:
        return Observation(
            value="n/a",
            summary="n=4 not honoured; parallelism not measurable",
            detail={"t1_ms": t1, "t4_ms": t4, "choices": choices},
        )
    ratio = t4 / t1 if t1 > 0 else float("inf")
    value = "parallel" if ratio <= 0.6 * 4 else "serial"  # on a compute-bound CPU even batching scales
    return Observation(
        value=value,
        summary=f"{value}: n=4 took {ratio:.1f}x the time of n=1",
        detail={"t1_ms": round(t1, 1), "t4_ms": round(t4, 1), "ratio": round(ratio, 2)},
    )
