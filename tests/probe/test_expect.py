"""Profile predictions in the probes' own vocabulary, and mismatches reported when a server differs."""

from __future__ import annotations

import pytest

from switchover.engines import load_profile
from switchover.probe import ProbeOptions, Target, run_probes, select
from switchover.probe.expect import expected, matches
from switchover.testing import Persona
from tests.probe.conftest import serve


@pytest.mark.parametrize(
    ("engine", "probe", "want"),
    [
        ("vllm", "stop.count", {"accepted": False, "status": 400, "honoured": 0}),
        ("llamacpp", "stop.count", {"accepted": True, "status": 200, "honoured": 6}),
        ("tgi", "finish.stop_string", "stop_sequence"),
        ("tgi", "stop.kept", "kept"),
        ("trtllm", "stop.matching", "token"),
        ("trtllm", "request.unknown_field", "rejected 400"),
        ("tgi", "n.honoured", {"choices": 1, "status": 200}),
        ("sglang", "sampling.seed_repeat", "not reproduced"),
        ("vllm", "usage.cached_tokens", "not reported"),
        ("llamacpp", "usage.cached_tokens", "reported, hit"),
        ("tgi", "length.over_context", "error 422"),
        ("vllm", "error.unknown_model", {"status": 404}),
        ("tgi", "error.malformed", {"status": 422, "shape": "tgi"}),
        ("llamacpp", "sampling.defaults", "sampled with other server defaults"),
        ("vllm", "sampling.defaults", "same as temperature=1, top_p=1"),
        ("vllm", "logprobs.cap", None),
    ],
)
def test_profile_predictions_use_the_probe_vocabulary(engine: str, probe: str, want: object) -> None:
    assert expected(probe, load_profile(engine).api) == want


def test_matches_compares_only_predicted_keys_of_dicts() -> None:
    assert matches({"accepted": True, "status": 200, "valid": "truncated"}, {"accepted": True})
    assert not matches({"accepted": False, "status": 400}, {"accepted": True})
    assert matches("stop", "stop") and not matches("stop", "stop_sequence")


async def test_a_server_unlike_its_profile_is_reported_as_a_mismatch() -> None:
    ids = ["finish.stop_string", "stop.kept", "error.unknown_model"]
    opts = ProbeOptions(time_budget_s=10, probe_timeout_s=30, request_timeout_s=10)
    async with serve(Persona()) as url:  # behaves like vLLM
        ok = await run_probes(Target(url, engine="vllm"), None, select(ids), opts)
        bad = await run_probes(Target(url, engine="tgi"), None, select(ids), opts)
    assert ok.profile_mismatches == []
    assert set(bad.profile_mismatches) == {"old:finish.stop_string", "old:stop.kept", "old:error.unknown_model"}
    r = next(r for r in bad.results if r.id == "stop.kept")
    assert r.old.expected == "kept" and r.old.profile_match is False


def test_each_prediction_is_declared_on_its_probe_and_stored_as_plain_strings() -> None:
    from switchover.probe.registry import all_probes
    from switchover.probe.report import Observation
    from switchover.probe.values import Cached, StopKept

    api = load_profile("vllm").api
    predicting = {p.id for p in all_probes() if p.expect is not None}
    assert {"stop.kept", "sampling.defaults", "error.malformed"} <= predicting
    assert all(expected(pid, api) is None for pid in {p.id for p in all_probes()} - predicting)
    assert expected("no.such.probe", api) is None
    obs = Observation(value={"kept": StopKept.KEPT}, expected=Cached.HIT)
    assert type(obs.value["kept"]) is str and type(obs.expected) is str
    assert obs.model_dump_json() == Observation(value={"kept": "kept"}, expected="reported, hit").model_dump_json()
