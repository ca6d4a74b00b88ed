"""A step's summary built request by request in memory that does not grow with the request count.

`StepAccumulator.add(row)` takes each request's row as it finishes (the row then goes to Parquet and is dropped);
`summary()` gives the same `StepSummary` as the docs/metrics.md formulas over all rows: every count, sum, mean,
min and max exactly; percentiles exactly up to `limit` values per metric, then from a DDSketch (bench/samples.py);
steadiness exactly, from running sums and the few requests that straddle the window's edges. Accumulators merge
(repeats, checkpoints, worker processes) and serialise (`to_dict`).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from switchover.bench.clientload import client_queue
from switchover.bench.samples import Samples
from switchover.bench.stats import CLIENT_LOAD_LIMIT, Row, Slo, meets_slo, request_metrics
from switchover.bench.step_tallies import InflightTally, LengthTally
from switchover.evidence.bench_step import STEADY_FRACTION, ClientQueue, Steady, StepSummary
from switchover.measure.timing import NS_PER_MS

if TYPE_CHECKING:
    from switchover.bench.batch import RowBatch

EXACT_LIMIT = 20_000  # per-request metrics kept exactly (then a reservoir) per step
ITL_LIMIT = 200_000  # pooled ITL gaps kept exactly per step
METRICS = ("ttft", "tpot", "e2e", "ntpot", "itl")
_LABELS = ("endpoint", "step", "repeat", "concurrency", "rate", "bucket")
# LengthTally.add_columns's arguments, in order
_LENGTH_COLUMNS = ("prompt_tokens", "isl_target", "osl_target", "completion_tokens", "retok_tokens")
_COUNTS = (
    "rows",
    "measured",
    "ok",
    "good",
    "first_send",
    "last_end",
    "n_total",
    "all_n",
    "chunks",
    "itl_zero",
    "one_read",
    "paused_ns",
    "lag_n",
    "lag_sum",
    "lag_max",
)


class StepAccumulator:
    """Summary state of one step (one endpoint, one load level): feed rows with `add`, read `summary()`."""

    def __init__(
        self,
        *,
        slo: Slo | None = None,
        client_ceiling: Mapping[str, float] | None = None,
        labels: Mapping[str, Any] | None = None,
        limit: int | None = EXACT_LIMIT,
        itl_limit: int | None = ITL_LIMIT,
        seed: int = 0,
    ) -> None:
        self.slo = slo if slo is not None and not slo.is_empty() else None
        self.client_ceiling = dict(client_ceiling or {})
        self.labels: dict[str, Any] = dict(labels or {})
        self.samples = {m: Samples(itl_limit if m == "itl" else limit, seed) for m in METRICS}
        self.rows = self.measured = self.ok = self.good = 0
        self.errors: Counter[str] = Counter()
        self.missing: dict[str, Counter[str]] = {}
        self.first_send: int | None = None
        self.last_end: int | None = None
        self.n_total = 0
        self.all_n = True
        self.chunks = 0
        self.itl_zero = 0
        self.one_read = 0
        self.paused_ns = 0  # a resumed step's outage (checkpoint to resume): no request was in flight, none counts
        self.lengths = LengthTally()
        self.lag_n = self.lag_sum = self.lag_max = 0  # send − sched_ns of measured requests, ns (bench/clientload.py)
        conc = self.labels.get("concurrency")
        self.inflight = InflightTally(int(conc) + 1 if conc else 1)

    def add(self, r: Row) -> None:
        """One finished request's row (bench/rows.py)."""
        if not self.rows:
            for key in _LABELS:
                self.labels.setdefault(key, r.get(key))
            conc = self.labels.get("concurrency")
            self.inflight.slots = int(conc) + 1 if conc else 1
        self.rows += 1
        warm = bool(r.get("warmup"))
        self.inflight.add(int(r["send_ns"]), None if r.get("end_ns") is None else int(r["end_ns"]), warm)
        if warm:
            return
        self.measured += 1
        self.lengths.add(r)
        send = int(r["send_ns"])
        self._lag(send, r.get("sched_ns"))
        self.first_send = send if self.first_send is None else min(self.first_send, send)
        if r.get("end_ns") is not None:
            end = int(r["end_ns"])
            self.last_end = end if self.last_end is None else max(self.last_end, end)
        m = request_metrics(r)
        for name, why in m.missing.items():
            self.missing.setdefault(name, Counter())[why] += 1
        if self.slo is not None and meets_slo(m, self.slo):
            self.good += 1
        if not m.ok:
            self.errors[str(r["failure_kind"])] += 1
            return
        self.ok += 1
        s = self.samples
        if m.ttft_ms is not None:
            s["ttft"].add(m.ttft_ms)
        if m.tpot_ms is not None:
            s["tpot"].add(m.tpot_ms)
        if m.e2e_ms is not None:
            s["e2e"].add(m.e2e_ms)
        if m.ntpot_ms is not None:
            s["ntpot"].add(m.ntpot_ms)
        if m.itl_ms:
            s["itl"].extend(m.itl_ms)
            self.itl_zero += m.itl_ms.count(0.0)
        if m.n_out is None:
            self.all_n = False
        else:
            self.n_total += m.n_out
        chunk_ns = r.get("chunk_ns") or []
        self.chunks += len(chunk_ns)
        # all tokens in one read: TTFT = E2E, i.e. the first token's stamp is the last event's
        if (m.n_out or 0) > 1 and m.ttft_ms is not None and m.ttft_ms == m.e2e_ms:
            self.one_read += 1

    def _lag(self, send: int, sched: int | None) -> None:
        if sched is not None:
            lag = max(send - int(sched), 0)
            self.lag_n, self.lag_sum, self.lag_max = self.lag_n + 1, self.lag_sum + lag, max(self.lag_max, lag)

    def add_batch(self, b: RowBatch) -> None:
        """The rows of a RowBatch at once: the same state as `add` of each row in order (bench/batch.py)."""
        n = len(b)
        if not n:
            return
        if not self.rows:
            for key in _LABELS:
                self.labels.setdefault(key, b.labels.get(key))
            conc = self.labels.get("concurrency")
            self.inflight.slots = int(conc) + 1 if conc else 1
        self.rows += n
        a = b.arrays()
        warm, send, end, end_ok = a["warm"], a["send"], a["end"], a["end_ok"]
        ends = b.cols["end_ns"]
        for i in np.flatnonzero(warm).tolist():
            self.inflight.warm.append((int(send[i]), ends[i]))
        meas = ~warm
        if not meas.any():
            return
        self.inflight.add_many(send[meas], end[meas], end_ok[meas])
        mi = np.flatnonzero(meas)
        self.measured += int(mi.size)
        c = b.cols
        cols = [c[k] for k in _LENGTH_COLUMNS]
        if mi.size < n:  # warm-ups in the batch: the measured rows only
            cols = [[col[i] for i in mi.tolist()] for col in cols]
        self.lengths.add_columns(*cols)
        sched = c["sched_ns"]
        has_sched = meas & np.array([v is not None for v in sched], dtype=bool)
        if has_sched.any():
            lag = np.maximum(send - np.array([v or 0 for v in sched], dtype=np.int64), 0)[has_sched]
            self.lag_n += int(lag.size)
            self.lag_sum += int(lag.sum())
            self.lag_max = max(self.lag_max, int(lag.max()))
        first_send = int(send[meas].min())
        self.first_send = first_send if self.first_send is None else min(self.first_send, first_send)
        if (meas & end_ok).any():
            last_end = int(end[meas & end_ok].max())
            self.last_end = last_end if self.last_end is None else max(self.last_end, last_end)
        self._batch_metrics(b, a, meas)

    def _batch_metrics(self, b: RowBatch, a: dict[str, np.ndarray], meas: np.ndarray) -> None:
        """stats.request_metrics of every measured row, vectorised; the reasons a metric is missing per row."""
        ok_all = a["ok"]
        for i in np.flatnonzero(meas & ~ok_all).tolist():
            why = f"request failed ({b.cols['failure_kind'][i]})"
            for name in ("ttft", "e2e", "tpot", "ntpot", "itl", "n"):
                self.missing.setdefault(name, Counter())[why] += 1
            self.errors[str(b.cols["failure_kind"][i])] += 1
        ok = meas & ok_all
        if not ok.any():
            return
        send, first, off, flat, n, n_ok = a["send"], a["first"], a["offsets"], a["chunk_ns"], a["n"], a["n_ok"]
        cnt = off[1:] - off[:-1]
        if not flat.size:
            flat = np.zeros(1, dtype=np.int64)  # no events at all: every index below is masked out
        has_first, has_last = ok & (first >= 0), ok & (cnt > 0)
        ttft = np.where(has_first, flat[np.where(has_first, off[:-1] + first, 0)] - send, 0) / NS_PER_MS
        e2e = np.where(has_last, flat[np.where(has_last, off[1:] - 1, 0)] - send, 0) / NS_PER_MS
        has_ntpot = has_last & n_ok & (n != 0)
        ntpot = e2e / np.where(has_ntpot, n, 1)
        has_tpot = has_first & has_last & n_ok & (n >= 2)
        tpot = (e2e - ttft) / np.where(has_tpot, n - 1, 1)
        for i in np.flatnonzero(ok & ~(has_first & has_last & n_ok & (n >= 2))).tolist():
            for name, why in request_metrics(b.row(i)).missing.items():  # the few irregular rows: reasons
                self.missing.setdefault(name, Counter())[why] += 1
        self.ok += int(ok.sum())
        if self.slo is not None:
            good = ok.copy()
            for limit, has, value in (
                (self.slo.ttft_ms, has_first, ttft),
                (self.slo.tpot_ms, has_tpot, tpot),
                (self.slo.e2e_ms, has_last, e2e),
            ):
                if limit is not None:
                    good &= has & (value <= limit)
            self.good += int(good.sum())
        s = self.samples
        s["ttft"].add_array(ttft[has_first])
        s["tpot"].add_array(tpot[has_tpot])
        s["e2e"].add_array(e2e[has_last])
        s["ntpot"].add_array(ntpot[has_ntpot])
        if a["chunk_ns"].size > 1:  # ITL: gaps from each row's first token to its last event, rows in order
            row = np.repeat(np.arange(cnt.size), cnt)
            local = np.arange(flat.size) - off[:-1][row]
            take = (has_first[row] & (local >= first[row]) & (local < cnt[row] - 1))[:-1]
            itl = np.diff(flat)[take] / NS_PER_MS
            s["itl"].add_array(itl)
            self.itl_zero += int((itl == 0.0).sum())
        if (ok & ~n_ok).any():
            self.all_n = False
        self.n_total += int(n[ok & n_ok].sum())
        self.chunks += int(cnt[ok].sum())
        self.one_read += int((has_first & has_last & n_ok & (n > 1) & (ttft == e2e)).sum())

    def merge(self, o: StepAccumulator) -> None:
        """Fold another accumulator of the same step in (another repeat, worker or checkpointed part)."""
        if not self.rows:
            self.labels = {**o.labels, **{k: v for k, v in self.labels.items() if v is not None}}
        for k in METRICS:
            self.samples[k].merge(o.samples[k])
        for k in (
            "rows",
            "measured",
            "ok",
            "good",
            "n_total",
            "chunks",
            "itl_zero",
            "one_read",
            "paused_ns",
            "lag_n",
            "lag_sum",
        ):
            setattr(self, k, getattr(self, k) + getattr(o, k))
        self.lag_max = max(self.lag_max, o.lag_max)
        self.all_n = self.all_n and o.all_n
        self.errors.update(o.errors)
        for name, c in o.missing.items():
            self.missing.setdefault(name, Counter()).update(c)
        sends = [v for v in (self.first_send, o.first_send) if v is not None]
        ends = [v for v in (self.last_end, o.last_end) if v is not None]
        self.first_send = min(sends) if sends else None
        self.last_end = max(ends) if ends else None
        self.lengths.merge(o.lengths)
        self.inflight.merge(o.inflight)

    def steady(self) -> Steady:
        """The step's steadiness (stats.steady_state's rule)."""
        conc, rate = self.labels.get("concurrency"), self.labels.get("rate")
        inf = self.inflight
        if inf.n < 2:
            return Steady(reached=None, achieved=None, target=conc or rate, note="fewer than 2 measured requests")
        assert inf.start is not None and inf.stop is not None
        if conc:
            level, exact = inf.mean(self.paused_ns)
            if level is None:
                return Steady(reached=None, achieved=None, target=conc, note="zero-length window")
            note = "" if exact else "more requests outlived the window than could be in flight: approximate"
            return Steady(reached=level >= STEADY_FRACTION * conc, achieved=level, target=conc, note=note)
        if rate:
            span = inf.stop - inf.start - self.paused_ns
            achieved = (inf.n - 1) / (span / 1e9) if span > 0 else None
            reached = None if achieved is None else achieved >= STEADY_FRACTION * rate
            return Steady(reached=reached, achieved=achieved, target=rate)
        return Steady(reached=None, achieved=None, target=None, note="no target load (trace replay)")

    def summary(self) -> StepSummary:
        lab = self.labels
        first, last = self.first_send, self.last_end
        span = None if first is None or last is None else last - first - self.paused_ns
        duration = span / 1e9 if span is not None and span > 0 else None
        failed = self.measured - self.ok
        s = StepSummary(
            endpoint=str(lab.get("endpoint") or ""),
            step=int(lab.get("step") or 0),
            repeat=int(lab.get("repeat") or 0),
            concurrency=lab.get("concurrency"),
            rate=lab.get("rate"),
            bucket=lab.get("bucket"),
            requests=self.measured,
            warmup=self.rows - self.measured,
            ok=self.ok,
            failed=failed,
            duration_s=duration,
            req_per_s=self.ok / duration if duration else None,
            # only when every successful request has N: a partial sum would be silently low (`missing` says why)
            out_tok_per_s=self.n_total / duration if duration and self.ok and self.all_n else None,
            chunks_per_s=self.chunks / duration if duration else None,
            error_rate=failed / self.measured if self.measured else None,
            errors=dict(self.errors),
            ttft_ms=self.samples["ttft"].dist(),
            tpot_ms=self.samples["tpot"].dist(),
            itl_ms=self.samples["itl"].dist(),
            e2e_ms=self.samples["e2e"].dist(),
            ntpot_ms=self.samples["ntpot"].dist(),
            missing={k: dict(v) for k, v in self.missing.items()},
            lengths=self.lengths.check(),
            steady=self.steady(),
            itl_zero=self.itl_zero,
            one_read=self.one_read,
        )
        if self.slo is not None and self.measured:
            s.slo_attainment = self.good / self.measured
            s.goodput_req_per_s = self.good / duration if duration else None
        ceiling = self.client_ceiling
        if ceiling and duration:
            loads = []
            if ceiling.get("req_per_s") and s.req_per_s is not None:
                loads.append(s.req_per_s / ceiling["req_per_s"])
            if ceiling.get("chunks_per_s") and s.chunks_per_s is not None:
                loads.append(s.chunks_per_s / ceiling["chunks_per_s"])
            if loads:
                s.client_load = max(loads)
                s.client_flag = s.client_load > CLIENT_LOAD_LIMIT
        return s

    def client_queue(self, s: StepSummary) -> ClientQueue:
        """Requests on the wire vs waiting in the client in this step (`s`: its summary)."""
        return client_queue(s, self.lag_n, self.lag_sum, self.lag_max)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready state (checkpoints, worker processes); `from_dict` restores it."""
        lengths = dict(vars(self.lengths))
        lengths["isl_targets"], lengths["osl_targets"] = sorted(lengths["isl_targets"]), sorted(lengths["osl_targets"])
        return {
            "slo": None if self.slo is None else self.slo.model_dump(),
            "client_ceiling": self.client_ceiling,
            "labels": self.labels,
            "samples": {k: v.to_dict() for k, v in self.samples.items()},
            "counts": {k: getattr(self, k) for k in _COUNTS},
            "errors": dict(self.errors),
            "missing": {k: dict(v) for k, v in self.missing.items()},
            "lengths": lengths,
            "inflight": dict(vars(self.inflight)),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], seed: int = 0) -> StepAccumulator:
        acc = cls(
            slo=None if d["slo"] is None else Slo(**d["slo"]),
            client_ceiling=d["client_ceiling"],
            labels=d["labels"],
            seed=seed,
        )
        acc.samples = {k: Samples.from_dict(v, seed) for k, v in d["samples"].items()}
        for k, v in d["counts"].items():
            setattr(acc, k, v)
        acc.errors = Counter(d["errors"])
        acc.missing = {k: Counter(v) for k, v in d["missing"].items()}
        for k, v in d["lengths"].items():
            setattr(acc.lengths, k, set(v) if k in ("isl_targets", "osl_targets") else v)
        for k, v in d["inflight"].items():
            setattr(acc.inflight, k, [tuple(x) for x in v] if k == "warm" else v)
        heapq.heapify(acc.inflight.late)
        return acc

    def values(self, metric: str) -> list[float]:
        """Per-request values (ms) of a metric for the knee and A/B: all of them, or a uniform sample past the limit."""
        return self.samples[metric].values().tolist()


__all__ = ["EXACT_LIMIT", "ITL_LIMIT", "StepAccumulator"]
