"""The per-request formulas (measure/timing.py) against hand-computed values (times in ns; 1 ms = 1_000_000 ns)."""

from __future__ import annotations

import pytest

from switchover.measure import timing

MS = 1_000_000


def test_the_first_token_is_the_first_event_with_text() -> None:
    assert timing.first_token_index(["", "", "a", "b"]) == 2
    assert timing.first_token_ns([5 * MS, 7 * MS, 9 * MS], ["", "a", "b"]) == 7 * MS
    assert timing.first_token_ns([5 * MS], [""]) is None and timing.first_token_index([]) is None


def test_e2e_ends_at_the_last_event_with_choices() -> None:
    assert timing.last_event_ns([5 * MS, 9 * MS]) == 9 * MS and timing.last_event_ns([]) is None
    assert timing.e2e_ms(1 * MS, 9 * MS) == 8.0 and timing.e2e_ms(1 * MS, None) is None
    assert timing.ttft_ms(1 * MS, 4 * MS) == 3.0 and timing.ttft_ms(1 * MS, None) is None


def test_tpot_is_e2e_minus_ttft_over_n_minus_one_and_needs_two_tokens() -> None:
    assert timing.tpot_ms(10.0, 20.0, 3) == pytest.approx(5.0)
    assert timing.tpot_ms(10.0, 20.0, 1) is None and timing.tpot_ms(10.0, 20.0, 0) is None
    assert timing.tpot_ms(None, 20.0, 3) is None and timing.tpot_ms(10.0, None, 3) is None
    assert timing.tpot_ms(10.0, 20.0, None) is None


def test_ntpot_is_e2e_over_n() -> None:
    assert timing.ntpot_ms(20.0, 4) == 5.0 and timing.ntpot_ms(20.0, 0) is None and timing.ntpot_ms(None, 4) is None


def test_itl_is_the_event_gaps_from_the_first_token_on() -> None:
    assert timing.itl_ms([5 * MS, 10 * MS, 12 * MS, 20 * MS], 1) == pytest.approx([2.0, 8.0])
    assert timing.itl_ms([5 * MS, 10 * MS], None) == []
