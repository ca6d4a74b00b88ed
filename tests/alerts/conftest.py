"""Release data for the alert tests, written by hand from the engines' sources (not from the profiles), so the tests
do not depend on the generated engines/data/releases/*.json: which series each release read serves.

`synthetic_releases` makes `engines.releases.view` answer from these tables; tests that check the packaged data use
the real view instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from switchover.engines import releases
from switchover.engines.extract import Extracted, Snapshot, compact
from switchover.engines.releases import EngineReleases, ParserRules, ReleaseView, resolve
from switchover.engines.versions import release_key

READS = {
    "vllm": [
        "0.4.1",
        "0.4.3",
        "0.5.5",
        "0.6.3",
        "0.6.4",
        "0.7.3",
        "0.8.4",
        "0.8.5.post1",
        "0.9.2",
        "0.10.2",
        "0.11.0",
        "0.12.0",
        "0.33.0",
    ],
    "sglang": [
        "0.3.6",
        "0.4.3",
        "0.4.4",
        "0.4.5",
        "0.5.2",
        "0.5.3",
        "0.5.5",
        "0.5.6",
        "0.5.7",
        "0.5.12",
        "0.5.22",
        "0.5.23",
    ],
    "tgi": ["2.0.2", "2.3.1", "2.4.1", "3.0.1", "3.3.6"],
    "llamacpp": ["b3216", "b3995", "b5000", "b6000", "b11434"],
    "trtllm": ["1.0.0", "1.2.0"],
}
H, C, G = "histogram", "counter", "gauge"
# engine -> series (as declared: counters with _total) -> (first read, last read, type)
SERIES: dict[str, dict[str, tuple[str, str, str]]] = {
    "vllm": {
        "vllm:num_requests_running": ("0.4.1", "0.33.0", G),
        "vllm:num_requests_waiting": ("0.4.1", "0.33.0", G),
        "vllm:num_requests_swapped": ("0.4.1", "0.8.5.post1", G),
        "vllm:cpu_cache_usage_perc": ("0.4.1", "0.8.5.post1", G),
        "vllm:gpu_cache_usage_perc": ("0.4.1", "0.11.0", G),
        "vllm:kv_cache_usage_perc": ("0.9.2", "0.33.0", G),
        "vllm:prompt_tokens_total": ("0.4.1", "0.33.0", C),
        "vllm:generation_tokens_total": ("0.4.1", "0.33.0", C),
        "vllm:time_to_first_token_seconds": ("0.4.1", "0.33.0", H),
        "vllm:time_per_output_token_seconds": ("0.4.1", "0.12.0", H),
        "vllm:inter_token_latency_seconds": ("0.10.2", "0.33.0", H),
        "vllm:request_time_per_output_token_seconds": ("0.11.0", "0.33.0", H),
        "vllm:e2e_request_latency_seconds": ("0.4.1", "0.33.0", H),
        "vllm:request_queue_time_seconds": ("0.6.4", "0.33.0", H),
        "vllm:num_preemptions_total": ("0.4.3", "0.33.0", C),
        "vllm:request_success_total": ("0.4.3", "0.33.0", C),
        "vllm:gpu_prefix_cache_hit_rate": ("0.5.5", "0.8.5.post1", G),
        "vllm:gpu_prefix_cache_hits_total": ("0.8.4", "0.11.0", C),
        "vllm:gpu_prefix_cache_queries_total": ("0.8.4", "0.11.0", C),
        "vllm:prefix_cache_hits_total": ("0.9.2", "0.33.0", C),
        "vllm:prefix_cache_queries_total": ("0.9.2", "0.33.0", C),
        "vllm:avg_generation_throughput_toks_per_s": ("0.4.1", "0.6.4", G),
        "vllm:request_prompt_tokens": ("0.4.3", "0.33.0", H),
    },
    "sglang": {
        "sglang:time_to_first_token_seconds": ("0.3.6", "0.5.23", H),
        "sglang:e2e_request_latency_seconds": ("0.3.6", "0.5.23", H),
        "sglang:time_per_output_token_seconds": ("0.3.6", "0.4.4", H),
        "sglang:inter_token_latency_seconds": ("0.4.4", "0.5.23", H),
        "sglang:request_time_per_output_token_seconds": ("0.5.22", "0.5.23", H),
        "sglang:queue_time_seconds": ("0.5.3", "0.5.23", H),
        "sglang:num_running_reqs": ("0.3.6", "0.5.23", G),
        "sglang:num_queue_reqs": ("0.3.6", "0.5.23", G),
        "sglang:token_usage": ("0.3.6", "0.5.23", G),
        "sglang:gen_throughput": ("0.3.6", "0.5.23", G),
        "sglang:cache_hit_rate": ("0.3.6", "0.5.23", G),
        "sglang:prompt_tokens_total": ("0.3.6", "0.5.23", C),
        "sglang:generation_tokens_total": ("0.3.6", "0.5.23", C),
        "sglang:cached_tokens_total": ("0.4.4", "0.5.23", C),
        "sglang:num_retracted_reqs": ("0.5.2", "0.5.23", G),
        "sglang:num_retracted_requests_total": ("0.5.7", "0.5.23", C),
        "sglang:num_aborted_requests_total": ("0.5.2", "0.5.23", C),
        "sglang:max_total_num_tokens": ("0.5.6", "0.5.23", G),
    },
    "tgi": {
        **{
            name: ("2.0.2", "3.3.6", kind)
            for name, kind in [
                ("tgi_request_duration", H),
                ("tgi_request_queue_duration", H),
                ("tgi_request_mean_time_per_token_duration", H),
                ("tgi_request_input_length", H),
                ("tgi_request_generated_tokens", H),
                ("tgi_batch_current_size", G),
                ("tgi_queue_size", G),
                ("tgi_request_success", C),
                ("tgi_request_failure", C),
                ("tgi_batch_current_max_tokens", G),
            ]
        },
        "tgi_batch_max_total_tokens": ("2.3.1", "3.3.6", G),
    },
    "llamacpp": {
        **{
            f"llamacpp:{name}": ("b3216", "b11434", kind)
            for name, kind in [
                ("requests_processing", G),
                ("requests_deferred", G),
                ("prompt_tokens_total", C),
                ("tokens_predicted_total", C),
                ("prompt_seconds_total", C),
                ("tokens_predicted_seconds_total", C),
                ("prompt_tokens_seconds", G),
                ("predicted_tokens_seconds", G),
            ]
        },
        "llamacpp:kv_cache_usage_ratio": ("b3216", "b5000", G),
        "llamacpp:kv_cache_tokens": ("b3216", "b5000", G),
        "llamacpp:n_decode_total": ("b3995", "b11434", C),
        "llamacpp:n_busy_slots_per_decode": ("b3995", "b11434", G),
        "llamacpp:prompt_tokens_cached_total": ("b11434", "b11434", C),
    },
    "trtllm": {
        f"trtllm_{name}": ("1.0.0", "1.2.0", kind)
        for name, kind in [
            ("time_to_first_token_seconds", H),
            ("time_per_output_token_seconds", H),
            ("e2e_request_latency_seconds", H),
            ("request_queue_time_seconds", H),
            ("request_success_total", C),
            ("kv_cache_hit_rate", G),
            ("kv_cache_utilization", G),
            ("prompt_tokens_total", C),
            ("generation_tokens_total", C),
        ]
    },
}


def engine_releases(engine: str) -> EngineReleases:
    """The hand-written tables of one engine as release data."""
    snaps = []
    for version in READS[engine]:
        key = release_key(version)
        metrics = {
            name: {"path": "metrics.py", "type": kind}
            for name, (first, last, kind) in SERIES[engine].items()
            if release_key(first) <= key <= release_key(last)
        }
        snaps.append(
            Snapshot(
                version=version,
                ref=version,
                archive="test",
                date=None,
                facts=Extracted(parser=ParserRules(source="test"), metrics=metrics),
            )
        )
    return compact(
        engine,
        snaps,
        source_url="https://example.invalid/" + engine + "/{ref}/{path}",
        generated_by="tests/alerts/conftest.py",
    )


@pytest.fixture
def synthetic_releases(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, EngineReleases]]:
    """engines.releases.view answers from the hand-written tables."""
    data = {engine: engine_releases(engine) for engine in READS}

    def view(engine: str, version: str | None) -> ReleaseView | None:
        found = data.get(engine)
        return ReleaseView(found, resolve(found, version)) if found else None

    monkeypatch.setattr(releases, "view", view)
    yield data
