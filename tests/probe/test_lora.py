"""The `lora.adapters` probe: what a server has mounted, read from the listings the LoRA data cites (llama-server's
/lora-adapters, /v1/models parents), and "not applicable" when no listing answers. Servers are on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from switchover.engines.lora import AdapterListing, lora_data, lora_semantics
from switchover.probe.catalog.lora import adapters, adapters_from
from switchover.probe.context import ProbeContext
from switchover.probe.registry import REGISTRY, all_probes
from switchover.wire import EngineClient

LLAMA = AdapterListing(path="/lora-adapters", shape="lora_adapters")
MODELS = AdapterListing(path="/v1/models", shape="models_parent")


@pytest.mark.parametrize(
    ("listing", "body", "names"),
    [
        (
            LLAMA,
            [{"id": 0, "path": "/a/sql-v2.gguf", "scale": 1.0}, {"id": 1, "path": "chat.gguf", "scale": 0.0}],
            ["sql-v2", "chat"],
        ),
        (LLAMA, [], []),
        (
            MODELS,
            {"data": [{"id": "tiny", "parent": None}, {"id": "tiny-sql", "parent": "tiny", "root": "/x"}]},
            ["tiny-sql"],
        ),
        (MODELS, {"data": [{"id": "tiny"}]}, []),  # llama-server's own /v1/models: no parent key
        (LLAMA, {"error": "not found"}, None),  # not this listing's shape
        (MODELS, [1, 2], None),
        (LLAMA, [{"id": 0}], None),
    ],
)
def test_adapter_names_are_read_from_each_listing_shape(
    listing: AdapterListing, body: Any, names: list[str] | None
) -> None:
    got = adapters_from(listing, body)
    assert (got[0] if got else None) == names


@asynccontextmanager
async def _server(routes: dict[str, Any]) -> AsyncIterator[str]:
    """A loopback server answering GET path -> JSON body (None: 404)."""
    app = web.Application()
    for path, body in routes.items():

        async def handler(_: web.Request, body: Any = body) -> web.Response:
            return web.json_response(body) if body is not None else web.Response(status=404)

        app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def _observe(routes: dict[str, Any]) -> Any:
    async with _server(routes) as url, EngineClient(url) as client:
        return await adapters(ProbeContext(client=client, model="tiny"))


async def test_llama_server_style_listing_is_read_first_with_scales() -> None:
    obs = await _observe(
        {"/lora-adapters": [{"id": 0, "path": "sql.gguf", "scale": 0.5}], "/v1/models": {"data": [{"id": "tiny"}]}}
    )
    assert obs.status == "observed" and obs.value == ["sql"]
    assert obs.detail["listing"] == "/lora-adapters" and obs.detail["scales"] == {"sql": 0.5}


async def test_vllm_style_adapters_are_the_models_with_a_parent() -> None:
    obs = await _observe(
        {"/v1/models": {"data": [{"id": "tiny", "parent": None}, {"id": "tiny-sql", "parent": "tiny"}]}}
    )
    assert obs.value == ["tiny-sql"] and obs.summary == "1 adapter(s): tiny-sql (GET /v1/models)"


async def test_no_listing_answering_is_not_applicable_not_an_empty_list() -> None:
    obs = await _observe({"/health": {"status": "ok"}})
    assert obs.status == "skipped" and obs.summary.startswith("not applicable")
    assert "GET /lora-adapters: HTTP 404" in obs.summary


def test_the_probe_is_registered_as_breaking_in_its_own_category() -> None:
    assert "lora.adapters" in {p.id for p in all_probes()}
    p = REGISTRY["lora.adapters"]
    assert p.category == "lora" and p.breaking


def test_every_engine_entry_cites_its_source_at_the_release_it_was_read() -> None:
    for engine, entries in lora_data().engines.items():
        for e in entries:
            ref = e.read_at if e.read_at.startswith("b") else f"v{e.read_at}"
            assert all(s.startswith("https://github.com/") and f"/blob/{ref}/" in s for s in e.sources), engine


@pytest.mark.parametrize(
    ("engine", "version", "runtime", "note"),
    [
        ("vllm", "0.32.0", "VLLM_ALLOW_RUNTIME_LORA_UPDATING", None),
        ("vllm", "0.6.3", "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "not read at this release"),
        ("llamacpp", "b11434", "start-up only", None),
        ("sglang", None, "/load_lora_adapter", None),
    ],
)
def test_lora_semantics_hold_at_the_release_read_and_say_so_elsewhere(
    engine: str, version: str | None, runtime: str, note: str | None
) -> None:
    entry, said = lora_semantics(engine, version)
    assert entry is not None and runtime in entry.runtime_load
    assert (said is None) if note is None else (said is not None and note in said)


def test_an_engine_the_data_does_not_cover_is_said() -> None:
    entry, said = lora_semantics("tgi")
    assert entry is None and said == "tgi: LoRA semantics are not in the data"


def test_stacking_and_scale_are_stated_for_every_engine() -> None:
    llama, _ = lora_semantics("llamacpp")
    assert llama is not None and "order of --lora" in llama.stacking and "scale 0" in llama.per_request
    vllm, _ = lora_semantics("vllm")
    assert vllm is not None and "one adapter per request" in vllm.stacking and "lora_alpha / r" in vllm.scale
