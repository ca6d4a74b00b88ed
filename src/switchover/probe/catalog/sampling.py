"""Sampling parameters: ignored knobs, seeds, determinism, n, and the defaults a bare request gets."""

from __future__ import annotations

import asyncio

from switchover.probe.catalog._util import not_answered, rejected, unusable
from switchover.probe.context import ProbeContext
from switchover.probe.registry import probe
from switchover.probe.report import Observation

_N = 16  # tokens per sampled output: enough that two random draws essentially never agree


@probe(id="sampling.top_k_1", title="top_k=1 honoured", category="sampling",
       request="temperature 1 with top_k=1 under three different seeds, and the temperature-0 output",
       observes="whether at least 2 of the 3 equal the greedy output (top_k=1 makes sampling greedy; exact "
                "logit ties can still split one of them)",
       breaking=True,
       breaks="clients that rely on top_k (e.g. top_k=1 for stable output) get random text")
async def top_k_1(ctx: ProbeContext) -> Observation:
    greedy = await ctx.send(temperature=0, max_tokens=_N)
    bad = unusable(greedy, "greedy request")
    if bad:
        return bad
    texts = []
    for seed in (11, 22, 33):
        rec = await ctx.send(temperature=1.0, top_k=1, seed=seed, max_tokens=_N)
        if (lost := not_answered(rec, "top_k=1")) is not None:
            return lost
        rej = rejected(rec)
        if rej:
            return Observation(value="rejected", summary=f"top_k rejected: HTTP {rej['status']}", detail=rej)
        texts.append(rec.text)
    greedy_like = sum(t == greedy.text for t in texts)
    honoured = greedy_like >= 2
    return Observation(value="honoured" if honoured else "ignored",
                       summary=f"{greedy_like} of 3 seeds gave the greedy text",
                       detail={"greedy": greedy.text[:40], "texts": [t[:40] for t in texts]})


@probe(id="sampling.temperature", title="temperature 0 vs 2 changes the output", category="sampling",
       request="the same prompt at temperature 0 and at temperature 2 (seed 7)",
       observes="whether the output changes",
       breaking=True,
       breaks="temperature is ignored: creative/diverse sampling silently becomes fixed output, or the reverse")
async def temperature(ctx: ProbeContext) -> Observation:
    cold = await ctx.send(temperature=0, max_tokens=_N)
    hot = await ctx.send(temperature=2.0, seed=7, max_tokens=_N)
    for rec in (cold, hot):
        bad = unusable(rec, "temperature request")
        if bad:
            return bad
    changes = cold.text != hot.text
    return Observation(value="changes" if changes else "ignored",
                       summary="output changes" if changes else "same output at 0 and 2",
                       detail={"t0": cold.text[:40], "t2": hot.text[:40]})


@probe(id="sampling.seed_repeat", title="Same seed reproduces the output", category="sampling",
       request="temperature 1, seed 1234, twice",
       observes="whether both outputs are identical",
       breaking=True,
       breaks="reproducible sampling (tests, caches keyed on seed) stops reproducing")
async def seed_repeat(ctx: ProbeContext) -> Observation:
    a = await ctx.send(temperature=1.0, seed=1234, max_tokens=_N)
    b = await ctx.send(temperature=1.0, seed=1234, max_tokens=_N)
    for rec in (a, b):
        bad = unusable(rec, "seeded request")
        if bad:
            return bad
    same = a.text == b.text
    return Observation(value="reproduced" if same else "not reproduced",
                       summary="identical" if same else "different outputs for the same seed",
                       detail={"a": a.text[:40], "b": b.text[:40]})


@probe(id="sampling.seed_vary", title="Different seeds give different outputs", category="sampling",
       request="temperature 1 with seed 1 and seed 2",
       observes="whether the outputs differ",
       breaking=False,
       breaks="n-of-k sampling by seed returns duplicates")
async def seed_vary(ctx: ProbeContext) -> Observation:
    a = await ctx.send(temperature=1.0, seed=1, max_tokens=_N)
    b = await ctx.send(temperature=1.0, seed=2, max_tokens=_N)
    for rec in (a, b):
        bad = unusable(rec, "seeded request")
        if bad:
            return bad
    differ = a.text != b.text
    return Observation(value="differ" if differ else "identical",
                       summary="seeds 1 and 2 differ" if differ else "seeds 1 and 2 gave the same text",
                       detail={"seed1": a.text[:40], "seed2": b.text[:40]})


@probe(id="sampling.greedy_repeat", title="temperature 0 is deterministic", category="sampling",
       request="temperature 0, three times",
       observes="whether all three outputs are identical",
       breaking=True,
       breaks="golden-output tests and response caches keyed on greedy requests start missing")
async def greedy_repeat(ctx: ProbeContext) -> Observation:
    texts = []
    for _ in range(3):
        rec = await ctx.send(temperature=0, max_tokens=32)
        bad = unusable(rec, "greedy request")
        if bad:
            return bad
        texts.append(rec.text)
    same = len(set(texts)) == 1
    return Observation(value="deterministic" if same else "varies",
                       summary="3 of 3 identical" if same else f"{len(set(texts))} distinct outputs of 3",
                       detail={"texts": [t[:40] for t in texts]})


@probe(id="sampling.defaults", title="Sampling when fields are omitted", category="sampling",
       request="seed 99 with no sampling fields (twice), then seed 99 with temperature=1, top_p=1 explicit, "
               "then temperature 0",
       observes="whether a bare request samples like the OpenAI defaults (T=1, top_p=1), like greedy, or "
                "like some other server-side default (engine defaults or generation_config.json)",
       breaking=True,
       breaks="requests that omit sampling fields change style: the server applies different defaults")
async def defaults(ctx: ProbeContext) -> Observation:
    bare = await ctx.send(seed=99, max_tokens=_N)
    bare2 = await ctx.send(seed=99, max_tokens=_N)
    explicit = await ctx.send(seed=99, temperature=1.0, top_p=1.0, max_tokens=_N)
    greedy = await ctx.send(temperature=0, max_tokens=_N)
    for rec in (bare, bare2, explicit, greedy):
        bad = unusable(rec, "defaults request")
        if bad:
            return bad
    detail = {"bare": bare.text[:40], "explicit_t1": explicit.text[:40], "greedy": greedy.text[:40]}
    if bare.text == greedy.text and bare2.text == greedy.text:
        value = "greedy"
    elif bare.text != bare2.text:
        value = "sampled (seed not reproducible; cannot compare to T=1)"
    elif bare.text == explicit.text:
        value = "same as temperature=1, top_p=1"
    else:
        value = "sampled with other server defaults"
    return Observation(value=value, summary=value, detail=detail)


@probe(id="n.honoured", title="n > 1 returns n choices", category="n",
       request="n=3 at temperature 1",
       observes="the number of choices returned (or the error)",
       breaking=True,
       breaks="clients asking for several candidates get one (or an error) and index past the end")
async def n_honoured(ctx: ProbeContext) -> Observation:
    rec = await ctx.send(n=3, temperature=1.0, max_tokens=8)
    if (lost := not_answered(rec, "n=3")) is not None:
        return lost
    rej = rejected(rec)
    if rej:
        return Observation(value={"choices": 0, "status": rej["status"]},
                           summary=f"n=3 rejected: HTTP {rej['status']} {rej['message'][:60]}", detail=rej)
    count = len(rec.texts)
    return Observation(value={"choices": count, "status": 200}, summary=f"{count} choice(s) for n=3")


@probe(id="n.parallel", title="n > 1 runs in parallel or serially", category="n",
       request="temperature 1, max_tokens 32: n=1 then n=4 (best of 2 each)",
       observes="latency of n=4 relative to n=1 (up to 2.4x: parallel; about 4x: serial)",
       breaking=False,
       breaks="latency of multi-candidate requests grows with n")
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
        return Observation(value="n/a", summary="n=4 not honoured; parallelism not measurable",
                           detail={"t1_ms": t1, "t4_ms": t4, "choices": choices})
    ratio = t4 / t1 if t1 > 0 else float("inf")
    value = "parallel" if ratio <= 0.6 * 4 else "serial"  # on a compute-bound CPU even batching scales
    return Observation(value=value, summary=f"{value}: n=4 took {ratio:.1f}x the time of n=1",
                       detail={"t1_ms": round(t1, 1), "t4_ms": round(t4, 1), "ratio": round(ratio, 2)})
