"""Credentials, on raw sockets against recording upstreams: the shadow never gets a client's credentials; in
passthrough mode the gateway never adds an engine key; in keys mode only a known client key gets in, and the
engine key replaces it; in open mode the engine key goes with every request."""

from __future__ import annotations

import hashlib

import orjson
import pytest

from switchover.gateway.headers import copy_target, forward_headers
from switchover.testing import await_holds, await_until
from tests.gateway.conftest import (
    CHAT_BODY,
    Recorders,
    RecordingUpstream,
    Stack,
    chat,
    exchange,
    http_request,
    metric_total,
    recorded_stack,
    running_recorder,
    tenant_in,
)

CLIENT_KEY = "sk-client-7f3a9c2e1d5b"
OTHER_CLIENT_KEY = "sk-client-second-44e0a1"
NEW_ENGINE_KEY = "sk-engine-new-0b8d4e6f2a"
OLD_ENGINE_KEY = "sk-engine-old-93c1f07a55"
CREDENTIAL_HEADERS = {"authorization", "proxy-authorization", "cookie", "api-key", "x-api-key"}


def credentialed(
    tenant: str,
    body: bytes = CHAT_BODY,
    auth: str | None = f"Bearer {CLIENT_KEY}",
    extra: tuple[tuple[str, str], ...] = (),
) -> bytes:
    headers = [
        ("X-Tenant-Id", tenant),
        ("Proxy-Authorization", f"Basic {CLIENT_KEY}-proxy"),
        ("Cookie", f"session={CLIENT_KEY}-cookie"),
        ("api-key", f"{CLIENT_KEY}-azure"),
        ("x-api-key", f"{CLIENT_KEY}-anthropic"),
        *extra,
    ]
    if auth is not None:
        headers.insert(0, ("Authorization", auth))
    return http_request(body=body, headers=headers)


def everything_sent(rec: Recorders) -> bytes:
    return bytes(rec.old.raw) + bytes(rec.new.raw)


def reloads(s: Stack) -> float:
    """Config reloads the gateway has taken or refused (its own counter, read in-process)."""
    return metric_total(s.gw.metrics.render().decode(), "switchover_gateway_config_reloads_total")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_the_shadow_never_receives_client_credentials(tmp_path, stream):
    async with recorded_stack(tmp_path, weight=0, shadow={"percent": 100}) as (s, rec):
        ex = await exchange(s.port, credentialed("t1", orjson.dumps(chat(stream=stream))))
        assert ex.reply.status == 200, ex.data[:300]
        assert await rec.new.wait_requests(1), "no mirror reached new"
        mirror = rec.new.requests[0]
        leaked = sorted(mirror.names() & CREDENTIAL_HEADERS)
        assert not leaked, f"the shadow got {leaked}"
        assert CLIENT_KEY not in bytes(rec.new.raw).decode("latin-1")
        primary = rec.old.requests[0]  # passthrough: the client's own credentials go to the primary arm
        assert primary.header("authorization") == f"Bearer {CLIENT_KEY}"
        assert "proxy-authorization" not in primary.names()


async def test_passthrough_mode_never_sends_the_engine_key_to_any_upstream(tmp_path, monkeypatch):
    """Engine keys configured by a reload while the client policy is passthrough: whether the gateway takes the
    reload (and adds no key) or refuses it, no engine key ever reaches an upstream."""
    monkeypatch.setenv("NEW_ENGINE_KEY", NEW_ENGINE_KEY)
    monkeypatch.setenv("OLD_ENGINE_KEY", OLD_ENGINE_KEY)
    async with recorded_stack(tmp_path, weight=50, shadow={"percent": 100}) as (s, rec):
        s.config["new"]["api_key_env"] = "NEW_ENGINE_KEY"
        s.config["old"]["api_key_env"] = "OLD_ENGINE_KEY"
        s.rewrite()
        await await_until(lambda: reloads(s), 5, "the rewrite taken or refused (a config_reloads count)")
        seed = s.gw.tenant_seed
        to_new, to_old = tenant_in(50, "new", seed=seed), tenant_in(50, "old", seed=seed)
        anon = tenant_in(50, "new", start=1000, seed=seed)
        for tenant in (to_new, to_old):
            ex = await exchange(s.port, credentialed(tenant))
            assert ex.reply.status == 200, ex.data[:300]
        anonymous = await exchange(s.port, http_request(body=CHAT_BODY, headers=[("X-Tenant-Id", anon)]))
        assert anonymous.reply.status == 200
        assert await rec.new.wait_requests(3)  # two primaries and the old-arm request's mirror
        await await_holds(lambda: len(rec.new.requests) == 3, 0.1, "no further request to new")
        sent = everything_sent(rec).decode("latin-1")
        assert NEW_ENGINE_KEY not in sent and OLD_ENGINE_KEY not in sent, "the gateway added an engine key"
        by_tenant = {r.header("x-tenant-id"): r for r in rec.new.requests if r.header("cookie")}
        assert by_tenant[to_new].header("authorization") == f"Bearer {CLIENT_KEY}"
        assert rec.old.requests[0].header("authorization") == f"Bearer {CLIENT_KEY}"
        anon_req = [r for r in rec.new.requests if r.header("x-tenant-id") == anon]
        assert len(anon_req) == 1 and anon_req[0].header("authorization") is None


def keys_config(source: str, tmp_path, monkeypatch) -> dict:
    monkeypatch.setenv("GW_CLIENT_KEY_A", OTHER_CLIENT_KEY)
    if source == "keys_env":
        monkeypatch.setenv("GW_CLIENT_KEY_B", CLIENT_KEY)
        return {"mode": "keys", "keys_env": ["GW_CLIENT_KEY_A", "GW_CLIENT_KEY_B"]}
    path = tmp_path / "client-keys.txt"
    digest = hashlib.sha256(CLIENT_KEY.encode()).hexdigest()
    other = hashlib.sha256(OTHER_CLIENT_KEY.encode()).hexdigest()
    path.write_text(f"team-a sha256:{other}\nteam-b sha256:{digest}\n")
    return {"mode": "keys", "key_file": str(path)}


@pytest.mark.parametrize(
    "auth",
    [
        None,
        "",
        "Bearer ",
        "Bearer sk-unknown-key",
        f"Bearer {CLIENT_KEY}x",
        f"Bearer {CLIENT_KEY[:-1]}",
        f"Bearer {CLIENT_KEY.upper()}",
        f"Basic {CLIENT_KEY}",
        f"Bearer {NEW_ENGINE_KEY}",
    ],
    ids=["none", "empty", "empty_bearer", "unknown", "longer", "shorter", "upper", "basic", "engine_key"],
)
@pytest.mark.parametrize("source", ["keys_env", "key_file"])
async def test_keys_mode_answers_401_to_a_missing_or_unknown_key_and_forwards_nothing(
    tmp_path, monkeypatch, source, auth
):
    monkeypatch.setenv("NEW_ENGINE_KEY", NEW_ENGINE_KEY)
    clients = keys_config(source, tmp_path, monkeypatch)
    async with recorded_stack(
        tmp_path, weight=50, shadow={"percent": 100}, clients=clients, new_key_env="NEW_ENGINE_KEY"
    ) as (s, rec):
        headers = [("X-Tenant-Id", "t1")] + ([] if auth is None else [("Authorization", auth)])
        ex = await exchange(s.port, http_request(body=CHAT_BODY, headers=headers))
        r = ex.reply
        assert r.status == 401 and r.error_message(), ex.data[:300]
        models = await exchange(s.port, http_request("GET", "/v1/models", headers=headers))
        assert models.reply.status == 401
        await await_holds(lambda: rec.connections == 0, 0.2, "nothing forwarded upstream")


@pytest.mark.parametrize("source", ["keys_env", "key_file"])
async def test_keys_mode_forwards_a_known_key_with_the_engine_key_in_its_place(tmp_path, monkeypatch, source):
    monkeypatch.setenv("NEW_ENGINE_KEY", NEW_ENGINE_KEY)
    monkeypatch.setenv("OLD_ENGINE_KEY", OLD_ENGINE_KEY)
    clients = keys_config(source, tmp_path, monkeypatch)
    async with recorded_stack(
        tmp_path,
        weight=50,
        shadow={"percent": 100},
        clients=clients,
        new_key_env="NEW_ENGINE_KEY",
        old_key_env="OLD_ENGINE_KEY",
        override_header_enabled=True,
    ) as (s, rec):
        for arm in ("new", "old"):  # in keys mode the key is the tenant: the test's route header picks the arm
            ex = await exchange(s.port, credentialed("t1", extra=(("X-Switchover-Route", arm),)))
            assert ex.reply.status == 200, ex.data[:300]
        assert await rec.new.wait_requests(2) and await rec.old.wait_requests(1)
        await await_holds(
            lambda: (len(rec.new.requests), len(rec.old.requests)) == (2, 1), 0.1, "no further request upstream"
        )
        for r in rec.new.requests:  # the primary of `to_new` and the mirror of `to_old`
            assert r.header("authorization") == f"Bearer {NEW_ENGINE_KEY}", r.headers
        assert rec.old.requests[0].header("authorization") == f"Bearer {OLD_ENGINE_KEY}"
        sent = everything_sent(rec).decode("latin-1")
        assert CLIENT_KEY not in sent, "the client's key (or one of its other credentials) reached an upstream"


async def test_open_mode_attaches_the_engine_key_to_every_request(tmp_path, monkeypatch):
    monkeypatch.setenv("NEW_ENGINE_KEY", NEW_ENGINE_KEY)
    async with recorded_stack(tmp_path, weight=100, clients={"mode": "open"}, new_key_env="NEW_ENGINE_KEY") as (s, rec):
        plain = await exchange(s.port, http_request(body=CHAT_BODY, headers=[("X-Tenant-Id", "t1")]))
        own = await exchange(s.port, credentialed("t2"))
        assert plain.reply.status == 200 and own.reply.status == 200
        assert [r.header("authorization") for r in rec.new.requests] == [f"Bearer {NEW_ENGINE_KEY}"] * 2
        assert f"Bearer {CLIENT_KEY}" not in bytes(rec.new.raw).decode("latin-1")


VENDOR_KEYS = [
    ("X-Goog-Api-Key", f"{CLIENT_KEY}-goog"),
    ("Ocp-Apim-Subscription-Key", f"{CLIENT_KEY}-apim"),
    ("OpenAI-Organization", f"org-{CLIENT_KEY}"),
    ("X-Session-Token", f"{CLIENT_KEY}-session"),
]
QUERY = f"?api_key={CLIENT_KEY}-q1&key={CLIENT_KEY}-q2&access%5Ftoken={CLIENT_KEY}-q3&api-version=2024-10-21"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_third_party_shadow_gets_no_query_string_key_and_no_vendor_key_header(tmp_path, stream):
    third = RecordingUpstream("third")
    async with (
        running_recorder(third) as turl,
        recorded_stack(tmp_path, weight=0, shadow={"percent": 100, "upstream": turl}) as (s, rec),
    ):
        raw = http_request(
            target="/v1/chat/completions" + QUERY,
            body=orjson.dumps(chat(stream=stream)),
            headers=[("X-Tenant-Id", "t1"), *VENDOR_KEYS],
        )
        ex = await exchange(s.port, raw)
        assert ex.reply.status == 200, ex.data[:300]
        assert await third.wait_requests(1), "no mirror reached the third upstream"
        mirror = third.requests[0]
        assert CLIENT_KEY not in bytes(third.raw).decode("latin-1"), (mirror.target, mirror.headers)
        assert mirror.target == "/v1/chat/completions?api-version=2024-10-21"  # the rest of the query is kept
        assert rec.old.requests[0].target == "/v1/chat/completions" + QUERY  # passthrough primary: as sent


async def test_spot_check_copies_get_no_query_string_key_and_no_vendor_key_header(tmp_path):
    review = {"pairs_per_day": 10, "sample_percent": 100}
    async with recorded_stack(tmp_path, weight=0, review=review) as (s, rec):
        raw = http_request(
            target="/v1/chat/completions" + QUERY, body=CHAT_BODY, headers=[("X-Tenant-Id", "t1"), *VENDOR_KEYS]
        )
        ex = await exchange(s.port, raw)
        assert ex.reply.status == 200, ex.data[:300]
        assert await rec.new.wait_requests(1) and await rec.old.wait_requests(2), "no spot-check copies"
        copies = [r for r in rec.requests if r.target != "/v1/chat/completions" + QUERY]
        assert len(copies) == 2, [r.target for r in rec.requests]
        for r in copies:
            assert r.target == "/v1/chat/completions?api-version=2024-10-21"
            assert not {k.lower() for k, _ in VENDOR_KEYS} & r.names(), r.headers


def test_vendor_key_headers_reach_a_primary_only_in_passthrough_mode():
    items = [("X-Tenant-Id", "t1"), ("Content-Type", "application/json"), *VENDOR_KEYS]
    creds = frozenset(CREDENTIAL_HEADERS)
    passthrough = forward_headers(items, creds, keep_credentials=True, api_key=None)
    keys_mode = forward_headers(items, creds, keep_credentials=False, api_key=NEW_ENGINE_KEY)
    assert [k for k, _ in passthrough] == [k for k, _ in items]  # the client's own, to the arm it chose to trust
    assert keys_mode == [
        ("X-Tenant-Id", "t1"),
        ("Content-Type", "application/json"),
        ("Authorization", f"Bearer {NEW_ENGINE_KEY}"),
    ]


@pytest.mark.parametrize(
    ("target", "copy"),
    [
        ("/v1/completions", "/v1/completions"),
        ("/v1/completions?", "/v1/completions"),
        ("/v1/completions?key=a", "/v1/completions"),
        ("/v1/completions?API_KEY=a&x=1", "/v1/completions?x=1"),
        ("/v1/completions?api%2Dkey=a&%6Bey=b&sig=c&auth=d&x-goog-api-key=e", "/v1/completions"),
        (
            "/v1/completions?api-version=1&monkey=2&keyboard=3&t=4",
            "/v1/completions?api-version=1&monkey=2&keyboard=3&t=4",
        ),
        ("/v1/completions?access+token=a&=b&c", "/v1/completions?=b&c"),
    ],
)
def test_a_copys_target_loses_only_credential_named_query_parameters(target, copy):
    assert copy_target(target) == copy
