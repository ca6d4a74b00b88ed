"""Envoy access-log lines -> ledger rows of the built-in gateway's schema (LedgerRecord), and what the kill switch
counts from them."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from switchover.gateway.envoy.accesslog import Arms, counts_against_new, log_fields, request_row
from switchover.gateway.policy import tenant_hash
from switchover.ledger_record import LedgerRecord, RequestRow

ARMS = Arms({"127.0.0.1:1": "old", "127.0.0.1:2": "new"})


def _row(raw: bytes) -> RequestRow:
    row = request_row(raw, ARMS)
    assert row is not None
    return row


def line(**over: Any) -> bytes:
    base = {
        "ts": "1796450000.125",
        "request_id": "req-1",
        "path": "/v1/completions?x=1",
        "route": "weight",
        "cluster": "old",
        "host": "127.0.0.1:1",
        "status": 200,
        "flags": "-",
        "details": "via_upstream",
        "attempts": 1,
        "bytes_sent": 10,
        "duration_ms": 12,
        "request_ms": 2,
        "first_byte_ms": 8,
        "content_type": "application/json",
        "tenant": "team-a",
    }
    return orjson.dumps({**base, **over})


@pytest.mark.parametrize(
    ("over", "want"),
    [
        ({}, ("old", "old", "ok", "weight", None)),
        ({"cluster": "new_then_old", "host": "127.0.0.1:2"}, ("new", "new", "ok", "weight", None)),
        ({"cluster": "new_then_old", "attempts": 2}, ("new", "old", "fallback_ok", "weight", "retried")),
        ({"cluster": "new_then_old", "attempts": 2, "flags": "UF"}, ("new", "old", "fallback_ok", "weight", "connect")),
        ({"route": "kill_switch"}, ("old", "old", "ok", "kill_switch", None)),
        ({"route": "rollback"}, ("old", "old", "ok", "rollback", None)),
        ({"route": "bypass"}, ("old", "old", "ok", "bypass", None)),
        (
            {"status": 503, "flags": "UF,URX", "cluster": "new_then_old", "host": "127.0.0.1:2"},
            ("new", "new", "error", "weight", None),
        ),
        ({"route": "not_allowed", "status": 404, "cluster": "-", "host": "-"}, (None, None, "bad_request", None, None)),
        ({"route": "weight", "status": 413, "host": "-"}, ("old", None, "bad_request", "weight", None)),
        ({"flags": "DC", "status": 0}, ("old", "old", "client_disconnected", "weight", None)),
        ({"flags": "UPE", "content_type": "text/event-stream"}, ("old", "old", "failed_mid_stream", "weight", None)),
    ],
)
def test_a_line_becomes_the_row_the_builtin_gateway_would_write(over: dict, want: tuple) -> None:
    row = request_row(line(**over), ARMS)
    assert row is not None
    assert (row.routed, row.arm, row.outcome, row.route_reason, row.fallback_reason) == want
    LedgerRecord.model_validate(row.as_dict())  # the same schema: every reader reads it


def test_the_tenant_is_hashed_with_the_deployment_seed_and_never_stored_raw() -> None:
    row = request_row(line(), ARMS, b"seed")
    assert row is not None and row.tenant == tenant_hash("team-a", b"seed")
    assert b"team-a" not in row.to_json()
    assert _row(line(tenant="-")).tenant == tenant_hash(None)  # no header: anonymous


def test_times_path_and_stream_come_from_envoys_fields_and_what_envoy_cannot_see_is_null() -> None:
    row = _row(line(content_type="text/event-stream; charset=utf-8"))
    assert row.ts == 1796450000.125 and row.path == "/v1/completions"
    assert row.e2e_ms == 10.0  # DURATION less REQUEST_DURATION: from the whole request read to the end
    assert row.stream is True
    assert all(
        getattr(row, k) is None
        for k in (
            "ttft_ms",
            "tpot_ms",
            "completion_tokens",
            "prompt_tokens",
            "model",
            "finish_reason",
            "bucket",
            "shadowed",
        )
    )


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[]", b'{"route": "control", "status": 200, "ts": "1"}', orjson.dumps({"status": "-", "ts": "1"})],
)
def test_lines_that_are_not_request_lines_give_no_row(raw: bytes) -> None:
    assert request_row(raw, ARMS) is None


@pytest.mark.parametrize(
    ("over", "want"),
    [
        ({}, None),  # old-routed: says nothing about new
        ({"cluster": "new_then_old", "host": "127.0.0.1:2"}, False),
        ({"cluster": "new_then_old", "attempts": 2}, True),  # fell back
        ({"cluster": "new_then_old", "host": "127.0.0.1:2", "status": 502}, True),
        ({"cluster": "new_then_old", "host": "127.0.0.1:2", "status": 400}, False),  # the client's fault
        ({"cluster": "new_then_old", "host": "127.0.0.1:2", "flags": "DC"}, None),
    ],
)
def test_the_kill_switch_counts_new_arm_rows_as_the_builtin_gateway_does(over: dict, want: bool | None) -> None:
    assert counts_against_new(_row(line(**over))) is want


def test_the_log_format_names_the_tenant_header() -> None:
    assert log_fields("x-team")["tenant"] == "%REQ(X-TEAM)%"
    assert {"%RESPONSE_CODE%", "%BYTES_SENT%", "%DURATION%", "%RESPONSE_DURATION%", "%UPSTREAM_CLUSTER%"} <= set(
        log_fields("x-team").values()
    )


def test_without_the_request_duration_e2e_is_not_measured_rather_than_the_whole_duration() -> None:
    row = request_row(line(request_ms="-"), ARMS)
    assert row is not None and row.e2e_ms is None
    assert _row(line()).e2e_ms == 10


def test_the_lua_filters_figures_fill_the_row_and_tokens_count_only_from_usage() -> None:
    row = request_row(
        line(
            content_type="text/event-stream",
            duration_ms=112,
            request_ms=2,
            tenant_hash="00000000000004d2",
            bucket=1234,
            usage=True,
            completion_tokens=11,
            prompt_tokens=3,
            finish_reason="stop",
            ttft_ms=10.5,
        ),
        ARMS,
    )
    assert row is not None
    assert (row.tenant, row.bucket) == ("00000000000004d2", 1234)
    assert (row.completion_tokens, row.tokens_source, row.prompt_tokens) == (11, "usage", 3)
    assert (row.finish_reason, row.ttft_ms, row.tpot_ms) == ("stop", 10.5, (110 - 10.5) / 10)
    LedgerRecord.model_validate(row.as_dict())


@pytest.mark.parametrize(
    "over",
    [
        {"usage": None, "completion_tokens": 11},  # a count not from usage is not the server's count
        {"usage": True, "completion_tokens": "-"},
        {"usage": True, "completion_tokens": -3},
        {"usage": True, "completion_tokens": 2.5},
        {"usage": True, "completion_tokens": 11, "status": 502},  # an error answer's body is not read into the row
    ],
)
def test_token_figures_that_are_not_a_servers_usage_count_stay_null(over: dict[str, Any]) -> None:
    row = request_row(line(**over), ARMS)
    assert row is not None and row.completion_tokens is None and row.tokens_source is None


def test_a_line_without_the_filters_hash_hashes_the_raw_header_and_has_no_bucket() -> None:
    row = request_row(line(tenant_hash="not-a-hash", bucket=12), ARMS, b"k" * 32)
    assert row is not None
    assert (row.tenant, row.bucket) == (tenant_hash("team-a", b"k" * 32), None)
