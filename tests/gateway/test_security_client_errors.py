"""A client's malformed request is the client's error: the gateway answers 400 itself, writes a `bad_request` row,
and no amount of them counts against the new arm (the kill switch cannot be tripped by a client)."""

from __future__ import annotations

import logging

import orjson
import pytest

from switchover.testing import await_until
from tests.gateway.conftest import chat, exchange, http_request, metric_total, request_rows, stack

MALFORMED = {
    "not_json": b"this is not json",
    "truncated_json": b'{"model": "client-model", "messages": [',
    "json_array": b'[{"model": "client-model"}]',
    "json_string": b'"hello"',
    "stream_options_string": orjson.dumps(chat(stream=True, stream_options="x")),
    "stream_yes": orjson.dumps({**chat(), "stream": "yes"}),
    "model_number": orjson.dumps({**chat(), "model": 5}),
}


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_a_malformed_chat_body_is_a_400_with_a_bad_request_row(tmp_path, case):
    async with stack(tmp_path, weight=100) as s:
        ex = await exchange(s.port, http_request(body=MALFORMED[case], headers=[("X-Tenant-Id", "t1")]))
        r = ex.reply
        assert r.status == 400 and r.error_message(), ex.data[:300]
        rows = await await_until(lambda: request_rows(s), 5, "the request's ledger row")
        assert [row["outcome"] for row in rows] == ["bad_request"], rows
        assert rows[0]["status"] == 400


async def test_forty_malformed_requests_do_not_trip_the_kill_switch_or_count_as_new_arm_failures(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    bodies = list(MALFORMED.values())
    async with stack(tmp_path, weight=100, kill_switch={"min_samples": 3, "max_fallback_ratio": 0.2}) as s:
        statuses = []
        for i in range(40):
            ex = await exchange(s.port, http_request(body=bodies[i % len(bodies)], headers=[("X-Tenant-Id", f"t{i}")]))
            statuses.append(ex.reply.status)
        metrics = (await exchange(s.port, http_request("GET", "/metrics"))).reply.body.decode()
        assert not s.gw.killswitch.latched, "malformed client requests latched the kill switch"
        assert metric_total(metrics, "switchover_gateway_new_arm_failures_total") == 0
        assert metric_total(metrics, "switchover_gateway_kill_switch_trips_total") == 0
        assert statuses == [400] * 40, statuses
        ok = await exchange(s.port, http_request(body=orjson.dumps(chat()), headers=[("X-Tenant-Id", "t1")]))
        assert ok.reply.status == 200  # and the new arm still serves
    mine = [r for r in caplog.records if r.name.startswith("switchover")]
    assert not [r for r in mine if r.exc_info], "a malformed request logged a traceback"
    errors = [r.getMessage() for r in mine if r.levelno >= logging.ERROR]
    assert not errors, errors
