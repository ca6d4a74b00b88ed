"""Long inputs: answers at 60-70% of the context checked for loops, early stops and script drift, then a
bisection on the live server for the longest input that actually succeeds."""

from __future__ import annotations

import random

from switchover.verify import textcheck
from switchover.verify.greedy import send
from switchover.verify.report import Boundary, LongInputCheck, LongInputSide
from switchover.wire import EngineClient

_EN_TEXT = (
    "the harbour council met on a grey morning to review the budget for the new sea wall and the ferry "
    "schedule while the fishermen argued about quotas and the price of diesel near the old market hall "
    "where children sold lemonade and a retired teacher kept careful notes about the tides and the "
    "weather for a book she planned to publish in the spring"
)
_EN = _EN_TEXT.split()
_ZH = list(
    "港口委员会在一个灰色的早晨开会讨论新海堤的预算和渡轮时刻表"
    "渔民们在旧市场附近争论配额和柴油价格孩子们卖柠檬水"
    "一位退休教师认真记录潮汐和天气准备明年春天出版一本书"
)
INSTRUCTION = {"en": "\n\nSummarize the text above in one sentence.", "zh": "\n\n请用一句话总结上面的文字。"}


def filler(chars: int, lang: str = "en", seed: int = 0) -> str:
    """Deterministic varied text of about `chars` characters (not a repeated block, so loops are the model's)."""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        if lang == "zh":
            s = "".join(rng.choice(_ZH) for _ in range(rng.randint(12, 24))) + "。"
        else:
            words = [rng.choice(_EN) for _ in range(rng.randint(8, 16))]
            s = " ".join(words).capitalize() + ". "
        out.append(s)
        size += len(s)
    return "".join(out)


async def _chars_per_token(client: EngineClient, model: str, lang: str) -> float:
    sample = filler(2000, lang, seed=99)
    ids = await client.tokenize(sample, model, add_special=False)
    if ids:
        return len(sample) / len(ids)
    return 1.2 if lang == "zh" else 4.0


async def _attempt(client: EngineClient, model: str, tokens: int, lang: str, cpt: float, max_tokens: int):
    text = filler(int(tokens * cpt), lang) + INSTRUCTION[lang]
    body = {"model": model, "messages": [{"role": "user", "content": text}], "temperature": 0, "max_tokens": max_tokens}
    return text, await send(client, body)


async def check_at(
    client: EngineClient, model: str, context: int, fraction: float, lang: str = "en", max_tokens: int = 64
) -> LongInputCheck:
    cpt = await _chars_per_token(client, model, lang)
    text, rec = await _attempt(client, model, int(context * fraction), lang, cpt, max_tokens)
    usage = rec.usage
    if rec.failure is not None:
        return LongInputCheck(
            target_fraction=fraction,
            status="error",
            error=rec.failure.message[:200],
            prompt_tokens=usage.prompt_tokens if usage else None,
        )
    completion = usage.completion_tokens if usage else None
    return LongInputCheck(
        target_fraction=fraction,
        prompt_tokens=usage.prompt_tokens if usage else None,
        status="ok",
        completion_tokens=completion,
        finish_reason=rec.finish_reason,
        repetition=round(textcheck.repetition(rec.text), 3),
        loop=textcheck.is_loop(rec.text),
        early_stop=textcheck.early_stop(rec.finish_reason, completion),
        script_drift=textcheck.script_drift(text, rec.text),
        text=rec.text[:200],
    )


async def find_boundary(client: EngineClient, model: str, context: int, max_steps: int = 7) -> Boundary:
    """Bisect the prompt length between 70% and 130% of the configured context for the longest one that
    still generates at least one token."""
    cpt = await _chars_per_token(client, model, "en")
    b = Boundary(configured_context=context)

    async def ok(tokens: int) -> bool:
        text, rec = await _attempt(client, model, tokens, "en", cpt, 2)
        b.steps += 1
        ids = await client.tokenize(text, model, add_special=False)
        n = len(ids) if ids is not None else None  # the user text alone, without the chat template
        good = rec.failure is None and bool(rec.text or (rec.usage and rec.usage.completion_tokens))
        # ordered by the bisection's target (always known); the server's own counts are recorded as measured,
        # None where it has no /tokenize or usage (never 0)
        if good:
            if b.longest_ok_target_tokens is None or tokens > b.longest_ok_target_tokens:
                b.longest_ok_target_tokens = tokens
                b.longest_ok_text_tokens = n
                b.longest_ok_prompt_tokens = rec.usage.prompt_tokens if rec.usage else None
        elif b.shortest_failed_target_tokens is None or tokens < b.shortest_failed_target_tokens:
            b.failure = rec.failure.message[:200] if rec.failure else "no output"
            b.shortest_failed_target_tokens = tokens
            b.shortest_failed_text_tokens = n
        return good

    lo, hi = int(context * 0.7), int(context * 1.3)
    if not await ok(lo):
        hi, lo = lo, 16
    elif await ok(hi):
        return b  # even 130% of the configured context works: the server truncates or the number is wrong
    while b.steps < max_steps and hi - lo > max(8, context // 100):
        mid = (lo + hi) // 2
        if await ok(mid):
            lo = mid
        else:
            hi = mid
    return b


async def long_input_side(
    client: EngineClient, model: str, context: int | None, fractions=(0.6, 0.7), boundary: bool = True
) -> LongInputSide:
    side = LongInputSide(url=client.base_url, context=context)
    if not context:
        side.skipped = "context length unknown (pass --context)"
        return side
    for frac in fractions:
        side.checks.append(await check_at(client, model, context, frac, "en"))
    side.checks.append(await check_at(client, model, context, (fractions[0] + fractions[-1]) / 2, "zh"))
    if boundary:
        side.boundary = await find_boundary(client, model, context)
    return side
