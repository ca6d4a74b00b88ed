"""The warm-up tail: when TTFT counts as steady, where the tail ends, and what a cap or failures make of it."""

from __future__ import annotations

import pytest

from switchover.warmup import WarmupSample, WarmupSettings, judge, measure, settled, tail_start

S = WarmupSettings(window=3, tolerance_pct=20, floor_ms=1, max_s=60, max_probes=50)


def _samples(ttfts: list[float | None], step_s: float = 0.5) -> list[WarmupSample]:
    return [WarmupSample(at_s=i * step_s, ttft_ms=t) for i, t in enumerate(ttfts)]


@pytest.mark.parametrize(
    ("ttfts", "level"),
    [
        ([100, 100, 100, 100, 100], None),  # fewer than two windows: not yet
        ([100, 100, 100, 100, 100, 100], 100),
        ([400, 300, 200, 100, 100, 100], None),  # earlier window's median 300 vs 100: still moving
        ([200, 200, 200, 110, 100, 100], None),  # 200 vs 100: outside ±20 %
        ([110, 115, 112, 100, 104, 101], 101),  # 112 vs 101: within ±20 %
        ([100, 900, 100, 100, 100, 100], 100),  # one outlier does not move a median
    ],
)
def test_steady_means_two_consecutive_window_medians_agree(ttfts: list[float], level: float | None) -> None:
    assert settled(ttfts, S) == level


def test_the_floor_keeps_millisecond_ttfts_from_never_settling() -> None:
    # 2 ms against 3 ms is 50 % off, but within the 1 ms scheduling floor
    assert settled([2, 2, 2, 3, 3, 3], S) == 3
    assert settled([2, 2, 2, 3, 3, 3], S.model_copy(update={"floor_ms": 0})) is None


@pytest.mark.parametrize(
    ("ttfts", "start"),
    [
        ([100] * 6, 0),  # steady from the first probe: no tail
        ([900, 800, 700, 100, 100, 100, 100, 100, 100], 3),
        ([900, 100, 100, 100, 100, 100, 100], 1),  # one slow first probe: the window from probe 1 is steady
        ([900, 900, 100, 100, 900, 100, 100, 100, 100, 100], 2),  # a late outlier inside a steady median
    ],
)
def test_the_tail_ends_where_rolling_medians_enter_the_band_and_stay(ttfts: list[float], start: int) -> None:
    assert tail_start(ttfts, 100, S) == start


def test_judge_reports_the_tail_in_time_and_requests_from_the_first_good_answer() -> None:
    w = judge(_samples([900, 800, 700, 120, 100, 100, 100, 100, 100]), S)
    assert w.steady and w.steady_ttft_ms == 100 and w.first_ttft_ms == 900
    assert w.tail_requests == 3 and w.tail_s == 1.5 and w.probes == 9 and w.failed == 0


def test_failed_probes_are_counted_and_left_out_of_the_medians() -> None:
    w = judge(_samples([None, 900, None, 100, 100, 100, 100, 100, 100]), S)
    assert w.steady and w.failed == 2 and w.steady_ttft_ms == 100
    assert w.tail_requests == 3 and w.tail_s == 1.5  # the first good probe of the steady level is probe 3


def test_no_steady_level_before_the_cap_gives_no_tail_figure() -> None:
    w = judge(_samples([900, 700, 500, 300, 200, 100]), S, capped_by="the 3 s cap")
    assert not w.steady and w.tail_s is None and w.tail_requests is None and w.steady_ttft_ms is None
    assert "the 3 s cap" in w.reason


async def test_measure_probes_until_steady_and_stops_there() -> None:
    seq = iter([500.0, 400.0, 300.0, 50.0, 50.0, 50.0, 50.0, 50.0, 50.0, 50.0, 50.0, 50.0])
    calls = 0

    async def probe() -> float | None:
        nonlocal calls
        calls += 1
        return next(seq)

    w = await measure(probe, S)
    assert w.steady and w.tail_requests == 3 and calls == 8  # settled at the 8th: no probe beyond it


async def test_measure_stops_at_the_probe_cap_when_ttft_keeps_moving() -> None:
    n = 0

    async def probe() -> float | None:
        nonlocal n
        n += 1
        return 1e6 / 2.0**n  # halves every probe: never two agreeing windows

    w = await measure(probe, S.model_copy(update={"max_probes": 12}))
    assert not w.steady and w.probes == 12 and "12-probe cap" in w.reason


async def test_measure_stops_at_the_time_cap_even_inside_a_slow_probe() -> None:
    import asyncio

    async def probe() -> float | None:
        await asyncio.sleep(5)
        return 1.0

    w = await measure(probe, S.model_copy(update={"max_s": 0.2}))
    assert not w.steady and w.probes == 1 and w.failed == 1 and "0.2 s cap" in w.reason
