"""The raw-socket attack suite against the Envoy data plane (Envoy 1.40 before two recording upstreams, loopback,
bounded). The framing attacks of test_security_framing.py are replayed as they are; the properties that must hold
on either plane are asserted for each: the client gets at most one answer and it is a refusal (or the connection
is closed unanswered), no smuggled second request is answered or forwarded, no header is injected upstream, and
nothing past the path allow-list or the size limits reaches an engine. Envoy answers with its own bodies and may
keep a connection open where the built-in gateway says `Connection: close`; those differences are its own, not
asserted here (docs/gateway.md, Data planes)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from switchover.config import load_migration
from switchover.gateway.envoy.plane import EnvoyPlane
from switchover.testbed.processes import free_port
from switchover.testing import await_holds
from tests.export.test_envoy import _envoy
from tests.gateway.conftest import CHAT_BODY, Recorders, RecordingUpstream, exchange, http_request, running_recorder
from tests.gateway.test_security_framing import FRAMING_400, SMUGGLED, req

# Framing Envoy repairs rather than refuses: it forwards ONE well-formed request (never the smuggled one). Seen with
# Envoy 1.40.0 (tests fail when that changes, so the list stays true).
# The built-in gateway refuses all of these with 400 (test_security_framing.py).
ENVOY_NORMALISES = {
    "bare_cr_in_header_value",
    "x_request_id_cr_injects_set_cookie",
    "x_request_id_lf_injects_set_cookie",
    "obs_fold_space",
    "obs_fold_tab",
    "request_line_tab",
    "upgrade_h2c",
    "connection_upgrade_alone",
}


@dataclass
class EnvoyStack:
    plane: EnvoyPlane
    port: int
    rec: Recorders


@contextlib.asynccontextmanager
async def envoy_stack(tmp_path: Path, **gateway: object) -> AsyncIterator[EnvoyStack]:
    binary = _envoy()
    rec = Recorders(RecordingUpstream("old"), RecordingUpstream("new"))
    async with running_recorder(rec.old) as ourl, running_recorder(rec.new) as nurl:
        port = free_port()
        gw = {
            "data_plane": "envoy",
            "weight": 50,
            "run_dir": str(tmp_path / "run"),
            "listen": {"port": port},
            "envoy": {"binary": binary, "admin_port": free_port(), "concurrency": 1},
            "kill_switch": {"min_samples": 1000},
            **gateway,
        }
        path = tmp_path / "switchover.yaml"
        path.write_text(
            yaml.safe_dump(
                {"old": {"url": ourl, "engine": "vllm"}, "new": {"url": nurl, "engine": "llamacpp"}, "gateway": gw}
            )
        )
        plane = EnvoyPlane(load_migration(path), path)
        try:
            await plane.start()
            yield EnvoyStack(plane, port, rec)
        finally:
            await plane.stop()


@pytest.fixture
async def es(tmp_path: Path) -> AsyncIterator[EnvoyStack]:
    async with envoy_stack(tmp_path) as s:
        yield s


async def test_every_framing_attack_is_refused_or_repaired_and_never_smuggled(es: EnvoyStack) -> None:
    outcomes: dict[str, str] = {}
    for case, data in FRAMING_400.items():
        before = len(es.rec.requests)
        ex = await exchange(es.port, data, timeout=3)
        replies = ex.replies
        assert len(replies) <= 1, f"{case}: {len(replies)} answers: a smuggled request was answered"
        forwarded = es.rec.requests[before:]
        # a bare LF ends a header line for Envoy (RFC 9112 lets a recipient accept it), so "X-Request-Id: abc\n
        # Set-Cookie: x=1" is two request headers of the client's own, forwarded as such; what must not happen is a
        # header that reaches the client or an engine with a CR or LF inside it
        assert all(r.target != "/admin" for r in forwarded), case
        assert all("\r" not in v and "\n" not in v for r in forwarded for _, v in r.headers), case
        assert all("set-cookie" not in {k for k, _ in reply.headers} for reply in replies), case
        assert len(forwarded) <= 1, f"{case}: {len(forwarded)} requests reached the engines"
        if forwarded:
            outcomes[case] = "forwarded one"
        else:
            assert not replies or replies[0].status >= 400, f"{case}: {replies[0].status} without forwarding"
            outcomes[case] = f"refused {replies[0].status}" if replies else "closed"
    repaired = {c for c, o in outcomes.items() if o == "forwarded one"}
    print(outcomes)
    assert repaired == ENVOY_NORMALISES, f"Envoy forwarded a repaired request for {sorted(repaired)}"


async def test_a_smuggled_request_after_a_chunked_body_is_never_answered(es: EnvoyStack) -> None:
    te = b"Transfer-Encoding: chunked"
    ex = await exchange(es.port, req(te, body=b"0\r\n\r\n" + SMUGGLED, length=True), timeout=3)
    assert len(ex.replies) <= 1
    assert all(r.target != "/admin" for r in es.rec.requests)


@pytest.mark.parametrize(
    "path", ["/admin", "/v1/../admin", "/v1/modelsX", "/%2e%2e/etc/passwd", "/v1%2fmodels", "/metrics"]
)
async def test_paths_outside_the_allow_list_never_reach_an_engine(es: EnvoyStack, path: str) -> None:
    ex = await exchange(es.port, http_request("GET", path), timeout=3)
    assert ex.replies and ex.reply.status in (400, 404), ex.data[:200]
    await await_holds(lambda: es.rec.connections == 0, 0.1, "nothing forwarded upstream")


async def test_a_head_over_max_head_bytes_is_431_and_a_body_over_max_body_bytes_is_413(tmp_path: Path) -> None:
    async with envoy_stack(tmp_path, limits={"max_body_bytes": 1 << 20, "max_head_bytes": 8192}) as s:
        big_head = req(b"X-Pad: " + b"a" * 20_000)
        ex = await exchange(s.port, big_head, timeout=3)
        assert ex.replies and ex.reply.status == 431, ex.data[:200]
        body = b'{"messages": "' + b"x" * (2 << 20) + b'"}'
        ex = await exchange(s.port, req(body=body), timeout=5)
        assert ex.replies and ex.reply.status == 413, ex.data[:200]
        assert not s.rec.requests


async def test_a_slow_loris_head_is_cut_off_by_the_header_timeout(tmp_path: Path) -> None:
    async with envoy_stack(tmp_path, limits={"header_timeout_s": 1.0}) as s:
        parts = [b"POST /v1/chat/completions HTTP/1.1\r\n"] + [b"X-Drip: 1\r\n"] * 6
        ex = await exchange(s.port, parts, gap_s=0.4, timeout=4)
        assert ex.closed and ex.elapsed_s < 3.5
        assert not s.rec.requests


async def test_a_well_formed_request_still_goes_through(es: EnvoyStack) -> None:
    ex = await exchange(es.port, req(b"Connection: close", body=CHAT_BODY), timeout=5)
    assert ex.replies and ex.reply.status == 200, ex.data[:300]
    assert len(es.rec.requests) == 1


async def test_a_forged_peer_header_cannot_open_the_admin_endpoints(es: EnvoyStack) -> None:
    token = (es.plane.run_dir / "admin.token").read_text().strip()
    headers = [("x-switchover-admin", token), ("x-switchover-peer", "127.0.0.1")]
    # from 127.0.0.2 (not the loopback address the admin endpoints take): Envoy overwrites the forged header
    ex = await exchange(es.port, http_request("GET", "/admin/state", headers=headers), timeout=3, source="127.0.0.2")
    assert ex.replies and ex.reply.status == 403, ex.data[:200]
    ex = await exchange(es.port, http_request("GET", "/admin/state", headers=headers), timeout=3)
    assert ex.replies and ex.reply.status == 200  # the same request from 127.0.0.1 with the token
    ex = await exchange(
        es.port,
        http_request("POST", "/admin/reset", body=b"{}", headers=[("x-switchover-admin", "not-the-token")]),
        timeout=3,
    )
    assert ex.replies and ex.reply.status == 403
