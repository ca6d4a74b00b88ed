"""The overload probe's readings: the engine's waiting gauge (read by bench/scrape.py's parser) and TPOT (by
wire/timing.py), without an engine."""

from __future__ import annotations

from aiohttp import web

from switchover.probe.overload import _tpot, _waiting
from switchover.testing import FakeEngine
from switchover.wire import EngineClient
from switchover.wire.records import RequestRecord, Usage

METRICS = """# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="1",model_name="m"} 2.0
# HELP vllm:num_requests_waiting_time_seconds Time waited.
# TYPE vllm:num_requests_waiting_time_seconds histogram
vllm:num_requests_waiting_time_seconds_bucket{le="+Inf"} 9.0
vllm:num_requests_waiting_time_seconds_count 9.0
vllm:num_requests_waiting_time_seconds_sum 40.0
"""


def _engine(body: str, path: str) -> FakeEngine:
    """A fake engine exposing `body` as its Prometheus metrics at `path` (404 elsewhere)."""

    async def metrics(req: web.Request) -> web.Response:
        if req.path != path:
            return web.json_response({"error": {"message": "not found"}}, status=404)
        return web.Response(text=body, content_type="text/plain")

    return FakeEngine(handler=metrics)


async def test_waiting_gauge_sums_its_series_and_nothing_with_a_longer_name() -> None:
    async with _engine(METRICS, "/prom").running() as url, EngineClient(url) as c:
        assert await _waiting(c, "vllm:num_requests_waiting", "/prom") == 5.0
        assert await _waiting(c, "vllm:num_requests_running", "/prom") is None  # not exposed: not measured
        assert await _waiting(c, "vllm:num_requests_waiting", "/metrics") is None  # 404: not measured
        assert await _waiting(c, None) is None


def test_tpot_is_missing_below_two_tokens_and_ends_at_the_last_event_with_choices() -> None:
    rec = RequestRecord(api="completions", stream=True, model="m", started_wall=0.0, send_ns=0)
    rec.chunk_ns, rec.chunk_text, rec.chunk_choice = [10_000_000, 20_000_000, 40_000_000], ["a", "b", ""], [0, 0, 0]
    rec.end_ns = 90_000_000  # [DONE] and usage came later: not part of E2E
    rec.usage = Usage(prompt_tokens=1, completion_tokens=4)
    assert _tpot(rec) == (40 - 10) / 3
    rec.usage = Usage(prompt_tokens=1, completion_tokens=1)
    assert _tpot(rec) is None
    rec.usage = Usage(prompt_tokens=1, completion_tokens=3)
    rec.chunk_ns = [40_000_000] * 3  # every token in one read: the gaps were not seen, TPOT is not 0
    assert _tpot(rec) is None
