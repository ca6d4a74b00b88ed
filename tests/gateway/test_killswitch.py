"""KillSwitch: sliding window, minimum sample, latch until reset."""

from __future__ import annotations

from switchover.gateway.killswitch import KillSwitch


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
