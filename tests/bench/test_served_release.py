"""The bench reads an engine's metrics and flags with the spellings of the release the endpoint reports (/version):
vLLM before 0.9.2 serves its KV cache usage as vllm:gpu_cache_usage_perc, from 0.9.2 as vllm:kv_cache_usage_perc."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from switchover.bench.runner import BenchRun
from switchover.bench.scrape import Scraper, wanted_series
from switchover.evidence.bench import BenchPlan, EndpointSpec
from switchover.testing import FakeEngine
from switchover.wire.client import HttpResult

OLD_METRICS = (
    'vllm:num_requests_running{model_name="m"} 2.0\n'
    'vllm:num_requests_waiting{model_name="m"} 1.0\n'
    'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n'
)


def test_the_series_wanted_are_those_of_the_release_served() -> None:
    old, _ = wanted_series("vllm", "0.8.0")
    new, _ = wanted_series("vllm", "0.32.0")
    assert old["vllm:gpu_cache_usage_perc"] == "kv_usage" and "vllm:kv_cache_usage_perc" not in old
    assert new["vllm:kv_cache_usage_perc"] == "kv_usage" and "vllm:gpu_cache_usage_perc" not in new
    assert wanted_series("vllm", "not a release")[0] == wanted_series(None)[0]  # no profile read: the engine's RSS


class _Old:
    async def request(self, method: str, path: str, timeout: float | None = None) -> HttpResult:
        return HttpResult(200, OLD_METRICS.encode(), 1.0)


@pytest.mark.parametrize(
    ("version", "kept"), [("0.8.0", {"running", "waiting", "kv_usage"}), (None, {"running", "waiting"})]
)
async def test_an_older_vllms_kv_cache_usage_is_read_at_its_release_and_missed_without_it(version, kept) -> None:
    s = Scraper(_Old(), "old", "vllm", 0.1, version=version)  # type: ignore[arg-type]
    await s.once()
    assert {r["intent"] for r in s.rows} == kept  # without the release (before): the newest name, no KV reading


def _engine(version: str | None) -> FakeEngine:
    eng = FakeEngine(delay_ms=5)

    async def version_route(request: web.Request) -> web.Response:
        return web.json_response({"version": version})

    async def metrics_route(request: web.Request) -> web.Response:
        return web.Response(text=OLD_METRICS)

    if version is not None:
        eng._routes[("GET", "/version")] = version_route
    eng._routes[("GET", "/metrics")] = metrics_route
    return eng


@pytest.mark.parametrize("version", ["0.8.0", None])
async def test_a_run_against_an_older_vllm_scrapes_its_kv_cache_usage_and_says_what_it_assumed(tmp_path, version):
    eng = _engine(version)
    await eng.start()
    try:
        data = tmp_path / "prompts.jsonl"
        data.write_text('{"prompt": "hello there"}\n' * 4)
        plan = BenchPlan(
            endpoints=[EndpointSpec(label="old", url=eng.url, engine="vllm")],
            dataset=str(data),
            api="completions",
            output_tokens=4,
            concurrency=[2],
            requests=30,
            calibrate=False,
            scrape_interval_s=0.05,
        )
        report, rd = await asyncio.wait_for(BenchRun(plan, tmp_path).run(), 60)
    finally:
        await eng.stop()
    (info,) = report.endpoints
    names = {r["name"] for r in rd.read_records("metrics") if r["intent"] == "kv_usage"}
    if version:
        assert info.engine_version == "0.8.0" and info.engine_version_note is None
        assert names == {"vllm:gpu_cache_usage_perc"}
    else:  # nothing reported: the newest spellings, and the report says so
        assert info.engine_version is None and "newest spellings" in (info.engine_version_note or "")
        assert names == set()
