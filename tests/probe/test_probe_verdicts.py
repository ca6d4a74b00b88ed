"""Probe verdicts against fake engines with known API behaviour: each probe must see what the persona does."""

from __future__ import annotations

from typing import Any

from switchover.probe import ProbeOptions, Target, run_probes, select
from switchover.testing import Persona
from tests.probe.conftest import serve

OPTS = ProbeOptions(time_budget_s=10, probe_timeout_s=30, request_timeout_s=10)
FAST = [p.id for p in select() if p.id != "n.parallel"]


async def _observe(persona: Persona, ids: list[str] | None = None) -> dict[str, Any]:
    async with serve(persona) as url:
        report = await run_probes(Target(url), None, select(ids or FAST), OPTS)
    return {r.id: r.old.value if r.old.status == "observed" else (r.old.status, r.old.summary) for r in report.results}


async def test_vllm_like_persona_yields_its_documented_behaviour() -> None:
    v = await _observe(Persona())
    assert v["stop.count"] == {"accepted": False, "status": 400, "honoured": 0}
    assert v["stop.kept"] == "trimmed"
    assert v["stop.matching"] == "text"
    assert v["finish.length"] == "length"
    assert v["finish.stop_string"] == "stop"
    assert v["finish.eos"] == "stop"
    assert v["request.unknown_field"] == "ignored"
    assert v["sampling.top_k_1"] == "honoured"
    assert v["sampling.temperature"] == "changes"
    assert v["sampling.seed_repeat"] == "reproduced"
    assert v["sampling.seed_vary"] == "differ"
    assert v["sampling.greedy_repeat"] == "deterministic"
    assert v["sampling.defaults"] == "same as temperature=1, top_p=1"
    assert v["n.honoured"] == {"choices": 3, "status": 200}
    assert v["usage.stream_include_usage"] == "present"
    assert v["usage.stream_default"] == "absent"
    assert v["usage.cached_tokens"] == "not reported"
    assert v["usage.stream_options_without_stream"] == "rejected 400"
    assert v["response_format.json_object"] == {"accepted": True, "status": 200, "valid": "valid"}
    assert v["response_format.json_schema"] == {"accepted": True, "status": 200, "valid": "valid"}
    assert v["max_tokens.omitted"] == "until context full"
    assert v["length.over_context"] == "clamped to context"
    assert v["length.max_tokens_over_context"] == "accepted"
    assert v["error.malformed"] == {"status": 400, "shape": "nested"}
    assert v["error.invalid_value"] == {"status": 400, "shape": "nested"}
    assert v["error.unknown_model"] == {"status": 404, "shape": "nested"}
    assert v["logprobs.cap"] == {"5": 5, "20": 20, "21": "HTTP 400"}
    assert v["logprobs.default_top"] == 0
    assert v["stream.granularity"] == "token"
    assert v["model.echo"] == "echoed"
    assert v["tools.stream"] == {"supported": True, "status": 200, "arguments": "incremental"}


async def test_a_max_tokens_above_the_context_refused_while_prompt_overflow_is_clamped_is_seen() -> None:
    # vLLM 0.32 clamps prompt + max_tokens to the context but refuses max_tokens > max_model_len with 400
    v = await _observe(Persona(cap_over_context="error"))
    assert v["length.over_context"] == "clamped to context"
    assert v["length.max_tokens_over_context"] == "error 400"


async def test_llamacpp_tgi_trtllm_like_differences_are_each_observed() -> None:
    other = Persona(
        max_stop=None,
        keep_stop=True,
        stop_finish="stop_sequence",
        stop_mode="token",
        unknown_fields="reject",
        honour_top_k=False,
        honour_seed=False,
        n_mode="ignore",
        usage_unasked=True,
        cached_tokens=True,
        json_schema=False,
        validation_status=422,
        error_shape="tgi",
        unknown_model_status=None,
        max_top_logprobs=100,
        default_top_logprobs=20,
        over_context="error",
        default_max_tokens=17,
        defaults="other",
        echo_model=False,
        tools=False,
        stream_options_needs_stream=False,
    )
    v = await _observe(other)
    assert v["stop.count"] == {"accepted": True, "status": 200, "honoured": 6}
    assert v["stop.kept"] == "kept"
    assert v["stop.matching"] == "token"
    assert v["finish.stop_string"] == "stop_sequence"
    assert v["request.unknown_field"] == "rejected 422"
    assert v["sampling.top_k_1"] == "ignored"
    assert v["sampling.seed_repeat"] == "not reproduced"
    assert v["n.honoured"] == {"choices": 1, "status": 200}
    assert v["usage.stream_default"] == "present"
    assert v["usage.cached_tokens"] == "reported, hit"
    assert v["usage.stream_options_without_stream"] == "accepted"
    assert v["response_format.json_schema"] == {"accepted": False, "status": 422, "valid": None}
    assert v["max_tokens.omitted"] == "capped at 17"
    assert v["length.over_context"] == "error 422"
    assert v["error.malformed"] == {"status": 422, "shape": "tgi"}
    assert v["error.unknown_model"] == {"status": 200, "shape": None}
    assert v["logprobs.cap"] == {"5": 5, "20": 20, "21": 21}
    assert v["logprobs.default_top"] == 20
    assert v["model.echo"] == "other"
    assert v["tools.stream"] == {"supported": False, "status": 422}


async def test_greedy_defaults_are_told_apart_from_openai_defaults() -> None:
    v = await _observe(Persona(defaults="greedy"), ["sampling.defaults"])
    assert v["sampling.defaults"] == "greedy"
    v = await _observe(Persona(defaults="other"), ["sampling.defaults"])
    assert v["sampling.defaults"] == "sampled with other server defaults"


async def test_breaking_difference_is_flagged_and_same_behaviour_is_not() -> None:
    ids = ["finish.stop_string", "stop.kept", "model.echo"]
    async with serve(Persona()) as a, serve(Persona(stop_finish="stop_sequence", echo_model=False)) as b:
        report = await run_probes(Target(a), Target(b), select(ids), OPTS)
    by = {r.id: r for r in report.results}
    assert by["finish.stop_string"].verdict == "differs" and by["finish.stop_string"].breaking_difference
    assert by["stop.kept"].verdict == "same"
    assert by["model.echo"].verdict == "differs" and not by["model.echo"].breaking_difference
    assert report.breaking_differences == ["finish.stop_string"]


async def test_endpoint_dying_mid_probe_gives_a_partial_report() -> None:
    async with serve(Persona()) as a, serve(Persona(die_after=6)) as b:
        report = await run_probes(Target(a), Target(b), select(["stop", "finish_reason"]), OPTS)
    assert report.partial and report.new is not None and not report.new.reachable
    assert report.results[0].old.status == "observed"
    assert any(r.new is not None and r.new.status == "skipped" for r in report.results)
    assert all(r.verdict != "differs" for r in report.results if r.new and r.new.status != "observed")


async def test_unreachable_endpoint_is_reported_not_raised() -> None:
    report = await run_probes(Target("http://127.0.0.1:9"), None, select(["finish.length"]), OPTS)
    assert report.partial and not report.old.reachable
    assert report.results[0].old.status == "skipped"


VALIDATION = [
    "request.native_override",
    "max_tokens.both_fields",
    "max_tokens.zero",
    "sampling.out_of_range",
    "n.over_slots",
    "n.sampled_distinct",
    "request.user_metadata",
]


async def test_validation_probes_read_which_limit_won_and_each_refusal() -> None:
    lenient = await _observe(Persona(), VALIDATION)
    assert lenient == {
        "request.native_override": "max_tokens honoured",  # the unknown n_predict ignored
        "max_tokens.both_fields": "max_tokens wins",
        "max_tokens.zero": "rejected 400",
        "sampling.out_of_range": dict.fromkeys(
            ("temperature=3", "temperature=-1", "top_p=1.5", "presence_penalty=3"), "accepted"
        ),
        "n.over_slots": {"choices": 16, "status": 200},
        "n.sampled_distinct": "distinct",
        "request.user_metadata": {"user": "accepted", "metadata": "accepted"},
    }
    strict = await _observe(Persona(unknown_fields="reject", n_mode="reject"), VALIDATION)
    assert strict["request.native_override"] == strict["max_tokens.both_fields"] == "rejected 400"
    assert strict["request.user_metadata"] == {"user": "rejected 400", "metadata": "rejected 400"}
    assert strict["n.over_slots"] == {"choices": 0, "status": 400} and strict["n.sampled_distinct"] == "rejected 400"
