"""The gateway end to end, in-process, against fault-injecting upstreams on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import os

import aiohttp
import orjson
import pytest

from switchover.testing import await_until
from switchover.wire.sse import parse_all
from tests.gateway.conftest import MODEL, chat, closed_port_url, stack, tenant_in

NEW_FAULT = {"X-Fault-Arm": "new"}


def events(body: bytes) -> list[bytes]:
    return [e.data for e in parse_all([body])]


async def test_weight_routes_tenants_and_normalises_the_model_field(tmp_path):
    async with stack(tmp_path, weight=50) as s:
        t_new, t_old = tenant_in(50, "new", seed=s.gw.tenant_seed), tenant_in(50, "old", seed=s.gw.tenant_seed)
        status, body, headers = await s.post(chat(), tenant=t_new)
        assert status == 200
        assert orjson.loads(body)["model"] == MODEL  # new calls itself engine-new-name
        assert b"engine-new-name" not in body
        assert "X-Switchover-Arm" not in headers
        status, body, _ = await s.post(chat(stream=True), tenant=t_new)
        assert status == 200 and b"engine-new-name" not in body
        assert all(orjson.loads(e)["model"] == MODEL for e in events(body) if e != b"[DONE]")
        await s.post(chat(), tenant=t_old)
        rows = s.rows()
        assert [(r.routed, r.arm, r.outcome) for r in rows] == [("new", "new", "ok")] * 2 + [("old", "old", "ok")]
        assert rows[1].completion_tokens == 4 and rows[1].tokens_source == "usage"
        assert rows[1].ttft_ms is not None and rows[1].finish_reason == "length"
        assert s.new.stats.requests == 2 and s.old.stats.requests == 1


async def test_arm_header_only_when_opted_in(tmp_path):
    async with stack(tmp_path, weight=100, expose_arm_header=True) as s:
        _, _, headers = await s.post(chat())
        assert headers["X-Switchover-Arm"] == "new"


@pytest.mark.parametrize(
    ("fault", "reason", "stream"),
    [
        ("status:503", "status_503", False),
        ("status:500", "status_500", True),
        ("hang:3", "timeout", True),
        ("hang:3", "timeout", False),
        ("refuse", "disconnected", True),
        ("die_mid:0", "disconnected", True),
        ("malformed:0", "malformed", True),
        ("error_event:0", "stream_error", True),
    ],
)
async def test_failures_before_the_first_byte_replay_on_old(tmp_path, fault, reason, stream):
    async with stack(tmp_path, weight=100) as s:
        status, body, _ = await s.post(chat(stream=stream), headers={"X-Fault": fault, **NEW_FAULT})
        assert status == 200
        if stream:
            assert events(body)[-1] == b"[DONE]" and b"error" not in body
        [row] = s.rows()
        assert (row.routed, row.arm, row.outcome, row.fallback_reason) == ("new", "old", "fallback_ok", reason)
        assert s.old.stats.requests == 1


async def test_connect_error_falls_back(tmp_path):
    async with stack(tmp_path, weight=100, new_url=closed_port_url()) as s:
        status, _, _ = await s.post(chat(stream=True))
        assert status == 200
        [row] = s.rows()
        assert (row.arm, row.fallback_reason, row.outcome) == ("old", "connect", "fallback_ok")


async def test_unlisted_status_is_passed_through_without_fallback(tmp_path):
    async with stack(tmp_path, weight=100) as s:
        status, body, _ = await s.post(chat(), headers={"X-Fault": "status:400", **NEW_FAULT})
        assert status == 400 and b"scripted 400" in body
        [row] = s.rows()
        assert (row.arm, row.outcome, row.fallback_reason) == ("new", "error", None)


@pytest.mark.parametrize(
    ("fault", "error"), [("die_mid:2", "disconnected"), ("malformed:2", "malformed"), ("truncate:2", "truncated")]
)
async def test_failures_after_the_first_byte_end_with_an_sse_error_event(tmp_path, fault, error):
    async with stack(tmp_path, weight=100) as s:
        status, body, _ = await s.post(chat(stream=True, max_tokens=6), headers={"X-Fault": fault, **NEW_FAULT})
        assert status == 200  # the status line was sent before the failure
        evs = events(body)
        assert evs[-1] == b"[DONE]"
        last = orjson.loads(evs[-2])
        assert last["error"]["type"] == "upstream_error" and last["choices"][0]["finish_reason"] == "error"
        assert last["model"] == MODEL
        [row] = s.rows()
        assert row.outcome == "failed_mid_stream" and row.error is not None and error in row.error
        assert row.finish_reason == "error"
        assert s.old.stats.requests == 0  # never replayed after the first byte


async def test_old_arm_breaking_mid_stream_also_ends_with_an_error_event(tmp_path):
    async with stack(tmp_path, weight=0) as s:
        _, body, _ = await s.post(chat(stream=True, max_tokens=6), headers={"X-Fault": "malformed:2"})
        evs = events(body)
        assert evs[-1] == b"[DONE]" and orjson.loads(evs[-2])["error"]["type"] == "upstream_error"
        assert [(r.arm, r.outcome) for r in s.rows()] == [("old", "failed_mid_stream")]


async def test_old_failing_too_gives_a_clean_error_status(tmp_path):
    async with stack(tmp_path, weight=100) as s:
        status, body, _ = await s.post(chat(), headers={"X-Fault": "status:503"})  # both arms
        assert status == 503  # old's own answer is passed through
        status, body, _ = await s.post(chat(), headers={"X-Fault": "refuse"})
        assert status == 502 and orjson.loads(body)["error"]["type"] == "upstream_unavailable"
        assert [r.outcome for r in s.rows()] == ["error", "error"]


async def test_client_disconnect_cancels_the_upstream_request(tmp_path):
    async with stack(tmp_path, weight=100) as s:
        async with aiohttp.ClientSession() as http:
            resp = await http.post(
                s.url + "/v1/chat/completions",
                data=orjson.dumps(chat(stream=True, max_tokens=50)),
                headers={"X-Fault": "drip:100"},
            )
            await resp.content.readany()
            resp.close()
        await await_until(lambda: s.new.stats.cancelled, 2.5, "the upstream request cancelled")
        assert s.new.stats.cancelled == 1 and s.new.stats.completed == 0
        [row] = await await_until(s.rows, 2.5, "the request's ledger row")
        assert row.outcome == "client_disconnected"


async def test_bypass_override_and_long_context_pin(tmp_path):
    async with stack(tmp_path, weight=100, max_context_tokens=10, override_header_enabled=True) as s:
        await s.post({"model": MODEL, "input": "x"}, path="/v1/embeddings")
        await s.post(chat(), headers={"X-Switchover-Route": "old"})
        await s.post({"model": MODEL, "messages": [{"role": "user", "content": "long " * 40}]})
        await s.post(chat())
        assert [(r.arm, r.route_reason) for r in s.rows()] == [
            ("old", "bypass"),
            ("old", "override"),
            ("old", "pinned_long"),
            ("new", "weight"),
        ]
        assert s.rows()[2].prompt_tokens_est == 50


async def test_override_header_is_ignored_unless_enabled(tmp_path):
    async with stack(tmp_path, weight=100) as s:
        await s.post(chat(), headers={"X-Switchover-Route": "old"})
        [row] = s.rows()
        assert (row.arm, row.route_reason) == ("new", "weight")
        assert s.new.stats.requests == 1


async def test_kill_switch_trips_latches_and_resets(tmp_path):
    ks = {"min_samples": 4, "max_fallback_ratio": 0.5, "window": 60}
    async with stack(tmp_path, weight=100, kill_switch=ks) as s:
        for _ in range(4):
            status, _, _ = await s.post(chat(), headers={"X-Fault": "status:503", **NEW_FAULT})
            assert status == 200  # fallback keeps the client whole
        assert s.gw.killswitch.latched
        await s.post(chat())
        assert s.rows()[-1].route_reason == "kill_switch" and s.rows()[-1].arm == "old"
        async with s.http.get(s.url + "/metrics") as r:
            text = await r.text()
        assert "switchover_gateway_kill_switch_latched 1.0" in text
        assert 'switchover_gateway_fallbacks_total{reason="status_503"} 4.0' in text
        async with s.http.post(s.url + "/admin/reset") as r:
            assert r.status == 403  # no token
        token = (s.gw.run_dir / "admin.token").read_text()
        async with s.http.post(s.url + "/admin/reset", headers={"X-Switchover-Admin": token}) as r:
            assert r.status == 200 and (await r.json())["was_latched"] is True
        await s.post(chat())
        assert s.rows()[-1].arm == "new"


async def test_latch_survives_a_restart(tmp_path):
    ks = {"min_samples": 2, "max_fallback_ratio": 0.4}
    async with stack(tmp_path, weight=100, kill_switch=ks) as s:
        for _ in range(2):
            await s.post(chat(), headers={"X-Fault": "status:503", **NEW_FAULT})
        assert s.gw.killswitch.latched
    async with stack(tmp_path, weight=100, kill_switch=ks) as s2:
        assert s2.gw.killswitch.latched
        await s2.post(chat())
        assert s2.rows()[-1].route_reason == "kill_switch"


async def wait_for(cond, timeout: float = 3.0) -> None:
    await await_until(cond, timeout, "the test's condition")


async def test_hot_reload_applies_weight_and_rejects_a_broken_file(tmp_path, caplog):
    async with stack(tmp_path, weight=100) as s:
        await s.post(chat())
        s.rewrite(weight=0)
        await wait_for(lambda: s.gw.live.gw.weight == 0)
        await s.post(chat())
        s.rewrite(weight=150)  # invalid
        await wait_for(lambda: "reload rejected" in caplog.text)
        assert "gateway.weight" in caplog.text
        await s.post(chat())  # still serving, on the last good config
        s.config_path.write_text("old: [unclosed")
        await wait_for(lambda: caplog.text.count("reload rejected") >= 2)
        status, _, _ = await s.post(chat())
        assert status == 200
        assert [r.arm for r in s.rows()] == ["new", "old", "old", "old"]


async def test_rollback_line_while_a_stream_is_in_flight(tmp_path):
    async with stack(tmp_path, weight=100) as s:
        task = asyncio.ensure_future(s.post(chat(stream=True, max_tokens=10), headers={"X-Fault": "drip:50"}))
        await wait_for(lambda: s.new.stats.in_flight == 1)
        s.rewrite(rollback=True)
        await wait_for(lambda: s.gw.live.gw.rollback)
        await s.post(chat())
        status, body, _ = await task
        assert status == 200 and events(body)[-1] == b"[DONE]" and b"upstream_error" not in body
        rows = {r.route_reason: r for r in s.rows()}
        assert rows["weight"].arm == "new" and rows["weight"].outcome == "ok"
        assert rows["rollback"].arm == "old"


async def test_drain_finishes_in_flight_streams_and_refuses_new_ones(tmp_path):
    async with stack(tmp_path, weight=100, drain_seconds=5) as s:
        task = asyncio.ensure_future(s.post(chat(stream=True, max_tokens=10), headers={"X-Fault": "drip:50"}))
        await wait_for(lambda: len(s.gw.inflight) == 1)
        drain = asyncio.ensure_future(s.gw.drain())
        await await_until(lambda: s.gw.draining, 2, "the drain to start")
        async with s.http.get(s.url + "/ready") as r:
            assert r.status == 503
        status, _, _ = await s.post(chat())
        assert status == 503
        status, body, _ = await task
        assert status == 200 and events(body)[-1] == b"[DONE]" and b"upstream_error" not in body
        assert await drain == 0
        assert sorted(r.outcome for r in s.rows()) == ["ok", "refused"]


async def test_the_drain_limit_ends_a_stream_with_an_error_event_and_says_so_in_the_ledger(tmp_path):
    async with stack(tmp_path, weight=100, fallback={"on_timeout_ms": 1500}) as s:
        streaming = asyncio.ensure_future(s.post(chat(stream=True, max_tokens=100), headers={"X-Fault": "drip:200"}))
        waiting = asyncio.ensure_future(s.post(chat(), headers={"X-Fault": "hang:30", **NEW_FAULT}))
        await wait_for(lambda: len(s.gw.inflight) == 2)
        await await_until(lambda: s.new.stats.events >= 2, 5, "the stream's first events")
        assert await s.gw.drain(0.2) == 2
        status, body, _ = await streaming
        evs = events(body)
        assert status == 200 and evs[-1] == b"[DONE]"
        last = orjson.loads(evs[-2])
        assert last["error"]["type"] == "gateway_shutdown" and last["choices"][0]["finish_reason"] == "error"
        status, body, _ = await waiting  # not answered yet when cut: a 503, not a dropped connection
        assert status == 503 and b"drain limit" in body
        assert sorted((r.outcome, r.status) for r in s.rows()) == [("drain_cutoff", 200), ("drain_cutoff", 503)]
        assert not s.gw.killswitch.latched and s.gw.metrics.new_arm_bad._value.get() == 0


async def test_shadow_mirrors_measures_and_never_reaches_the_client(tmp_path):
    shadow = {"percent": 100, "max_tokens_clamp": 3, "max_concurrency": 4}
    async with stack(tmp_path, weight=0, shadow=shadow) as s:
        status, body, _ = await s.post(chat(max_tokens=6))
        assert status == 200 and orjson.loads(body)["model"] == MODEL
        await wait_for(lambda: len(s.shadow_rows()) == 1)
        [row] = s.rows()
        assert row.arm == "old" and row.shadowed and row.shadow is None  # the mirror writes its own row
        [mirror] = s.shadow_rows()
        assert (mirror.request_id, mirror.arm, mirror.outcome) == (row.request_id, "old", "ok")
        sh = mirror.shadow
        assert (sh.upstream, sh.status, sh.error, sh.completion_tokens) == ("new", 200, None, 3)
        assert sh.ttft_ms is not None and sh.finish_reason == "length"
        mirrored = s.new.stats.bodies[-1]
        assert mirrored["stream"] is True and mirrored["max_tokens"] == 3


async def test_saturated_shadow_is_dropped_and_does_not_delay_the_primary(tmp_path):
    shadow = {"percent": 100, "max_concurrency": 1, "timeout_ms": 3000}
    async with stack(tmp_path, weight=0, shadow=shadow) as s:
        s.new.script(sequence=["hang:2"])
        await s.post(chat())
        assert s.gw.shadow is not None and s.gw.shadow.in_flight == 1  # answered while its mirror still hangs
        status, _, _ = await s.post(chat())  # the first mirror still hangs: this one is dropped
        assert status == 200
        assert len(s.rows()) == 2  # both answers are in the ledger while the first mirror still hangs
        await wait_for(lambda: len(s.shadow_rows()) == 2, timeout=5)
        mirrors = sorted(s.shadow_rows(), key=lambda r: r.ts)
        assert [m.shadow.dropped for m in mirrors] == [True, False]  # the dropped one is written at once
        async with s.http.get(s.url + "/metrics") as r:
            assert 'switchover_gateway_shadow_total{result="dropped"} 1.0' in await r.text()


async def test_a_stalled_stream_is_cut_at_the_idle_timeout_with_an_error_event(tmp_path):
    async with stack(tmp_path, weight=100) as s:  # idle_ms = 1000
        status, body, _ = await s.post(chat(stream=True, max_tokens=3), headers={"X-Fault": "drip:1500"})
        assert status == 200 and b"upstream_error" in body and events(body)[-1] == b"[DONE]"
        [row] = s.rows()
        assert (row.outcome, row.error) == ("failed_mid_stream", "idle_timeout")


async def test_usage_is_asked_for_upstream_but_only_passed_on_when_the_client_asked(tmp_path):
    async with stack(tmp_path, weight=100) as s:
        _, body, _ = await s.post(chat(stream=True))
        assert b'"usage"' not in body and s.new.stats.bodies[-1]["stream_options"] == {"include_usage": True}
        _, body, _ = await s.post(chat(stream=True, stream_options={"include_usage": True}))
        assert orjson.loads(events(body)[-2])["usage"]["completion_tokens"] == 4
        assert [r.tokens_source for r in s.rows()] == ["usage", "usage"]
        _, body, _ = await s.post(chat(stream=False))
        assert "stream_options" not in s.new.stats.bodies[-1]  # non-streamed requests go through untouched


async def test_without_server_usage_tokens_are_counted_from_chunks_and_tpot_is_not_measured(tmp_path):
    async with stack(tmp_path, weight=100) as s:
        s.new.script(sequence=["no_usage"])
        status, _, _ = await s.post(chat(stream=True, max_tokens=4))
        assert status == 200
        [row] = s.rows()
        assert (row.completion_tokens, row.tokens_source) == (4, "chunks")
        assert row.ttft_ms is not None and row.tpot_ms is None  # TPOT needs the server's N, not a chunk count


async def test_client_leaving_before_the_first_byte_cancels_the_upstream_too(tmp_path):
    async with stack(tmp_path, weight=0) as s:  # old: no fallback timer in the way
        async with aiohttp.ClientSession() as http:
            with contextlib.suppress(TimeoutError):
                await http.post(
                    s.url + "/v1/chat/completions",
                    data=orjson.dumps(chat()),
                    headers={"X-Fault": "hang:30"},
                    timeout=aiohttp.ClientTimeout(total=0.3),
                )
        await wait_for(lambda: s.old.stats.cancelled == 1)
        await wait_for(lambda: len(s.rows()) == 1)
        assert s.rows()[0].outcome == "client_disconnected"


async def test_the_gateways_own_endpoints_are_routed_by_path_and_method(tmp_path):
    async with stack(tmp_path) as s:
        async with s.http.get(s.url + "/health") as r:
            assert r.status == 200 and await r.json() == {"alive": True}
        async with s.http.head(s.url + "/ready") as r:
            assert r.status == 200
        async with s.http.post(s.url + "/health") as r:
            assert r.status == 405
        async with s.http.get(s.url + "/metrics") as r:
            assert r.status == 200 and "switchover_gateway_requests_total" in await r.text()


async def test_a_second_gateway_on_the_same_run_dir_stops_before_touching_its_files(tmp_path):
    from switchover.config import load_migration
    from switchover.errors import BadInput
    from switchover.gateway.app import Gateway
    from switchover.gateway.server import running

    async with stack(tmp_path) as s:
        token = (s.gw.run_dir / "admin.token").read_bytes()
        second = Gateway(load_migration(s.config_path), s.config_path)
        with pytest.raises(BadInput) as err:
            async with running(second, port=0):
                pass
        assert "in use by another gateway" in err.value.message and str(os.getpid()) in err.value.message
        assert (s.gw.run_dir / "admin.token").read_bytes() == token
        async with s.http.get(s.url + "/admin/state", headers={"X-Switchover-Admin": token.decode()}) as r:
            assert r.status == 200  # the first gateway's token still works


async def test_rows_carry_the_task_type_json_validity_and_cached_tokens(tmp_path):
    rules = [{"type": "sql", "header": "x-app", "equals": "sqlbot"}, {"type": "completion", "path": "/v1/completions"}]
    async with stack(tmp_path, weight=0, task_types={"rules": rules}) as s:
        asks_json = {"response_format": {"type": "json_object"}}
        await s.post(chat(stream=True, **asks_json), headers={"X-Fault": "json", "X-App": "sqlbot"})
        await s.post(chat(**asks_json), headers={"X-Fault": "json"})
        await s.post(chat(stream=True, **asks_json))  # " t0 t1 t2 t3" is not JSON
        await s.post({"model": MODEL, "prompt": "hi", "max_tokens": 2}, path="/v1/completions")
        await s.post(chat(), headers={"X-Task-Type": "summarize"})  # no rule matched: the header names it
        rows = s.rows()
        assert [r.task_type for r in rows] == ["sql", "other", "other", "completion", "summarize"]
        assert [r.json_valid for r in rows] == [True, True, False, None, None]  # only asked-for JSON is judged
        assert [r.cached_tokens for r in rows] == [2, 2, None, None, None]
    (tmp_path / "h").mkdir()
    async with stack(tmp_path / "h", weight=0) as s:  # a header value that is not a plain name is 'other'
        await s.post(chat(), headers={"X-Task-Type": "summarize"})
        await s.post(chat(), headers={"X-Task-Type": "<b>"})
        assert [r.task_type for r in s.rows()] == ["summarize", "other"]


async def test_the_rollouts_parse_failure_and_cache_gates_read_what_the_gateway_writes(tmp_path):
    """End to end: rows the gateway wrote carry json_valid / cached_tokens, and the custom gates measure them."""
    from switchover.config.rollout import GateThresholds
    from switchover.config.rollout_custom import CustomGate
    from switchover.rollout.custom_gates import judge_ledger_gate
    from switchover.rollout.rows import row_view

    async with stack(tmp_path, weight=100) as s:
        asks_json = {"response_format": {"type": "json_object"}}
        for i in range(24):  # every fourth answer is not JSON
            await s.post(
                chat(stream=i % 2 == 0, **asks_json), tenant=f"t{i}", headers={} if i % 4 == 0 else {"X-Fault": "json"}
            )
        views = [row_view(r) for r in s.rows()]
    th = GateThresholds(min_samples=10)
    parse = judge_ledger_gate(CustomGate(name="json_ok", builtin="parse_failure_rate"), views, th)
    assert parse.verdict == "fail" and "6/24" in parse.reason, parse.reason
    cache = judge_ledger_gate(
        CustomGate(name="cold", builtin="cache_hits_after_switch", first_n=10), views, th, views_since_switch=views
    )
    assert cache.verdict == "fail" and "cache" in cache.reason, cache.reason  # the fake reports 2 of 3 cached


async def test_a_whole_answer_over_the_bound_is_not_held_in_memory(tmp_path, monkeypatch):
    from switchover.gateway import upstream

    monkeypatch.setattr(upstream, "MAX_BODY", 64)  # the fake's chat completion is a few hundred bytes
    async with stack(tmp_path, weight=100) as s:
        status, body, _ = await s.post(chat())
        assert status == 502 and b"too_large" in body  # new: too large, so old; old too large: a 502
        [row] = s.rows()
        assert (row.fallback_reason, row.arm, row.outcome) == ("too_large", "old", "error")
        status, body, _ = await s.post(chat(stream=True))  # a stream is relayed as it comes, never held whole
        assert status == 200 and body.endswith(b"data: [DONE]\n\n")
