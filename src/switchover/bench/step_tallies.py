"""Running tallies inside a step's accumulator (bench/accumulate.py) that merge across repeats, checkpoints and
worker processes: the input/output length checks, and requests in flight (with the few that straddle the window)."""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from switchover.bench.stats import Row
from switchover.evidence.bench_step import LengthCheck


def _ints(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """A column of ints or None as int64 values (None as 0) and the mask of those present."""
    if None not in values:
        return np.array(values, dtype=np.int64).reshape(-1), np.ones(len(values), dtype=bool)
    ok = np.array([v is not None for v in values], dtype=bool)
    return np.array([0 if v is None else v for v in values], dtype=np.int64), ok


class LengthTally:
    """Running form of the length checks (LengthCheck)."""

    def __init__(self) -> None:
        self.isl_targets: set[int] = set()
        self.osl_targets: set[int] = set()
        self.isl_n = self.isl_sum = self.isl_rows = self.off_by_more = 0
        self.isl_min: int | None = None
        self.isl_max: int | None = None
        self.below = self.above = self.usage_missing = 0
        self.retok_n = self.retok_mismatch = self.retok_sum = 0

    def add(self, r: Row) -> None:
        self.add_values(
            r.get("prompt_tokens"),
            r.get("isl_target"),
            r.get("osl_target"),
            r.get("completion_tokens"),
            r.get("retok_tokens"),
        )

    def add_values(self, pt: Any, it: Any, ot: Any, n: Any, rt: Any) -> None:
        """One measured row's prompt tokens, targets, completion tokens and re-tokenized count."""
        self.isl_rows += 1
        if it is not None:
            self.isl_targets.add(int(it))
        if ot is not None:
            self.osl_targets.add(int(ot))
        if pt is not None:
            pt = int(pt)
            self.isl_n += 1
            self.isl_sum += pt
            self.isl_min = pt if self.isl_min is None else min(self.isl_min, pt)
            self.isl_max = pt if self.isl_max is None else max(self.isl_max, pt)
            if it is not None and abs(pt - int(it)) > 1:
                self.off_by_more += 1
        if n is None:
            self.usage_missing += 1
            return
        if ot is not None:
            self.below += int(n) < int(ot)
            self.above += int(n) > int(ot)
        if rt is not None:
            d = abs(int(rt) - int(n))
            self.retok_n += 1
            self.retok_mismatch += d != 0
            self.retok_sum += d

    def add_columns(self, pt: list[Any], it: list[Any], ot: list[Any], n: list[Any], rt: list[Any]) -> None:
        """`add_values` of every row at once: the measured rows' columns (ints or None, ints in int32's range)."""
        rows = len(pt)
        if not rows:
            return
        self.isl_rows += rows
        self.isl_targets.update(v for v in it if v is not None)
        self.osl_targets.update(v for v in ot if v is not None)
        p, p_ok = _ints(pt)
        i, i_ok = _ints(it)
        if p_ok.any():
            got = p[p_ok]
            self.isl_n += int(got.size)
            self.isl_sum += int(got.sum())
            lo, hi = int(got.min()), int(got.max())
            self.isl_min = lo if self.isl_min is None else min(self.isl_min, lo)
            self.isl_max = hi if self.isl_max is None else max(self.isl_max, hi)
            self.off_by_more += int((np.abs(p - i) > 1)[p_ok & i_ok].sum())
        out, out_ok = _ints(n)
        self.usage_missing += rows - int(out_ok.sum())
        o, o_ok = _ints(ot)
        both = out_ok & o_ok
        self.below += int((out < o)[both].sum())
        self.above += int((out > o)[both].sum())
        r, r_ok = _ints(rt)
        d = np.abs(r - out)[r_ok & out_ok]
        self.retok_n += int(d.size)
        self.retok_mismatch += int((d != 0).sum())
        self.retok_sum += int(d.sum())

    def merge(self, o: LengthTally) -> None:
        self.isl_targets |= o.isl_targets
        self.osl_targets |= o.osl_targets
        for k in (
            "isl_n",
            "isl_sum",
            "isl_rows",
            "off_by_more",
            "below",
            "above",
            "usage_missing",
            "retok_n",
            "retok_mismatch",
            "retok_sum",
        ):
            setattr(self, k, getattr(self, k) + getattr(o, k))
        mins = [v for v in (self.isl_min, o.isl_min) if v is not None]
        maxs = [v for v in (self.isl_max, o.isl_max) if v is not None]
        self.isl_min = min(mins) if mins else None
        self.isl_max = max(maxs) if maxs else None

    def check(self) -> LengthCheck:
        return LengthCheck(
            isl_target=next(iter(self.isl_targets)) if len(self.isl_targets) == 1 else None,
            isl_mean=self.isl_sum / self.isl_n if self.isl_n else None,
            isl_min=self.isl_min,
            isl_max=self.isl_max,
            isl_off_by_more_than_1=self.off_by_more,
            isl_unreported=self.isl_rows - self.isl_n,
            osl_target=next(iter(self.osl_targets)) if len(self.osl_targets) == 1 else None,
            n_below_target=self.below,
            n_above_target=self.above,
            n_usage_missing=self.usage_missing,
            retok_compared=self.retok_n,
            retok_mismatch=self.retok_mismatch,
            retok_mean_abs_diff=self.retok_sum / self.retok_n if self.retok_n else None,
        )


class InflightTally:
    """Time-weighted in-flight requests between the first and last measured send, exactly, without keeping every
    request: measured requests add (end − send); those still in flight at the last measured send (at most the
    concurrency, kept in a heap of the latest ends) give back what lies past it; warm-up requests are kept whole."""

    def __init__(self, slots: int) -> None:
        self.slots = slots  # more ends than can be in flight at once: the heap then holds every one past the window
        self.n = 0
        self.start: int | None = None
        self.stop: int | None = None
        self.sum_dur = 0
        self.open_n = 0  # measured requests without an end (counted to the window's end)
        self.open_send_sum = 0
        self.late: list[int] = []  # min-heap of the latest `slots` measured ends
        self.warm: list[tuple[int, int | None]] = []

    def add_many(self, sends: np.ndarray, ends: np.ndarray, ended: np.ndarray) -> None:
        """`add` of measured requests at once (ends[i] counts only where ended[i])."""
        self.n += int(sends.size)
        lo, hi = int(sends.min()), int(sends.max())
        self.start = lo if self.start is None else min(self.start, lo)
        self.stop = hi if self.stop is None else max(self.stop, hi)
        self.open_n += int((~ended).sum())
        self.open_send_sum += int(sends[~ended].sum())
        closed = ends[ended]
        self.sum_dur += int((closed - sends[ended]).sum())
        if closed.size:  # the latest `slots` ends, as the heap of `add` keeps them
            self.late = heapq.nlargest(self.slots, self.late + closed.tolist())
            heapq.heapify(self.late)

    def add(self, send: int, end: int | None, warmup: bool) -> None:
        if warmup:
            self.warm.append((send, end))
            return
        self.n += 1
        self.start = send if self.start is None else min(self.start, send)
        self.stop = send if self.stop is None else max(self.stop, send)
        if end is None:
            self.open_n += 1
            self.open_send_sum += send
            return
        self.sum_dur += end - send
        if len(self.late) < self.slots:
            heapq.heappush(self.late, end)
        else:
            heapq.heappushpop(self.late, end)

    def merge(self, o: InflightTally) -> None:
        self.slots += o.slots
        for k in ("n", "sum_dur", "open_n", "open_send_sum"):
            setattr(self, k, getattr(self, k) + getattr(o, k))
        starts = [v for v in (self.start, o.start) if v is not None]
        stops = [v for v in (self.stop, o.stop) if v is not None]
        self.start = min(starts) if starts else None
        self.stop = max(stops) if stops else None
        self.late = heapq.nlargest(self.slots, self.late + o.late)
        heapq.heapify(self.late)
        self.warm += o.warm

    def mean(self, paused_ns: int = 0) -> tuple[float | None, bool]:
        """(mean in flight over the window less `paused_ns` of outage, whether it is exact); None for a zero-length
        window."""
        start, stop = self.start, self.stop
        if start is None or stop is None or stop - paused_ns <= start:
            return None, True
        past = [e - stop for e in self.late if e > stop]
        exact = len(self.late) < self.slots or len(past) < len(self.late)
        area = self.sum_dur - sum(past) + stop * self.open_n - self.open_send_sum
        for s, e in self.warm:
            b = min(stop if e is None else e, stop)
            a = max(s, start)
            if b > a:
                area += b - a
        return area / (stop - start - paused_ns), exact
