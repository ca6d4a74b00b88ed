"""`probe` and `verify` find each endpoint through wire/discovery.py: one /v1/models, the context where the profile
says the engine reports it (none for an engine whose profile names no source)."""

from __future__ import annotations

from collections import Counter

from aiohttp import web

from switchover.probe import ProbeOptions, Target, run_probes, select
from switchover.testing import FakeEngine, Persona


class Counting(FakeEngine):
    def __init__(self) -> None:
        super().__init__("fake", persona=Persona(context=1234))
        self.paths: Counter[str] = Counter()

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.paths[request.path] += 1
        return await super()._dispatch(request)


OPTS = ProbeOptions(time_budget_s=5)


async def test_probe_lists_the_models_once_and_reads_vllms_context_from_it() -> None:
    engine = Counting()
    async with engine.running() as url:
        report = await run_probes(Target(url, engine="vllm"), None, select(["stop.count"]), OPTS)
    assert engine.paths["/v1/models"] == 1 and engine.paths["/props"] == 0
    assert report.old.context == 1234 and report.old.model == "fake-model"


async def test_an_engine_whose_profile_names_no_context_source_gets_none_not_vllms_field() -> None:
    engine = Counting()
    async with engine.running() as url:
        report = await run_probes(Target(url, engine="trtllm"), None, select(["stop.count"]), OPTS)
    assert report.old.context is None and engine.paths["/v1/models"] == 1


async def test_a_given_context_wins_over_the_servers() -> None:
    engine = Counting()
    async with engine.running() as url:
        report = await run_probes(Target(url, engine="vllm", context=99), None, select(["stop.count"]), OPTS)
    assert report.old.context == 99


async def test_verify_lists_each_endpoints_models_once() -> None:
    from switchover.verify import BUILTIN, VerifyOptions, run_verify

    old, new = Counting(), Counting()
    async with old.running() as a, new.running() as b:
        report = await run_verify(
            Target(a), Target(b), list(BUILTIN)[:1], VerifyOptions(structured=0, long_inputs=False)
        )
    assert report.model_old == "fake-model"
    assert (old.paths["/v1/models"], new.paths["/v1/models"]) == (1, 1)
