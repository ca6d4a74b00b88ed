"""Attacks on the request target, on raw sockets: only origin-form paths inside `allowed_paths` are forwarded,
after one normalisation; no target form, Host header, encoding trick or upstream redirect makes the gateway
connect anywhere but the configured old and new."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from switchover.testing import await_holds
from tests.gateway.conftest import (
    CHAT_BODY,
    Recorders,
    chat,
    exchange,
    http_request,
    path_allowed,
    recorded_stack,
    running_trap,
    tenant_in,
)


def raw_request(method: str, target: str, body: bytes | None = CHAT_BODY, host: str = "127.0.0.1") -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Connection: close"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


async def nothing_forwarded(rec: Recorders) -> None:
    await await_holds(lambda: rec.connections == 0, 0.1, "nothing forwarded upstream")


NON_ORIGIN = {  # {port} is an upstream's port: each form names a host the client should not be able to choose
    "absolute_http": ("POST", "http://127.0.0.1:{port}/v1/chat/completions"),
    "absolute_https": ("POST", "https://127.0.0.1:{port}/v1/chat/completions"),
    "absolute_models": ("GET", "http://localhost:{port}/v1/models"),
    "scheme_relative": ("POST", "//127.0.0.1:{port}/v1/chat/completions"),
    "asterisk": ("OPTIONS", "*"),
    "authority_connect": ("CONNECT", "127.0.0.1:{port}"),
    "authority_post": ("POST", "127.0.0.1:{port}"),
    "at_host": ("POST", "@127.0.0.1:{port}/v1/chat/completions"),
    "colon_port": ("GET", ":{port}/x"),
    "no_leading_slash": ("POST", "v1/chat/completions"),
}


@pytest.mark.parametrize("case", list(NON_ORIGIN))
async def test_request_targets_that_are_not_origin_form_get_400_and_reach_no_upstream(tmp_path, case):
    method, target = NON_ORIGIN[case]
    async with recorded_stack(tmp_path, weight=50) as (s, rec):
        port = s.config["old"]["url"].rsplit(":", 1)[1]
        ex = await exchange(
            s.port,
            raw_request(
                method, target.format(port=port), None if method in ("GET", "OPTIONS", "CONNECT") else CHAT_BODY
            ),
        )
        r = ex.reply
        allowed = (400, 405) if method == "CONNECT" else (400,)  # CONNECT: the method itself is not served
        assert r.status in allowed and r.error_message(), ex.data[:300]
        await nothing_forwarded(rec)


AMBIGUOUS_PATHS = [
    "/v1/../admin",
    "/v1/./models",
    "/v1/%2e%2e/admin",
    "/v1/%2E%2E/admin",
    "/v1/%2E/models",
    "/v1/chat/completions/..",
    "/v1/chat/completions/.",
    "/v1/chat%2Fcompletions",
    "/v1/chat%2fcompletions",
    "/v1%5Cchat/completions",
    "/v1/chat\\completions",
    "/v1/chat/completions%00",
    "/v1/chat/completions%zz",
    "/v1/chat/completions%2",
    "/v1/chat/completions#frag",
    "/v1/chat/%2e%2e/%2e%2e/admin",
]


@pytest.mark.parametrize("path", AMBIGUOUS_PATHS)
async def test_dot_segments_encoded_separators_and_bad_escapes_get_400_and_reach_no_upstream(tmp_path, path):
    async with recorded_stack(tmp_path, weight=50) as (s, rec):
        ex = await exchange(s.port, raw_request("POST", path))
        r = ex.reply
        assert r.status == 400 and r.error_message(), ex.data[:300]
        await nothing_forwarded(rec)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/admin"),
        ("GET", "/admin"),
        ("POST", "/v1/chat/completionsX"),
        ("POST", "/v2/x"),
        ("GET", "/"),
        ("GET", "/v1"),
        ("POST", "/v1/chat"),
        ("GET", "/v1/modelsX"),
        ("GET", "/server-status"),
        ("POST", "/v1/fine_tuning/jobs"),
        ("GET", "/metrics/x"),
        ("GET", "/%61dmin"),
    ],
)
async def test_paths_outside_allowed_paths_get_404_and_reach_no_upstream(tmp_path, method, path):
    async with recorded_stack(tmp_path, weight=50) as (s, rec):
        ex = await exchange(s.port, raw_request(method, path, CHAT_BODY if method == "POST" else None))
        r = ex.reply
        assert r.status == 404 and r.error_message(), ex.data[:300]
        await nothing_forwarded(rec)


async def test_a_configured_allowed_paths_list_replaces_the_default(tmp_path):
    async with recorded_stack(tmp_path, weight=0, allowed_paths=["/v1/models"]) as (s, rec):
        chat_ex = await exchange(s.port, raw_request("POST", "/v1/chat/completions"))
        models_ex = await exchange(s.port, raw_request("GET", "/v1/models", None))
        assert chat_ex.reply.status == 404 and models_ex.reply.status == 200
        assert [q.target for q in rec.requests] == ["/v1/models"]


@pytest.mark.parametrize(
    ("method", "target", "upstream"),
    [
        ("POST", "/v1/%63hat/completions", "/v1/chat/completions"),
        ("POST", "/v1/%63%68%61%74/%63ompletions", "/v1/chat/completions"),
        ("GET", "/v1/%6Dodels", "/v1/models"),
        ("GET", "/v1/%6dodels?x=%41&y=%2F&z=..", "/v1/models?x=%41&y=%2F&z=.."),
        ("GET", "/v1/models?a=1&b=%2F&c=x%20y&d=..&e=/x", "/v1/models?a=1&b=%2F&c=x%20y&d=..&e=/x"),
        ("POST", "/v1/chat/completions?api-version=2024-01-01", "/v1/chat/completions?api-version=2024-01-01"),
    ],
)
async def test_encoded_unreserved_characters_are_decoded_and_the_query_reaches_the_upstream_unchanged(
    tmp_path, method, target, upstream
):
    async with recorded_stack(tmp_path, weight=0) as (s, rec):
        ex = await exchange(s.port, raw_request(method, target, CHAT_BODY if method == "POST" else None))
        assert ex.reply.status == 200, ex.data[:300]
        assert [q.target for q in rec.requests] == [upstream]
        netloc = s.config["old"]["url"].split("//", 1)[1]
        assert rec.requests[0].header("host") == netloc  # the gateway names the upstream, not the client


def _spy_connections(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    """Every (host, port) this event loop opens a connection to (the gateway's arms and shadow use the loop)."""
    loop = asyncio.get_running_loop()
    seen: list[tuple[Any, Any]] = []
    orig = loop.create_connection

    async def create_connection(protocol_factory: Any, host: Any = None, port: Any = None, *a: Any, **kw: Any) -> Any:
        sock = kw.get("sock")
        seen.append(sock.getpeername()[:2] if host is None and sock is not None else (host, port))
        return await orig(protocol_factory, host, port, *a, **kw)

    monkeypatch.setattr(loop, "create_connection", create_connection)
    return seen


TRAP_TARGETS = {  # {trap} is a listener that must never see a connection
    "origin_with_trap_host_header": ("POST", "/v1/chat/completions", "127.0.0.1:{trap}"),
    "absolute": ("POST", "http://127.0.0.1:{trap}/v1/chat/completions", None),
    "absolute_https": ("POST", "https://127.0.0.1:{trap}/v1/chat/completions", None),
    "absolute_localhost": ("GET", "http://localhost:{trap}/v1/models", None),
    "absolute_userinfo": ("POST", "http://127.0.0.1:{gw}@127.0.0.1:{trap}/v1/chat/completions", None),
    "authority_connect": ("CONNECT", "127.0.0.1:{trap}", "127.0.0.1:{trap}"),
    "asterisk": ("OPTIONS", "*", "127.0.0.1:{trap}"),
    "at_host_port": ("POST", "@127.0.0.1:{trap}/v1/chat/completions", None),
    "at_host_port_models": ("GET", "@127.0.0.1:{trap}/v1/models", None),
    "encoded_at_host_port": ("POST", "%40127.0.0.1:{trap}/v1/chat/completions", None),
    "colon_port": ("POST", ":{trap}/v1/chat/completions", None),
    "scheme_relative": ("POST", "//127.0.0.1:{trap}/v1/chat/completions", None),
    "userinfo_looking_path": ("POST", "/v1/chat/completions@127.0.0.1:{trap}", None),
    "userinfo_looking_segment": ("POST", "/@127.0.0.1:{trap}/v1/chat/completions", None),
    "backslashes": ("POST", "\\\\127.0.0.1:{trap}/v1/chat/completions", None),
    "backslash_at": ("POST", "/v1/chat/completions\\@127.0.0.1:{trap}", None),
    "encoded_slashes": ("POST", "/%2F127.0.0.1:{trap}/v1/chat/completions", None),
    "encoded_scheme": ("POST", "http%3A%2F%2F127.0.0.1:{trap}/v1/chat/completions", None),
    "dot_segments": ("POST", "/v1/../../127.0.0.1:{trap}/v1/chat/completions", None),
    "encoded_dot_segments": ("POST", "/v1/%2e%2e/%2e%2e/@127.0.0.1:{trap}/v1/chat/completions", None),
}


@pytest.mark.parametrize("case", list(TRAP_TARGETS))
async def test_no_target_form_or_host_header_reaches_another_host_or_a_path_outside_allowed_paths(
    tmp_path, monkeypatch, case
):
    method, target, host = TRAP_TARGETS[case]
    async with running_trap() as trap, recorded_stack(tmp_path, weight=50, shadow={"percent": 100}) as (s, rec):
        seen = _spy_connections(monkeypatch)
        ports = {s.port, *(int(s.config[arm]["url"].rsplit(":", 1)[1]) for arm in ("old", "new"))}
        fill = {"trap": trap.port, "gw": s.port}
        body = None if method in ("GET", "OPTIONS", "CONNECT") else CHAT_BODY
        seed = s.gw.tenant_seed
        for tenant in (tenant_in(50, "old", seed=seed), tenant_in(50, "new", seed=seed)):  # each arm, with a mirror
            raw = raw_request(method, target.format(**fill), body, host=(host or "127.0.0.1").format(**fill))
            raw = raw.replace(b"Connection: close", b"Connection: close\r\nX-Tenant-Id: " + tenant.encode())
            ex = await exchange(s.port, raw)
            assert ex.replies, f"no answer: {ex.data[:200]!r}"
        await await_holds(lambda: trap.connections == 0, 0.3, "no connection to the trap (a mirror would be quick)")
        assert {p for _, p in seen} <= ports, f"connections to {seen}, configured {ports}"
        forwarded = [r.target for r in rec.requests]
        assert all(path_allowed(t.partition("?")[0]) for t in forwarded), f"forwarded {forwarded}"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_redirect_from_an_upstream_is_not_followed_by_the_arms_or_the_shadow(tmp_path, monkeypatch, stream):
    async with running_trap() as trap, recorded_stack(tmp_path, weight=50, shadow={"percent": 100}) as (s, rec):
        seen = _spy_connections(monkeypatch)
        for up in (rec.old, rec.new):
            up.redirect_to = f"http://127.0.0.1:{trap.port}/v1/chat/completions"
        body = orjson.dumps(chat(stream=stream))
        seed = s.gw.tenant_seed
        for tenant in (tenant_in(50, "old", seed=seed), tenant_in(50, "new", seed=seed)):
            ex = await exchange(s.port, http_request(body=body, headers=[("X-Tenant-Id", tenant)]))
            assert ex.replies, ex.data[:200]
        await rec.new.wait_requests(2, timeout=3)  # the mirror of the old-arm request has been answered
        await await_holds(lambda: trap.connections == 0, 0.3, "no redirect followed to the trap")
        ports = {s.port, *(int(s.config[arm]["url"].rsplit(":", 1)[1]) for arm in ("old", "new"))}
        assert {p for _, p in seen} <= ports, f"connections to {seen}, configured {ports}"


SPOOFED_FORWARDING = [
    ("X-Forwarded-For", "203.0.113.9"),
    ("X-Forwarded-Host", "evil.example"),
    ("X-Forwarded-Proto", "https"),
    ("Forwarded", "for=203.0.113.9;host=evil.example"),
    ("X-Real-IP", "203.0.113.9"),
]


async def test_client_sent_forwarding_headers_are_replaced_by_the_real_peer_and_never_reach_the_shadow(tmp_path):
    async with recorded_stack(tmp_path, weight=0, shadow={"percent": 100}) as (s, rec):
        ex = await exchange(
            s.port,
            http_request(body=CHAT_BODY, headers=[("X-Tenant-Id", "t1"), *SPOOFED_FORWARDING]),
            source="127.0.0.2",
        )
        assert ex.reply.status == 200, ex.data[:300]
        assert await rec.new.wait_requests(1), "no mirror reached new"
        primary, mirror = rec.old.requests[0], rec.new.requests[0]
        spoofed = {k.lower() for k, _ in SPOOFED_FORWARDING}
        assert primary.header("x-forwarded-for") == "127.0.0.2", primary.headers  # the real peer, nothing else
        assert not (spoofed - {"x-forwarded-for"}) & primary.names(), primary.headers
        assert not spoofed & mirror.names(), mirror.headers  # a copy says nothing about the client
        assert b"203.0.113.9" not in bytes(rec.old.raw) + bytes(rec.new.raw)
