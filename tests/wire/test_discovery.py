"""Endpoint discovery reads the model list once and the context length where the engine's profile says, naming it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from aiohttp import web

from switchover.engines import load_profile
from switchover.testing import FakeEngine
from switchover.wire import EngineClient
from switchover.wire.discovery import Target, discover, discover_target, loading_engine, profiles_for

VLLM_LIST = {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 4096}]}
LLAMA_NEW_LIST = {"object": "list", "data": [{"id": "m", "meta": {"n_ctx": 2048, "n_ctx_train": 8192}}]}
LLAMA_OLD_LIST = {"object": "list", "data": [{"id": "m", "meta": {"n_ctx_train": 8192}}]}
PROPS = {"default_generation_settings": {"n_ctx": 1024}, "total_slots": 1}


TGI_LIST = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "tgi"}]}
TGI_INFO = {"model_id": "m", "max_input_tokens": 3000, "max_total_tokens": 3072}


def _serve(
    listing: dict[str, Any], props: dict[str, Any] | None, seen: Counter[str], info: dict[str, Any] | None = None
):
    async def h(req: web.Request) -> web.Response:
        seen[req.path] += 1
        if req.path == "/v1/models":
            return web.json_response(listing)
        if req.path == "/props" and props is not None:
            return web.json_response(props)
        if req.path == "/info" and info is not None:
            return web.json_response(info)
        return web.json_response({"error": {"message": "not found"}}, status=404)

    return h


CASES = [  # listing, /props, engine, version -> tokens, where it was read, paths asked
    (VLLM_LIST, None, "vllm", None, 4096, "/v1/models max_model_len (vllm profile)", {"/v1/models": 1}),
    (VLLM_LIST, PROPS, None, None, 4096, "/v1/models max_model_len (vllm profile)", {"/v1/models": 1}),
    (LLAMA_NEW_LIST, PROPS, "llamacpp", "b11434", 2048, "/v1/models meta.n_ctx (llamacpp profile)", {"/v1/models": 1}),
    (
        LLAMA_OLD_LIST,
        PROPS,
        "llamacpp",
        "b5000",
        1024,
        "/props default_generation_settings.n_ctx (llamacpp profile)",
        {"/v1/models": 1, "/props": 1},
    ),
    (
        LLAMA_OLD_LIST,
        PROPS,
        None,
        None,
        1024,
        "/props default_generation_settings.n_ctx (llamacpp profile)",
        {"/v1/models": 1, "/info": 1, "/props": 1},
    ),  # no engine: TGI's /info is asked too (404 here)
]


@pytest.mark.parametrize(("listing", "props", "engine", "version", "tokens", "source", "asked"), CASES)
async def test_the_context_length_is_read_where_the_profile_says_and_named(
    listing: dict[str, Any],
    props: dict[str, Any] | None,
    engine: str | None,
    version: str | None,
    tokens: int,
    source: str,
    asked: dict[str, int],
) -> None:
    seen: Counter[str] = Counter()
    async with FakeEngine(handler=_serve(listing, props, seen)).running() as url, EngineClient(url) as client:
        found = await discover(client, engine=engine, version=version)
    assert found.model == "m" and found.context is not None
    assert (found.context.tokens, found.context.source) == (tokens, source)
    assert dict(seen) == asked


async def test_a_vllm_field_is_not_read_for_a_llamacpp_endpoint() -> None:
    seen: Counter[str] = Counter()
    async with FakeEngine(handler=_serve(VLLM_LIST, None, seen)).running() as url, EngineClient(url) as client:
        found = await discover(client, engine="llamacpp")
    assert found.context is not None and found.context.tokens is None
    assert "/props default_generation_settings.n_ctx (llamacpp)" in (found.context.reason or "")


async def test_a_release_the_profile_has_no_source_for_is_said_not_guessed() -> None:
    seen: Counter[str] = Counter()
    async with FakeEngine(handler=_serve(VLLM_LIST, None, seen)).running() as url, EngineClient(url) as client:
        old = await discover(client, engine="vllm", version="0.6.3")  # read from 0.10.0 on
        trt = await discover(client, engine="trtllm")
    assert old.context is not None and old.context.tokens is None
    assert old.context.reason == "no context-length source read from the source of vllm 0.6.3"
    assert trt.context is not None and trt.context.tokens is None
    assert trt.context.reason == "no context-length source read from the source of trtllm"


async def test_tgi_reports_its_context_on_info_and_no_engine_finds_it_after_the_list() -> None:
    seen: Counter[str] = Counter()
    async with FakeEngine(handler=_serve(TGI_LIST, None, seen, TGI_INFO)).running() as url, EngineClient(url) as client:
        tgi = await discover(client, engine="tgi", version="3.3.6")
        anyone = await discover(client)
    assert tgi.context is not None and (tgi.context.tokens, tgi.context.source) == (
        3072,
        "/info max_total_tokens (tgi profile)",
    )
    assert anyone.context is not None and anyone.context.tokens == 3072
    assert seen["/v1/models"] == 2 and seen["/props"] == 0  # every /v1/models field is read before another path


async def test_a_given_model_is_kept_and_an_empty_list_gives_none() -> None:
    seen: Counter[str] = Counter()
    empty = {"object": "list", "data": []}
    async with FakeEngine(handler=_serve(empty, None, seen)).running() as url, EngineClient(url) as client:
        given = await discover(client, model="mine", engine="vllm", context=False)
        none = await discover(client, engine="vllm", context=False)
    assert (given.model, none.model) == ("mine", None)
    assert given.context is None and seen["/v1/models"] == 2


async def test_a_composer_discovery_spares_the_second_request() -> None:
    seen: Counter[str] = Counter()
    async with FakeEngine(handler=_serve(VLLM_LIST, None, seen)).running() as url, EngineClient(url) as client:
        first = await discover(client, engine="vllm")
        again = await discover_target(client, Target(url, engine="vllm", discovered=first))
        given = await discover_target(client, Target(url, engine="vllm", context=77, discovered=first))
    assert again is first and seen["/v1/models"] == 1
    assert given.context is not None and (given.context.tokens, given.context.source) == (77, "given")


async def test_an_unreachable_endpoint_is_a_listing_failure_not_an_exception() -> None:
    async with EngineClient("http://127.0.0.1:1") as client:
        found = await discover(client, engine="vllm")
    assert not found.listing.answered and found.listing.failure is not None
    assert found.model is None and found.context is None


LLAMA = load_profile("llamacpp").display_name
LOADING = [  # status, body, engine -> the engine whose loading answer it is
    (503, '{"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}', "llamacpp", LLAMA),
    (503, '{"error": {"message": "Loading model"}}', None, LLAMA),
    (503, '{"error": {"message": "Loading model"}}', "vllm", None),  # vLLM refuses connections while it loads
    (503, '{"error": {"message": "overloaded"}}', None, None),
    (200, "Loading model", "llamacpp", None),
]


@pytest.mark.parametrize(("status", "body", "engine", "who"), LOADING)
def test_a_loading_answer_is_the_profiles(status: int, body: str, engine: str | None, who: str | None) -> None:
    assert loading_engine(status, body, profiles_for(engine)) == who


def test_with_no_engine_every_profile_is_tried_and_the_names_list_is_the_data_files() -> None:
    from importlib import resources

    from switchover.engines.names import ENGINES

    data = resources.files("switchover.engines").joinpath("data")
    files = sorted(p.name[: -len(".yaml")] for p in data.iterdir() if p.name.endswith(".yaml"))
    assert sorted(ENGINES) == files
    assert [p.name for p in profiles_for(None)] == list(ENGINES)


def test_the_migration_files_engine_choices_are_the_names_list_plus_openai_and_are_described() -> None:
    from switchover.config.migration import Engine, Migration
    from switchover.engines.names import ENGINES

    assert [e.value for e in Engine] == [*ENGINES, "openai"]
    assert "OpenAI-compatible" in Migration.model_json_schema()["$defs"]["Engine"]["description"]


def test_every_context_length_and_readiness_source_is_a_url_at_a_release_or_commit() -> None:
    import re

    from switchover.engines.names import ENGINES

    at_release = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/blob/(v?\d[\w.]*|b\d+|[0-9a-f]{7,40})/\S+")
    for name in ENGINES:
        prof = load_profile(name)
        for src in [c.source for c in prof.context_length] + [prof.readiness.source]:
            first = src.split(";")[0].split()[0]
            assert at_release.fullmatch(first), (name, src)


#: Code that still lists the models itself, each with the owner's change it waits for (remove the line then).
LISTS_MODELS_ITSELF = {
    "bench/endpoints.py": "open_endpoint: take the check's discovery (or call wire.discovery.list_models)",
    "wire/client.py": "EngineClient.models(): no caller left in src (one real-engine test)",
}


def test_only_discovery_requests_the_model_list() -> None:
    import re
    from pathlib import Path

    import switchover

    src = Path(switchover.__file__).parent
    asking = re.compile(r"request\(\s*\"GET\",\s*\"/v1/models\"")
    found = {p.relative_to(src).as_posix() for p in src.rglob("*.py") if asking.search(p.read_text(encoding="utf-8"))}
    assert found - set(LISTS_MODELS_ITSELF) == set(), "GET /v1/models goes through wire/discovery.py (list_models)"
