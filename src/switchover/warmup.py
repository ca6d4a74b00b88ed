"""The warm-up tail after a switch (docs/checklist.md#rollout.warmup_tail): an engine that answers its first token is
not yet at its steady speed (weights still paging in, caches and CUDA graphs being built), so the drill keeps timing
first tokens until they settle, and reports the time and requests from the first good answer to steady.

"Steady" is defined on medians so one slow answer on a busy host does not decide it:
- the level: the median TTFT of the last `window` probes, once it is within the tolerance of the median of the
  `window` probes before them (two consecutive windows agree: the level stopped moving);
- the tail ends at the first probe within the tolerance of that level from which the rolling median of `window`
  probes stays within it to the end; tolerance = max(tolerance_pct % of the level, floor_ms), the floor because a
  3 ms TTFT varies by more than 20 % from scheduling alone.
Both caps (time, probes) bound the wait; reaching one before two windows agree is reported as "not steady", with no
tail figure, never a guessed one.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence

from pydantic import BaseModel, Field

from switchover.wire import EngineClient, Timeouts

# a prompt of a few hundred tokens: its prefill, not a cache hit, is what a probe times (each starts with a fresh
# nonce, so no prefix cache can serve it)
_PROBE_TEXT = " ".join(
    f"Item {i}: the quick brown fox jumps over the lazy dog while the clock reads {i % 12 + 1} o'clock."
    for i in range(24)
)


class WarmupSettings(BaseModel):
    """How the warm-up tail is measured: window, tolerance and the caps that bound the wait."""

    window: int = Field(default=5, ge=2, le=50, description="Probes per median window")
    tolerance_pct: float = Field(
        default=20.0,
        gt=0,
        le=100,
        description="How far (percent of the level) a median may be from the level and count as steady",
    )
    floor_ms: float = Field(default=5.0, ge=0, description="Smallest tolerance, ms (scheduling noise)")
    max_s: float = Field(default=120.0, gt=0, description="Stop probing this many seconds after the first good answer")
    max_probes: int = Field(default=200, ge=2, description="Stop after this many probes")
    pause_s: float = Field(default=0.0, ge=0, description="Pause between probes")


class WarmupSample(BaseModel):
    """One probe: when it started (seconds after the first good answer) and its time to the first token."""

    at_s: float
    ttft_ms: float | None = Field(description="None: the probe failed (an error or no token)")


class Warmup(BaseModel):
    """The warm-up tail: from the first good answer to the first probe of the steady level."""

    steady: bool = Field(description="Two consecutive median windows agreed before a cap")
    tail_s: float | None = Field(
        default=None, description="First good answer → first probe of the steady level, s; None: not steady"
    )
    tail_requests: int | None = Field(default=None, description="Probes before the steady level; None: not steady")
    steady_ttft_ms: float | None = Field(default=None, description="The steady level: median TTFT of the last window")
    first_ttft_ms: float | None = Field(default=None, description="TTFT of the first probe")
    probes: int = 0
    failed: int = Field(default=0, description="Probes with no token (errors), left out of the medians")
    reason: str = ""
    settings: WarmupSettings = Field(default_factory=WarmupSettings)
    samples: list[WarmupSample] = Field(default_factory=list)


def _tolerance(level: float, s: WarmupSettings) -> float:
    return max(level * s.tolerance_pct / 100.0, s.floor_ms)


def settled(ttfts: Sequence[float], s: WarmupSettings) -> float | None:
    """The steady level if the last two windows of TTFTs agree within the tolerance, else None."""
    k = s.window
    if len(ttfts) < 2 * k:
        return None
    later = statistics.median(ttfts[-k:])
    earlier = statistics.median(ttfts[-2 * k : -k])
    return float(later) if abs(earlier - later) <= _tolerance(later, s) else None


def tail_start(ttfts: Sequence[float], level: float, s: WarmupSettings) -> int:
    """Index of the first probe of the steady level: from it on every rolling median of `window` probes is within
    the tolerance, and the probe itself is (a forward window's median would otherwise admit slow probes before it)."""
    k, tol = s.window, _tolerance(level, s)
    start = len(ttfts) - k
    for i in range(len(ttfts) - k, -1, -1):
        if abs(statistics.median(ttfts[i : i + k]) - level) > tol:
            break
        start = i
    while start < len(ttfts) - 1 and abs(ttfts[start] - level) > tol:
        start += 1
    return start


def judge(samples: Sequence[WarmupSample], s: WarmupSettings, capped_by: str = "") -> Warmup:
    """The warm-up figures from the probes made (pure: the table tests drive it)."""
    good = [x for x in samples if x.ttft_ms is not None]
    ttfts = [float(x.ttft_ms) for x in good if x.ttft_ms is not None]
    out = Warmup(
        steady=False,
        probes=len(samples),
        failed=len(samples) - len(good),
        settings=s,
        samples=list(samples),
        first_ttft_ms=ttfts[0] if ttfts else None,
    )
    level = settled(ttfts, s)
    if level is None:
        out.reason = (
            f"TTFT did not settle ({s.window}-probe medians within ±{s.tolerance_pct:g} %) before "
            f"{capped_by or 'the probes ended'}; {len(ttfts)} good probe(s)"
        )
        return out
    i = tail_start(ttfts, level, s)
    out.steady, out.steady_ttft_ms = True, round(level, 2)
    out.tail_s = round(good[i].at_s, 3)
    out.tail_requests = samples.index(good[i])
    out.reason = (
        f"steady at {level:.0f} ms TTFT {out.tail_s:.2f} s after the first good answer "
        f"({out.tail_requests} probe(s) before it; first probe {ttfts[0]:.0f} ms)"
    )
    return out


Probe = Callable[[], Awaitable[float | None]]


def ttft_probe(url: str, model: str, *, api_key_env: str | None = None, timeout_s: float = 30.0) -> Probe:
    """A probe: one streamed 1-token completion of a fresh-nonce prompt; its time to the first token, ms."""

    async def probe() -> float | None:
        timeouts = Timeouts(connect=min(timeout_s, 2.0), first_byte=timeout_s, idle=timeout_s, total=timeout_s)
        async with EngineClient(url, api_key_env=api_key_env, timeouts=timeouts) as client:
            rec = await client.complete(
                f"[{uuid.uuid4().hex}] {_PROBE_TEXT}", model=model, max_tokens=1, temperature=0, stream=True
            )
        ttft = rec.ttft_ns
        if rec.failure is not None or ttft is None:
            return None
        return ttft / 1e6

    return probe


async def measure(probe: Probe, s: WarmupSettings, progress: Callable[[str], None] | None = None) -> Warmup:
    """Probe until the TTFT settles or a cap is reached; a progress line about once a second."""
    samples: list[WarmupSample] = []
    t0 = time.perf_counter()
    last_line = t0
    capped_by = ""
    while True:
        at = time.perf_counter() - t0
        if at >= s.max_s:
            capped_by = f"the {s.max_s:g} s cap"
            break
        if len(samples) >= s.max_probes:
            capped_by = f"the {s.max_probes}-probe cap"
            break
        try:  # the time cap bounds each probe too
            ttft = await asyncio.wait_for(probe(), timeout=max(s.max_s - at, 0.001))
        except TimeoutError:
            ttft = None
        samples.append(WarmupSample(at_s=round(at, 3), ttft_ms=None if ttft is None else round(ttft, 2)))
        good = [x.ttft_ms for x in samples if x.ttft_ms is not None]
        if settled(good, s) is not None:
            break
        now = time.perf_counter()
        if progress is not None and now - last_line >= 1.0:
            last_line = now
            shown = f"{good[-1]:.0f} ms" if good else "no token"
            progress(f"warm-up: {len(samples)} probe(s), {now - t0:.1f} s, last TTFT {shown}")
        if s.pause_s:
            await asyncio.sleep(s.pause_s)
    return judge(samples, s, capped_by)
