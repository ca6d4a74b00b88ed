"""The metrics part compares each side's series at the release it runs (engine_version), not the newest."""

from __future__ import annotations

from switchover.check.parts import metrics_part
from switchover.config.migration import Migration
from switchover.testbed.processes import free_port


def _migration(old: str, new: str) -> Migration:
    def side(ref: str) -> dict[str, str]:
        engine, _, version = ref.partition("@")
        out = {"url": f"http://127.0.0.1:{free_port()}", "engine": engine}
        return {**out, "engine_version": version} if version else out

    return Migration.model_validate({"old": side(old), "new": side(new)})


async def test_a_series_renamed_between_the_two_releases_is_reported_renamed() -> None:
    ev = await metrics_part(_migration("vllm@0.6.3", "vllm@0.11.0"))
    kv = next(i for i in ev.intents if i.intent == "kv_usage")
    assert (kv.old, kv.new, kv.status) == ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc", "renamed")
    assert ev.old is not None and not ev.old.reachable  # nothing listens: the scrape says so


async def test_the_same_release_on_both_sides_has_the_same_series() -> None:
    ev = await metrics_part(_migration("vllm@0.6.3", "vllm@0.6.3"))
    assert next(i for i in ev.intents if i.intent == "kv_usage").status == "same"


async def test_a_series_is_found_only_under_its_whole_name() -> None:
    from aiohttp import web

    from switchover.testing import FakeEngine

    text = (
        "# TYPE vllm:num_requests_running_extra gauge\nvllm:num_requests_running_extra 1\n"
        '# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name="m"} 0\n'
    )

    async def h(req: web.Request) -> web.Response:
        return web.Response(text=text, content_type="text/plain")

    async with FakeEngine(handler=h).running() as url:
        m = Migration.model_validate({"old": {"url": url, "engine": "vllm"}, "new": {"url": url, "engine": "vllm"}})
        ev = await metrics_part(m)
    assert ev.old is not None and ev.old.reachable
    assert "vllm:num_requests_waiting" in ev.old.profile_names_found
    assert "vllm:num_requests_running" in ev.old.profile_names_missing  # only a longer name holds it as a prefix
