"""Engine profiles: every profile loads, every fact is cited, and facts match reference/engines.md."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
import yaml

from switchover.engines import METRIC_INTENTS, EngineProfile, list_profiles, load_profile
from switchover.errors import BadInput, ExitCode

ENGINES = ["llamacpp", "sglang", "tgi", "trtllm", "vllm"]


def test_every_engine_has_a_profile() -> None:
    assert list_profiles() == ENGINES


@pytest.mark.parametrize("name", ENGINES)
def test_profile_loads_and_names_itself(name: str) -> None:
    profile = load_profile(name)
    assert isinstance(profile, EngineProfile)
    assert profile.name == name
    assert profile.version_read


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every mapping in the raw YAML that looks like a fact (has a flag/name/value/budget key)."""
    out: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        if {"flag", "name", "value", "budget", "gib", "loading", "path", "command"} & set(node) and path:
            out.append((path, node))
        for key, value in node.items():
            if key in {"api", "default_sampling", "loading_body", "value", "sources"}:
                continue
            out.extend(_walk(value, f"{path}.{key}" if path else str(key)))
    return out


@pytest.mark.parametrize("name", ENGINES)
def test_every_entry_cites_a_source(name: str) -> None:
    raw = yaml.safe_load(resources.files("switchover.engines").joinpath("data", f"{name}.yaml").read_text())
    facts = _walk({k: v for k, v in raw.items() if k not in {"name", "display_name", "version_read"}})
    assert len(facts) > 30
    missing = [path for path, fact in facts if not str(fact.get("source", "")).strip()]
    assert missing == []
    # the API block cites each field separately
    api = raw["api"]
    assert set(api) - {"sources", "unverified"} <= set(api["sources"])


def test_an_uncited_api_fact_is_refused() -> None:
    raw = yaml.safe_load(resources.files("switchover.engines").joinpath("data", "vllm.yaml").read_text())
    del raw["api"]["sources"]["max_stop_strings"]
    with pytest.raises(ValueError, match="max_stop_strings"):
        EngineProfile.model_validate(raw)


@pytest.mark.parametrize(
    ("name", "drop", "match"),
    [
        ("vllm", lambda m, d: m.pop("default_fraction"), "fraction_of_total needs default_fraction"),
        ("trtllm", lambda m, d: m.pop("default_fraction"), "fraction_of_free_after_load needs default_fraction"),
        ("tgi", lambda m, d: m.pop("wiggle_room"), "cap_with_wiggle needs wiggle_room"),
        (
            "sglang",
            lambda m, d: d.pop("mem_fraction_reserve"),
            "needs default_fraction or defaults.mem_fraction_reserve",
        ),
    ],
)
def test_a_memory_budget_without_its_numbers_is_refused(name: str, drop, match: str) -> None:
    raw = yaml.safe_load(resources.files("switchover.engines").joinpath("data", f"{name}.yaml").read_text())
    drop(raw["memory"], raw["defaults"])  # the planner would otherwise have to make the number up
    with pytest.raises(ValueError, match=match):
        EngineProfile.model_validate(raw)


def test_unknown_engine_is_bad_input_listing_known_ones() -> None:
    with pytest.raises(BadInput) as info:
        load_profile("ollama")
    assert info.value.exit_code == ExitCode.BAD_INPUT
    assert "ollama" in info.value.message
    for name in ENGINES:
        assert name in (info.value.hint or "")


@pytest.mark.parametrize("alias", ["llama.cpp", "llama-cpp", "LLAMACPP", "llama-server"])
def test_engine_aliases_resolve(alias: str) -> None:
    assert load_profile(alias).name == "llamacpp"


@pytest.mark.parametrize("name", ENGINES)
def test_metric_intents_are_from_the_shared_vocabulary(name: str) -> None:
    assert set(load_profile(name).metrics) <= set(METRIC_INTENTS)


@pytest.mark.parametrize("name", ["vllm", "sglang", "trtllm"])
def test_prometheus_client_counters_are_scraped_with_total(name: str) -> None:
    counters = [m.name for m in load_profile(name).metrics.values() if m.type == "counter"]
    assert counters
    assert all(c.endswith("_total") for c in counters)


def test_tgi_counters_keep_literal_names() -> None:
    assert load_profile("tgi").metrics["request_success"].name == "tgi_request_success"


@pytest.mark.parametrize("name", ENGINES)
def test_metric_names_carry_the_engine_prefix(name: str) -> None:
    profile = load_profile(name)
    assert all(m.name.startswith(profile.metric_prefix) for m in profile.metrics.values())


# ---- spot checks against reference/engines.md -------------------------------------------------------------


def test_vllm_facts() -> None:
    p = load_profile("vllm")
    assert p.flags["gpu_memory_fraction"].flag == "--gpu-memory-utilization"
    assert p.flags["gpu_memory_fraction"].default == 0.92
    assert p.flags["tensor_parallel_size"].aliases == ["-tp"]
    assert p.memory.budget == "fraction_of_total"
    assert p.memory.page_tokens == 16
    assert p.api.max_stop_strings == 4
    assert p.api.ignore_eos_field == "ignore_eos" and p.api.min_tokens_field == "min_tokens"
    assert p.api.tokenize_path == "/tokenize"
    assert p.api.unknown_model_policy == "reject_404"
    assert p.api.generation_config_applied is True
    ttft = p.metrics["ttft"]
    assert ttft.name == "vllm:time_to_first_token_seconds" and ttft.type == "histogram"
    assert ttft.buckets is not None and ttft.buckets[0] == 0.001 and ttft.buckets[-1] == 2560.0
    assert len(ttft.buckets) == 22
    assert p.metrics["kv_usage"].name == "vllm:kv_cache_usage_perc"
    assert p.metrics["prefix_cache_queries"].name == "vllm:prefix_cache_queries_total"
    assert p.readiness.loading == "connection_refused"


def test_sglang_facts() -> None:
    p = load_profile("sglang")
    assert p.flags["gpu_memory_fraction"].flag == "--mem-fraction-static"
    assert p.memory.budget == "fraction_of_free_at_start"
    assert p.flags["prefix_caching"].flag == "--disable-radix-cache" and p.flags["prefix_caching"].invert
    assert p.api.max_stop_strings == 32
    assert p.api.seed_per_request == "needs_flag"
    assert p.api.error_body == "openai_flat"
    assert p.readiness.health_runs_generation is True
    assert p.metrics["prefix_cache_hit_rate"].type == "gauge"
    assert p.metrics["itl"].buckets is not None and p.metrics["itl"].buckets[0] == 0.002


def test_trtllm_facts() -> None:
    p = load_profile("trtllm")
    assert p.flags["gpu_memory_fraction"].default == 0.9
    assert p.memory.budget == "fraction_of_free_after_load"
    assert p.memory.page_tokens == 32
    assert p.api.unknown_field_policy == "reject"
    assert p.api.generation_config_applied is False
    assert p.metrics_endpoint.path == "/prometheus/metrics"
    assert p.flags["max_concurrent_sequences"].default == 2048
    assert p.flags["chunked_prefill"].default is False


def test_tgi_facts() -> None:
    p = load_profile("tgi")
    assert p.api.validation_status == 422 and p.api.overload_status == 429
    assert "stop_sequence" in p.api.finish_reasons
    assert p.api.n_gt_1 == "ignored"
    assert p.api.ignore_eos_field is None
    assert p.memory.wiggle_room == 0.9
    assert "ttft" not in p.metrics
    assert len(p.metrics["e2e"].buckets or []) == 35


def test_llamacpp_facts() -> None:
    p = load_profile("llamacpp")
    assert p.api.default_sampling["temperature"] == 0.8
    assert p.readiness.loading == "http_503"
    body = {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}
    assert p.readiness.loading_body == body
    assert p.flags["max_concurrent_sequences"].flag == "--parallel"
    assert p.metrics["prompt_tokens"].name == "llamacpp:prompt_tokens_total"
    assert "ttft" not in p.metrics and "kv_usage" not in p.metrics
    assert p.memory.budget == "explicit_context"
