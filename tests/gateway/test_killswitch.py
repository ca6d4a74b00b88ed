"""KillSwitch: sliding window, minimum sample, latch until reset."""

from __future__ import annotations

import pytest

from switchover.gateway.killswitch import KillSwitch, capped_total


def test_does_not_trip_below_the_minimum_sample():
    ks = KillSwitch(window=60, min_samples=5, max_ratio=0.2)
    assert not any(ks.record(float(i), True) for i in range(4))
    assert not ks.latched and ks.snapshot(4.0).ratio is None
    assert ks.record(4.0, True)
    assert ks.latched and "5/5" in (ks.reason or "")


def test_ratio_must_exceed_the_limit():
    ks = KillSwitch(window=60, min_samples=10, max_ratio=0.2)
    for i in range(10):
        ks.record(float(i), i < 2)  # exactly 20 %
    assert not ks.latched
    assert ks.record(10.0, True)  # 3/11 > 0.2


def test_old_samples_leave_the_window():
    ks = KillSwitch(window=10, min_samples=4, max_ratio=0.5)
    for t in range(3):
        ks.record(float(t), True)
    for t in range(20, 24):
        ks.record(float(t), False)  # the three failures expired
    assert not ks.latched
    snap = ks.snapshot(23.0)
    assert (snap.samples, snap.bad, snap.ratio) == (4, 0, 0.0)


def test_latch_holds_until_reset_even_when_things_get_better():
    ks = KillSwitch(window=5, min_samples=2, max_ratio=0.5)
    ks.record(0.0, True)
    assert ks.record(0.1, True)
    for t in range(100):
        assert not ks.record(10.0 + t, False)
    assert ks.latched
    ks.reset()
    assert not ks.latched and ks.snapshot(200.0).samples == 0


def test_disabled_never_trips_and_reconfigure_keeps_state():
    ks = KillSwitch(window=60, min_samples=1, max_ratio=0.1, enabled=False)
    assert not ks.record(0.0, True)
    ks.configure(60, 1, 0.1, enabled=True)
    assert ks.record(1.0, True)
    ks.configure(60, 100, 0.9)
    assert ks.latched


# ---- one client's share (issue 22) ------------------------------------------------------------------------------

CAPPED = [  # (per-client counts, uncounted-by-client mass, share) -> the counted total
    ([], 0, 0.5, 0.0),
    ([30], 0, 0.5, 0.0),  # a client alone supplies 100 %: nothing of it counts
    ([30], 0, 1.0, 30.0),  # share 1: every request counts (the old rule)
    ([30, 2], 0, 0.5, 4.0),  # the big one counts as much as the rest
    ([10, 10], 0, 0.5, 20.0),  # nobody over half: untouched
    ([200, 10, 10], 0, 0.5, 40.0),
    ([9, 1, 1, 1], 0, 0.25, 4.0),  # each at most a quarter: 1 + 1 + 1 + 1
    ([30], 6, 0.5, 12.0),  # requests of no known client count whole; the client counts as much as they do
    ([5, 5, 5], 0, 0.2, 0.0),  # three clients can never make 5 shares of 20 %
]


@pytest.mark.parametrize(("counts", "free", "share", "want"), CAPPED)
def test_a_clients_contribution_is_capped_at_its_share_of_the_counted_total(counts, free, share, want):
    assert capped_total(counts, free, share) == pytest.approx(want)


def test_one_client_alone_never_trips_the_switch_however_many_failures_it_sends():
    ks = KillSwitch(window=60, min_samples=20, max_ratio=0.2, client_share=0.5)
    assert not any(ks.record(i * 0.01, True, "mallory") for i in range(1000))
    snap = ks.snapshot(10.0)
    assert not ks.latched and (snap.samples, snap.bad) == (1000, 1000) and snap.ratio is None
    assert snap.held and (snap.counted_samples, snap.counted_bad) == (0, 0)  # held back, and it says so


def test_failures_from_two_clients_trip_it_as_before():
    ks = KillSwitch(window=60, min_samples=20, max_ratio=0.2, client_share=0.5)
    tripped = [ks.record(i * 0.01, True, ("a", "b")[i % 2]) for i in range(20)]
    assert tripped == [False] * 19 + [True]
    assert "20/20" in (ks.reason or "") and "client" in (ks.reason or "")


def test_one_client_flooding_successes_cannot_dilute_the_others_failures():
    """200 cheap successes from one client, 10 of 10 failing from each of two others: the raw ratio (20/220) is
    under 0.2; counted with each client's share capped at half it is 20/40."""
    ks = KillSwitch(window=60, min_samples=20, max_ratio=0.2, client_share=0.5)
    for i in range(200):
        ks.record(i * 0.001, False, "flooder")
    for i in range(10):
        ks.record(1.0 + i * 0.01, True, "b")
        ks.record(1.0 + i * 0.01, True, "c")
    assert ks.latched
    snap = ks.snapshot(2.0)
    assert snap.ratio == pytest.approx(0.5) and not snap.held


def test_requests_of_no_known_client_are_counted_whole_with_any_share():
    ks = KillSwitch(window=60, min_samples=5, max_ratio=0.2, client_share=0.5)
    assert [ks.record(float(i), True) for i in range(5)] == [False] * 4 + [True]


def test_a_client_leaving_the_window_takes_its_counts_with_it():
    ks = KillSwitch(window=10, min_samples=4, max_ratio=0.5, client_share=0.5)
    for t in range(6):
        ks.record(float(t), False, "a")
    for t in range(20, 22):
        ks.record(float(t), False, "b")
        ks.record(float(t), False, "c")
    snap = ks.snapshot(21.0)
    assert (snap.samples, snap.bad, snap.ratio) == (4, 0, 0.0)
