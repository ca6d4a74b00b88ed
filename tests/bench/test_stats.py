"""Every metric formula against hand-computed rows (times in ns; 1 ms = 1_000_000 ns)."""

from __future__ import annotations

import pytest

from switchover.bench.stats import (
    Slo,
    mean_inflight,
    meets_slo,
    metric_samples,
    request_metrics,
    steady_state,
    summarize_step,
)
from switchover.measure.distribution import describe
from switchover.measure.percentiles import percentile

MS = 1_000_000


def row(send_ms: float = 0, chunks_ms=(10, 12, 14, 20), texts=("a", "b", "c", ""), n=3, **kw):
    r = {
        "endpoint": "old",
        "step": 0,
        "repeat": 0,
        "concurrency": 1,
        "rate": None,
        "bucket": "32",
        "isl_target": 32,
        "osl_target": 3,
        "index": 0,
        "warmup": False,
        "send_ns": int(send_ms * MS),
        "end_ns": int((chunks_ms[-1] + 1 + send_ms) * MS) if chunks_ms else None,
        "chunk_ns": [int((send_ms + c) * MS) for c in chunks_ms],
        "chunk_text": list(texts),
        "completion_tokens": n,
        "prompt_tokens": 32,
        "retok_tokens": None,
        "failure_kind": None,
    }
    r.update(kw)
    return r


def test_ttft_is_send_to_first_event_with_text():
    m = request_metrics(row(chunks_ms=(5, 10, 12, 20), texts=("", "a", "b", "")))
    assert m.ttft_ms == pytest.approx(10.0)


def test_e2e_ends_at_last_event_with_choices_not_at_stream_end():
    m = request_metrics(row())  # end_ns is 21 ms (usage + [DONE]), last choices event at 20 ms
    assert m.e2e_ms == pytest.approx(20.0)


def test_tpot_excludes_the_first_token_and_uses_usage_n():
    m = request_metrics(row(n=3))  # (20 - 10) / (3 - 1)
    assert m.tpot_ms == pytest.approx(5.0)
    assert m.n_out == 3


def test_ntpot_is_e2e_over_n():
    m = request_metrics(row(n=4))
    assert m.ntpot_ms == pytest.approx(20.0 / 4)


def test_itl_is_every_event_gap_after_the_first_token():
    m = request_metrics(row(chunks_ms=(5, 10, 12, 20), texts=("", "a", "b", "")))
    assert m.itl_ms == pytest.approx([2.0, 8.0])


def test_itl_starts_at_the_first_token_even_when_an_earlier_event_shares_its_stamp():
    # the role-only event and the first token arrived in one read (10 ms): no 0 ms gap between them is counted
    m = request_metrics(row(chunks_ms=(10, 10, 12, 20), texts=("", "a", "b", "")))
    assert m.ttft_ms == pytest.approx(10.0) and m.itl_ms == pytest.approx([2.0, 8.0])


def test_tool_call_or_reasoning_only_streams_have_no_ttft_and_say_why():
    m = request_metrics(row(chunks_ms=(5, 10, 20), texts=("", "", "")))  # deltas without content
    assert m.ttft_ms is None and m.e2e_ms == pytest.approx(20.0) and m.itl_ms == []
    assert m.missing["ttft"] == "no streamed event carried text" and m.missing["tpot"] == m.missing["ttft"]


def test_n_zero_has_no_ntpot_with_reason():
    m = request_metrics(row(n=0))
    assert m.ntpot_ms is None and m.missing["ntpot"] == "N = 0"


def test_missing_usage_is_reported_never_replaced_by_requested_length():
    m = request_metrics(row(n=None, osl_target=3))
    assert m.tpot_ms is None and m.n_out is None
    assert "usage.completion_tokens" in m.missing["tpot"]


def test_single_token_has_no_tpot_with_reason():
    m = request_metrics(row(n=1))
    assert m.tpot_ms is None
    assert "N = 1" in m.missing["tpot"]


def test_failed_request_has_no_latency_and_says_why():
    m = request_metrics(row(failure_kind="http_status"))
    assert not m.ok and m.ttft_ms is None
    assert m.missing["ttft"] == "request failed (http_status)"


def test_percentiles_interpolate_linearly_like_numpy():
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile([10, 20], 99) == pytest.approx(19.9)
    d = describe([1, 2, 3, 4])
    assert d is not None
    assert (d.mean, d.min, d.max, d.p50) == (2.5, 1, 4, 2.5)
    assert d.std == pytest.approx(1.118033988)  # population std
    assert describe([]) is None


def test_slo_goodput_counts_only_requests_meeting_every_set_limit():
    good = request_metrics(row())  # ttft 10, tpot 5
    assert meets_slo(good, Slo(ttft_ms=10, tpot_ms=5))
    assert not meets_slo(good, Slo(tpot_ms=4.9))
    assert not meets_slo(request_metrics(row(n=None)), Slo(tpot_ms=100))  # missing does not meet


def test_mean_inflight_is_time_weighted():
    # two requests: [0, 10] and [5, 10] over [0, 10] -> (10 + 5) / 10
    assert mean_inflight([(0, 10), (5, 10)], 0, 10) == pytest.approx(1.5)
    assert mean_inflight([(0, 10)], 5, 5) is None


def test_steady_state_needs_90_percent_of_target_concurrency():
    # two in flight from 0 to 21 ms, then two more from 21 ms: the sending window [0, 21] holds 2
    rows = [row(send_ms=0), row(send_ms=0), row(send_ms=21), row(send_ms=21)]
    s = steady_state(rows, concurrency=2, rate=None)
    assert s.reached is True and s.achieved == pytest.approx(2.0)
    assert steady_state(rows, concurrency=4, rate=None).reached is False


def test_steady_state_in_rate_mode_compares_send_rate():
    rows = [row(send_ms=100 * i) for i in range(11)]  # 10 gaps of 100 ms = 10 req/s
    assert steady_state(rows, concurrency=None, rate=10).reached is True
    assert steady_state(rows, concurrency=None, rate=20).reached is False


def test_step_summary_throughput_and_errors_by_hand():
    rows = [
        row(send_ms=0, index=0, warmup=True),
        row(send_ms=0, index=1),  # ends at 21 ms
        row(send_ms=10, index=2),  # ends at 31 ms
        row(send_ms=20, index=3, failure_kind="http_status", chunks_ms=(), texts=(), n=None, end_ns=25 * MS),
    ]
    s = summarize_step(rows, slo=Slo(tpot_ms=5))
    assert (s.requests, s.warmup, s.ok, s.failed) == (3, 1, 2, 1)
    assert s.duration_s == pytest.approx(0.031)
    assert s.out_tok_per_s == pytest.approx(6 / 0.031)
    assert s.req_per_s == pytest.approx(2 / 0.031)
    assert s.errors == {"http_status": 1}
    assert s.error_rate == pytest.approx(1 / 3)
    assert s.slo_attainment == pytest.approx(2 / 3)
    assert s.tpot_ms is not None and s.tpot_ms.p50 == pytest.approx(5.0)
    assert s.missing["ttft"] == {"request failed (http_status)": 1}


def test_length_check_reports_isl_deviation_and_retokenized_mismatch():
    rows = [row(prompt_tokens=32), row(prompt_tokens=35, retok_tokens=4), row(prompt_tokens=33, retok_tokens=3)]
    s = summarize_step(rows)
    assert s.lengths.isl_off_by_more_than_1 == 1
    assert (s.lengths.retok_compared, s.lengths.retok_mismatch) == (2, 1)
    assert s.lengths.isl_min == 32 and s.lengths.isl_max == 35


def test_client_load_flags_steps_above_70_percent_of_ceiling():
    rows = [row(send_ms=0), row(send_ms=0)]
    s = summarize_step(rows, client_ceiling={"req_per_s": 100.0})  # 2 req in 21 ms = 95 req/s
    assert s.client_flag and s.client_load == pytest.approx(2 / 0.021 / 100)


def test_metric_samples_skip_warmup_and_failures():
    rows = [row(), row(warmup=True), row(failure_kind="connect")]
    assert metric_samples(rows, "tpot") == [pytest.approx(5.0)]
    assert len(metric_samples(rows, "itl")) == 3


def test_requests_with_all_tokens_in_one_read_are_counted():
    rows = [row(chunks_ms=(10, 10, 10, 10)), row()]
    s = summarize_step(rows)
    assert s.one_read == 1
    assert s.tpot_ms is not None and s.tpot_ms.min == 0.0


def test_output_throughput_is_not_measured_when_a_request_lacks_usage():
    rows = [row(send_ms=0, index=1), row(send_ms=10, index=2, n=None)]
    s = summarize_step(rows, slo=None)
    assert s.ok == 2 and s.req_per_s is not None
    assert s.out_tok_per_s is None  # a sum over the requests that had N would be silently low


def test_itl_gaps_of_zero_from_events_read_together_are_counted():
    rows = [row(chunks_ms=(10, 10, 14, 20)), row(chunks_ms=(10, 12, 14, 20))]  # one pair read together
    s = summarize_step(rows)
    assert s.itl_ms is not None and s.itl_ms.count == 6
    assert s.itl_zero == 1
    assert summarize_step([row()]).itl_zero == 0
