"""Metrics adapter: re-bucketing with a stated error bound, names/units from the engine profiles."""

from __future__ import annotations

import bisect
import random

import pytest
from prometheus_client.parser import text_string_to_metric_families

from switchover.engines.profile import list_profiles, load_profile
from switchover.engines.series_map import plan, unit_factor
from switchover.gateway.metrics_adapter import convert, rebucket

SRC = [0.1, 0.2, 0.4, 0.8, 1.6]


def cum_at(values: list[float], bounds: list[float]) -> list[float]:
    values = sorted(values)
    return [float(bisect.bisect_right(values, b)) for b in bounds]


def test_rebucket_is_exact_on_shared_bounds_and_linear_inside():
    est, worst = rebucket(SRC, [1, 3, 6, 8, 10], [0.2, 0.3, 0.8], total=10)
    assert (est[0], est[2]) == (3, 8) and worst == 3  # 0.3 lies inside (0.2, 0.4] whose bucket holds 3
    assert est[1] == pytest.approx(4.5)


def test_rebucket_beyond_the_last_bound_is_a_lower_bound():
    est, worst = rebucket(SRC, [1, 3, 6, 8, 10], [5.0], total=12)
    assert est == [10] and worst == 2


@pytest.mark.parametrize("seed", range(5))
def test_error_never_exceeds_the_stated_bound(seed):
    rng = random.Random(seed)
    values = [rng.lognormvariate(-1, 1) for _ in range(2000)]
    dst = [0.05, 0.15, 0.25, 0.3, 0.5, 1.0, 1.6, 3.0]
    est, worst = rebucket(SRC, cum_at(values, SRC), dst, total=len(values))
    for e, t in zip(est, cum_at(values, dst), strict=True):
        assert abs(e - t) <= worst + 1e-9
    assert est == sorted(est)  # still cumulative


def test_every_engine_pair_has_a_plan_with_reasons_for_gaps():
    for a in list_profiles():
        for b in list_profiles():
            p = plan(load_profile(a), load_profile(b))
            assert {m.intent for m in p.mappings} | set(p.skipped) == set(load_profile(b).metrics)
            assert all(reason for reason in p.skipped.values())


SGLANG_TEXT = """# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="m",tp_rank="0"} 2.0
sglang:time_to_first_token_seconds_bucket{le="0.2",model_name="m",tp_rank="0"} 6.0
sglang:time_to_first_token_seconds_bucket{le="0.4",model_name="m",tp_rank="0"} 9.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="m",tp_rank="0"} 10.0
sglang:time_to_first_token_seconds_sum{model_name="m",tp_rank="0"} 2.5
sglang:time_to_first_token_seconds_count{model_name="m",tp_rank="0"} 10.0
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 3.0
sglang:num_running_reqs{model_name="m",tp_rank="1"} 2.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m",tp_rank="0"} 0.5
sglang:token_usage{model_name="m",tp_rank="1"} 0.25
# TYPE sglang:prompt_tokens counter
sglang:prompt_tokens_total{model_name="m"} 1234.0
"""


def test_sglang_scrape_is_served_under_vllm_names_and_buckets():
    text, report = convert(SGLANG_TEXT, plan(load_profile("sglang"), load_profile("vllm")))
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    ttft = fams["vllm:time_to_first_token_seconds"]
    buckets = {s.labels["le"]: s.value for s in ttft.samples if s.name.endswith("_bucket")}
    vllm_bounds = load_profile("vllm").metric("ttft").buckets
    assert len(buckets) == len(vllm_bounds) + 1 and buckets["0.1"] == 2.0 and buckets["+Inf"] == 10.0
    assert buckets["0.25"] == pytest.approx(6.75)  # a quarter of the (0.2, 0.4] bucket
    assert {s.name: s.value for s in ttft.samples if not s.name.endswith("_bucket")} == {
        "vllm:time_to_first_token_seconds_sum": 2.5,
        "vllm:time_to_first_token_seconds_count": 10.0,
    }
    assert ttft.samples[0].labels == {"model_name": "m", "le": "0.001"}  # tp_rank dropped
    assert fams["vllm:num_requests_running"].samples[0].value == 5.0  # request gauges add up over ranks
    assert fams["vllm:kv_cache_usage_perc"].samples[0].value == pytest.approx(0.375)  # ratios average
    assert fams["vllm:prompt_tokens"].samples[0].value == 1234.0  # the parser drops _total
    assert set(report["served"]) == {"ttft", "running", "kv_usage", "prompt_tokens"}
    assert "itl" in report["absent_in_scrape"] and report["error_bounds"]["vllm:time_to_first_token_seconds"] == 3.0
    assert "switchover_adapter_rebucket_error_bound" in fams


def test_tgi_token_histograms_become_counters_via_their_sum():
    text = (
        '# TYPE tgi_request_input_length histogram\ntgi_request_input_length_bucket{le="+Inf"} 3\n'
        "tgi_request_input_length_sum 300\ntgi_request_input_length_count 3\n"
    )
    out, report = convert(text, plan(load_profile("tgi"), load_profile("vllm")))
    assert "vllm:prompt_tokens_total 300.0" in out and report["served"] == ["prompt_tokens"]


def test_units_convert_only_between_compatible_units():
    assert unit_factor("seconds", "milliseconds") == 1000 and unit_factor("ratio", "ratio") == 1
    assert unit_factor("seconds", "tokens") is None


def test_a_histogram_without_sum_is_served_without_one_and_said():
    text = "\n".join(line for line in SGLANG_TEXT.splitlines() if "_seconds_sum" not in line) + "\n"
    out, report = convert(text, plan(load_profile("sglang"), load_profile("vllm")))
    assert "vllm:time_to_first_token_seconds_sum" not in out  # not a 0 that reads as a mean latency of 0
    assert "vllm:time_to_first_token_seconds_count" in out
    assert report["sum_absent_in_scrape"] == ["sglang:time_to_first_token_seconds"]


def test_the_adapter_serves_the_names_of_the_release_asked_for():
    old = {m.intent: m.dst.name for m in plan(load_profile("sglang"), load_profile("vllm", "0.6.3")).mappings}
    new = {m.intent: m.dst.name for m in plan(load_profile("sglang"), load_profile("vllm", "0.11.0")).mappings}
    assert old["kv_usage"] == "vllm:gpu_cache_usage_perc"
    assert new["kv_usage"] == "vllm:kv_cache_usage_perc"
