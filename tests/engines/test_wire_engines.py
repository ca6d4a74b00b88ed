"""The wire client against the real engines: vLLM CPU (old) and llama-server (new), tiny model."""

from __future__ import annotations

import pytest

from switchover.wire import EngineClient, FailureKind
from switchover.wire.readiness import ReadyState, check_ready

from .conftest import Bed

pytestmark = pytest.mark.engines

ROLES = ["old", "new"]


@pytest.fixture(params=["raw", "aiohttp"])
def transport(request: pytest.FixtureRequest) -> str:
    """Both transports of the wire client must read the real engines the same way."""
    return str(request.param)


def _url(bed: Bed, role: str) -> str:
    return bed.old_url if role == "old" else bed.new_url


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("api", ["chat", "completions"])
async def test_streamed_generation_is_parsed_and_usage_matches(transport: str, bed: Bed, role: str, api: str) -> None:
    async with EngineClient(_url(bed, role), transport=transport) as c:
        if api == "chat":
            rec = await c.chat(
                [{"role": "user", "content": "def hello"}], model=bed.model, max_tokens=8, temperature=0, stream=True
            )
        else:
            rec = await c.complete("def hello", model=bed.model, max_tokens=8, temperature=0, stream=True)
    assert rec.ok, rec.failure
    assert rec.usage is not None and rec.usage.prompt_tokens and rec.usage.prompt_tokens > 0
    # each token yields at most one text chunk; a token can yield none (vLLM holds back a partial UTF-8 byte
    # token's text), so chunk counting is not a token count: usage is
    assert sum(1 for t in rec.chunk_text if t) <= (rec.usage.completion_tokens or 0)
    assert rec.usage.completion_tokens is not None and 1 <= rec.usage.completion_tokens <= 8
    # events that arrive in one socket read share its timestamp (vLLM sends the role-only chat chunk and the
    # first token together; on a busy machine llama-server's 0.2 ms tokens pile up between two reads)
    assert all(b >= a for a, b in zip(rec.chunk_ns, rec.chunk_ns[1:], strict=False))
    distinct = len(set(rec.chunk_ns))
    assert rec.coalesced_chunks == len(rec.chunk_ns) - distinct
    # (strictly increasing per-read stamps are proven against a paced local server in tests/wire)
    assert rec.ttft_ns is not None and rec.e2e_ns is not None and 0 < rec.ttft_ns <= rec.e2e_ns


@pytest.mark.parametrize("role", ROLES)
async def test_small_max_tokens_finishes_with_length(transport: str, bed: Bed, role: str) -> None:
    async with EngineClient(_url(bed, role), transport=transport) as c:
        rec = await c.complete(
            "import os\n", model=bed.model, max_tokens=3, temperature=0, stream=True, ignore_eos=True
        )
    assert rec.ok, rec.failure
    assert rec.finish_reason == "length"
    assert rec.usage is not None and rec.usage.completion_tokens == 3


@pytest.mark.parametrize("role", ROLES)
async def test_stop_string_finishes_with_stop(transport: str, bed: Bed, role: str) -> None:
    async with EngineClient(_url(bed, role), transport=transport) as c:
        probe = await c.complete("def hello", model=bed.model, max_tokens=16, temperature=0)
        assert probe.ok and len(probe.text) >= 4, probe.failure
        # stop on a piece of what the model will greedily generate anyway
        stop = probe.text[1:4] if probe.text[1:4].strip() else probe.text[:3]
        rec = await c.complete("def hello", model=bed.model, max_tokens=16, temperature=0, stop=[stop], stream=True)
    assert rec.ok, rec.failure
    assert rec.finish_reason == "stop", (stop, probe.text, rec.text)
    assert stop not in rec.text


@pytest.mark.parametrize("role", ROLES)
async def test_non_streamed_usage_is_parsed(transport: str, bed: Bed, role: str) -> None:
    async with EngineClient(_url(bed, role), transport=transport) as c:
        rec = await c.complete("x = 1", model=bed.model, max_tokens=4, temperature=0)
    assert rec.ok and rec.usage is not None
    assert rec.usage.total_tokens == rec.usage.prompt_tokens + rec.usage.completion_tokens


async def test_vllm_unknown_model_error_body_is_parsed(transport: str, bed: Bed) -> None:
    async with EngineClient(bed.old_url, transport=transport) as c:
        rec = await c.chat([{"role": "user", "content": "x"}], model="no-such-model", max_tokens=2)
    assert rec.failure is not None and rec.failure.kind == FailureKind.HTTP_STATUS
    assert rec.failure.status == 404
    assert rec.failure.body is not None and rec.failure.body.shape in ("nested", "flat")
    assert "no-such-model" in rec.failure.body.message


async def test_llamacpp_closed_keepalive_after_a_stream_is_resent_once(transport: str, bed: Bed) -> None:
    # llama-server advertises keep-alive but closes the connection after a streamed response
    async with EngineClient(bed.new_url, transport=transport) as c:
        first = await c.complete("a", model=bed.model, max_tokens=2, stream=True)
        second = await c.complete("b", model=bed.model, max_tokens=2, stream=True)
    assert first.ok and second.ok, (first.failure, second.failure)
    assert second.reconnects <= 1


async def test_llamacpp_reports_engine_timings(transport: str, bed: Bed) -> None:
    async with EngineClient(bed.new_url, transport=transport) as c:
        rec = await c.complete("x = 1", model=bed.model, max_tokens=4, temperature=0)
    assert rec.engine_timings is not None and "predicted_n" in rec.engine_timings


@pytest.mark.parametrize("role", ROLES)
async def test_models_health_metrics_and_tokenize(transport: str, bed: Bed, role: str) -> None:
    async with EngineClient(_url(bed, role), transport=transport) as c:
        assert bed.model in await c.models()
        assert (await c.health()).status == 200
        metrics = await c.metrics()
        assert metrics.status == 200 and (b"vllm:" in metrics.body or b"llamacpp:" in metrics.body)
        tokens = await c.tokenize("def hello", bed.model)
        rec = await c.complete("def hello", model=bed.model, max_tokens=1)
    assert tokens is not None and len(tokens) > 0
    assert rec.usage is not None and abs(len(tokens) - (rec.usage.prompt_tokens or 0)) <= 1


@pytest.mark.parametrize("role", ROLES)
async def test_both_engines_are_ready(bed: Bed, role: str) -> None:
    r = await check_ready(_url(bed, role), max_ms=10000)
    assert r.state == ReadyState.READY, r.reason
    assert r.model == bed.model  # discovered from /v1/models
    slow = await check_ready(_url(bed, role), model=bed.model, max_ms=0.01)  # no engine answers in 10 µs
    assert slow.state == ReadyState.SLOW and not slow.ready, slow.reason


async def test_an_unknown_model_on_vllm_is_an_error_not_ready(bed: Bed) -> None:
    r = await check_ready(bed.old_url, model="no-such-model", max_ms=10000)  # vLLM answers 404 for it
    assert r.state == ReadyState.ERROR and not r.ready, r.reason
