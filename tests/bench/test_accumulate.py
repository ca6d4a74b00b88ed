"""The streaming step summary: equal to the all-rows formulas while exact, within the sketch's accuracy past its
limit, bounded in memory, and mergeable."""

from __future__ import annotations

import random

import numpy as np
import pytest

from switchover.bench.accumulate import StepAccumulator
from switchover.bench.rows import RowSink
from switchover.bench.samples import Samples
from switchover.bench.sketch import RELATIVE_ACCURACY, Quantiles
from switchover.bench.stats import Slo, steady_state, summarize_step

MS = 1_000_000


def rows(n: int, seed: int = 1, concurrency: int = 8) -> list[dict]:
    """Requests of a concurrency step in completion order: warm-ups, failures, a missing usage, random gaps."""
    rng = random.Random(seed)
    slots = [0] * concurrency  # when each slot frees up (ns)
    out = []
    for i in range(n):
        k = min(range(concurrency), key=slots.__getitem__)
        send = slots[k] + rng.randint(0, 200_000)
        first = send + rng.randint(1, 40) * MS
        gaps = [rng.choice([0, rng.randint(1, 20) * 100_000]) for _ in range(rng.randint(0, 12))]
        chunk_ns = [first]
        for g in gaps:
            chunk_ns.append(chunk_ns[-1] + g)
        end = chunk_ns[-1] + 50_000
        slots[k] = end
        failed = rng.random() < 0.05
        out.append(
            {
                "endpoint": "old",
                "step": 2,
                "repeat": 0,
                "concurrency": concurrency,
                "rate": None,
                "bucket": "64",
                "isl_target": 64,
                "osl_target": len(chunk_ns),
                "index": i,
                "warmup": i < 3,
                "send_ns": send,
                "end_ns": None if failed and rng.random() < 0.5 else end,
                "chunk_ns": [] if failed else chunk_ns,
                "chunk_text": [] if failed else ["t"] * len(chunk_ns),
                "completion_tokens": None if i == 7 else len(chunk_ns),
                "prompt_tokens": 64 + rng.choice([0, 0, 2]),
                "retok_tokens": len(chunk_ns) + rng.choice([0, 1]),
                "failure_kind": "stream_error" if failed else None,
            }
        )
    rng.shuffle(out)  # completion order is not send order
    return out


def test_streaming_summary_equals_the_all_rows_formulas_while_exact():
    rs = rows(600)
    slo = Slo(ttft_ms=30, tpot_ms=1.5)
    ceiling = {"req_per_s": 500.0, "chunks_per_s": 4000.0}
    acc = StepAccumulator(slo=slo, client_ceiling=ceiling, limit=1000, itl_limit=10_000)
    for r in rs:
        acc.add(r)
    assert acc.summary() == summarize_step(rs, slo=slo, client_ceiling=ceiling)


def test_steadiness_without_keeping_rows_matches_the_time_weighted_formula():
    rs = rows(400, seed=5)
    acc = StepAccumulator(limit=10)
    for r in rs:
        acc.add(r)
    want = steady_state(rs, 8, None)
    got = acc.steady()
    assert got.achieved == pytest.approx(want.achieved, rel=1e-12) and got.reached == want.reached
    assert got.note == ""


def test_past_the_limit_counts_are_exact_and_percentiles_are_within_the_sketch_accuracy():
    rs = rows(3000, seed=2)
    acc = StepAccumulator(limit=200, itl_limit=500)
    for r in rs:
        acc.add(r)
    got, want = acc.summary(), summarize_step(rs)
    assert (got.requests, got.ok, got.failed, got.errors, got.missing) == (
        want.requests,
        want.ok,
        want.failed,
        want.errors,
        want.missing,
    )
    assert got.req_per_s == want.req_per_s and got.lengths == want.lengths and got.itl_zero == want.itl_zero
    for name in ("ttft_ms", "tpot_ms", "e2e_ms", "itl_ms"):
        g, w = getattr(got, name), getattr(want, name)
        assert g.quantiles == "sketch" and w.quantiles == "exact"
        assert (g.count, g.min, g.max) == (w.count, w.min, w.max)
        assert g.mean == pytest.approx(w.mean, rel=1e-9) and g.std == pytest.approx(w.std, rel=1e-6)
        for p in ("p50", "p90", "p99"):  # the sketch's rank rule is numpy's 'lower'; within 0.5% of that value
            exact = np.percentile([v for v in _values(rs, name)], float(p[1:]), method="lower")
            assert g.get(p) == pytest.approx(exact, rel=RELATIVE_ACCURACY * 1.01, abs=1e-12)


def _values(rs: list[dict], name: str) -> list[float]:
    from switchover.bench.stats import metric_samples

    return metric_samples(rs, name.removesuffix("_ms"))


def test_memory_is_bounded_by_the_limit_not_the_request_count():
    acc = StepAccumulator(limit=100, itl_limit=300)
    for r in rows(5000, seed=3):
        acc.add(r)
    assert all(len(acc.samples[m].values()) <= (300 if m == "itl" else 100) for m in acc.samples)
    assert acc.samples["ttft"].count > 4000


def test_reservoir_is_a_uniform_sample():
    s = Samples(limit=1000, seed=4)
    s.extend([float(i) for i in range(100_000)])
    kept = s.values()
    assert kept.size == 1000 and 40_000 < kept.mean() < 60_000  # a uniform sample's mean: 50,000 ± a few SE
    assert np.percentile(kept, 90) == pytest.approx(90_000, rel=0.05)


def test_merging_accumulators_equals_one_accumulator_over_all_rows():
    rs = rows(500, seed=6)
    whole = StepAccumulator(limit=None, itl_limit=None)
    a, b = StepAccumulator(limit=None, itl_limit=None), StepAccumulator(limit=None, itl_limit=None)
    for i, r in enumerate(rs):
        whole.add(r)
        (a if i % 3 else b).add(r)
    a.inflight.slots = b.inflight.slots = 5  # two workers sharing the concurrency: the merged slots add up
    a.merge(b)
    got, want = a.summary(), whole.summary()
    assert got.steady == want.steady and got.requests == want.requests and got.errors == want.errors
    assert got.ttft_ms.p99 == pytest.approx(want.ttft_ms.p99) and got.itl_ms.count == want.itl_ms.count


def test_sketch_round_trips_and_merges_exactly():
    rng = np.random.default_rng(0)
    x, y = rng.lognormal(2, 1, 5000), rng.lognormal(3, 0.5, 7000)
    a, b, both = Quantiles(), Quantiles(), Quantiles()
    a.add_many(x)
    b.add_many(y)
    both.add_many(np.concatenate([x, y]))
    a = Quantiles.from_dict(a.to_dict())
    a.merge(b)
    for q in (0.5, 0.9, 0.99):
        assert a.quantile(q) == both.quantile(q)
    assert a.count == 12000


def test_sketch_keys_are_the_librarys_own():
    q = Quantiles()
    vals = np.random.default_rng(1).lognormal(0, 3, 2000)
    q.add_many(vals)
    from ddsketch import DDSketch

    ref = DDSketch(RELATIVE_ACCURACY)
    for v in vals:
        ref.add(float(v))
    for p in (0.01, 0.5, 0.99):
        assert q.quantile(p) == pytest.approx(ref.get_quantile_value(p), rel=RELATIVE_ACCURACY * 2.05)


def test_sketch_refuses_negative_values():
    with pytest.raises(ValueError):
        Quantiles().add_many(np.array([1.0, -2.0]))


def test_row_sink_writes_a_row_group_per_batch_and_holds_no_more():
    groups: list[int] = []

    class W:
        def append(self, batch):
            groups.append(len(batch))

    sink = RowSink(W(), max_rows=100, max_chunks=10_000)
    for r in rows(250):
        sink.add(r)
    assert groups == [100, 100] and len(sink.buf) == 50
    sink.flush()
    assert groups == [100, 100, 50] and sink.written == 250


def test_a_checkpointed_accumulator_resumes_to_the_same_summary():
    import orjson

    rs = rows(800, seed=8)
    acc = StepAccumulator(slo=Slo(ttft_ms=25), limit=300, itl_limit=1000)
    for r in rs[:500]:
        acc.add(r)
    back = StepAccumulator.from_dict(orjson.loads(orjson.dumps(acc.to_dict())))
    for r in rs[500:]:
        acc.add(r)
        back.add(r)
    assert back.summary() == acc.summary()


def test_row_sink_masks_secrets_in_failure_messages_and_keeps_output_text():
    written: list[dict] = []

    class W:
        def append(self, batch):
            written.extend(batch)

    sink = RowSink(W())
    sink.add({"failure_message": "HTTP 401: invalid key sk-abcdefghijklmnop", "output_text": "x=1"})
    sink.add({"failure_message": None, "output_text": "token=abc"})
    sink.flush()
    assert "sk-abcdefghijklmnop" not in written[0]["failure_message"] and "***" in written[0]["failure_message"]
    assert written[1]["output_text"] == "token=abc"


def test_row_groups_keep_statistics_only_for_scalar_columns(tmp_path):
    import pyarrow.parquet as pq

    from switchover.bench.rows import ROW_SCHEMA, STAT_COLUMNS
    from switchover.runs import RunDir

    rd = RunDir.create(tmp_path, "s")
    w = rd.record_writer("requests", ROW_SCHEMA, redacted=False, statistics=STAT_COLUMNS)
    w.append([{**r, "output_text": "t" * 50, "failure_message": None} for r in rows(20)])
    w.close()
    meta = pq.ParquetFile(rd.file("requests.parquet")).metadata.row_group(0)
    stats = {meta.column(i).path_in_schema: meta.column(i).is_stats_set for i in range(meta.num_columns)}
    assert stats["index"] and stats["send_ns"] and stats["endpoint"]
    assert not stats["output_text"] and not stats["chunk_ns.list.element"] and not stats["chunk_text.list.element"]


def test_samples_refuse_a_serialised_state_whose_counts_disagree():
    s = Samples(limit=10)
    s.extend([float(i) for i in range(50)])
    d = s.to_dict()
    assert Samples.from_dict(d).dist() == s.dist()
    with pytest.raises(ValueError, match="inconsistent samples"):
        Samples.from_dict({**d, "count": 80})  # the sketch holds 50: a percentile would be made up
    with pytest.raises(ValueError, match="inconsistent samples"):
        Samples.from_dict({**d, "sketch": Quantiles().to_dict()})  # an empty sketch must not give p99 = 0
