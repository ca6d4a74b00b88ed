"""Pure parts of the gateway's security boundary, table-tested: request targets, forwarded headers, request ids,
the client policy and its key file."""

from __future__ import annotations

import pytest

from switchover.config.gateway import ClientsConfig, GatewayConfig
from switchover.errors import BadInput
from switchover.gateway.clients import ClientPolicy, key_file_line, read_key_file
from switchover.gateway.headers import forward_headers, request_id
from switchover.wire.target import TargetError, parse_target, path_allowed

CREDS = frozenset(ClientsConfig().credential_headers)


@pytest.mark.parametrize(
    ("raw", "path", "upstream"),
    [
        (b"/v1/chat/completions", "/v1/chat/completions", "/v1/chat/completions"),
        (b"/v1/models?x=1&y=%20", "/v1/models", "/v1/models?x=1&y=%20"),
        (b"/v1/%63hat/completions", "/v1/chat/completions", "/v1/chat/completions"),
        (b"/v1/models/caf%C3%A9", "/v1/models/café", "/v1/models/caf%C3%A9"),
        (b"/v1/models/a@b:c", "/v1/models/a@b:c", "/v1/models/a@b:c"),
        (b"/v1/models/", "/v1/models/", "/v1/models/"),
    ],
)
def test_origin_form_targets_are_decoded_once_and_re_encoded(raw, path, upstream):
    t = parse_target(raw)
    assert (t.path, t.upstream) == (path, upstream)


@pytest.mark.parametrize(
    "raw",
    [
        b"http://127.0.0.1:9/v1/models",
        b"//127.0.0.1:9/v1/models",
        b"*",
        b"127.0.0.1:9",
        b"@127.0.0.1:9/v1/x",
        b":9/x",
        b"",
        b"/v1/../admin",
        b"/v1/./models",
        b"/v1/%2e%2e/admin",
        b"/v1/%2E/models",
        b"/v1%2Fmodels",
        b"/v1%5Cmodels",
        b"/v1/models%00",
        b"/v1/%zz",
        b"/v1/%4",
        b"/v1//models",
        b"/v1/models#frag",
        b"/v1/%0d%0aX:1",
        b"/v1/%ff",
        b"/..",
        b"/v1/models?a b",
        b"/v1/models?%zz",
    ],
)
def test_targets_that_could_reach_elsewhere_or_mean_two_things_are_refused(raw):
    with pytest.raises(TargetError) as err:
        parse_target(raw)
    assert err.value.status == 400 and str(err.value)


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/v1/models", True),
        ("/v1/models/m1", True),
        ("/v1/modelsX", False),
        ("/v1/chat/completions", True),
        ("/v1/chat/completionsX", False),
        ("/v1", False),
        ("/admin", False),
        ("/tokenize", True),
    ],
)
def test_the_allowlist_matches_whole_segments(path, allowed):
    assert path_allowed(path, tuple(GatewayConfig().allowed_paths)) is allowed


def test_hop_by_hop_gateway_own_and_connection_named_headers_never_travel():
    items = [
        ("Host", "gw"),
        ("Connection", "keep-alive, X-Hop"),
        ("X-Hop", "1"),
        ("Keep-Alive", "5"),
        ("TE", "trailers"),
        ("Upgrade", "h2c"),
        ("Proxy-Authorization", "Basic x"),
        ("Accept-Encoding", "gzip"),
        ("X-Switchover-Route", "new"),
        ("X-Switchover-Admin", "t"),
        ("Content-Length", "3"),
        ("X-Tenant-Id", "t1"),
        ("Authorization", "Bearer client"),
        ("Cookie", "s=1"),
    ]
    out = dict(forward_headers(items, CREDS, keep_credentials=True, api_key=None))
    assert out == {"X-Tenant-Id": "t1", "Authorization": "Bearer client", "Cookie": "s=1"}


@pytest.mark.parametrize(
    ("keep", "key", "expected_auth"),
    [
        (True, None, "Bearer client"),
        (False, None, None),
        (False, "engine", "Bearer engine"),
        (True, "engine", "Bearer engine"),
    ],
)
def test_credentials_pass_only_where_the_policy_says(keep, key, expected_auth):
    items = [
        ("Authorization", "Bearer client"),
        ("api-key", "a"),
        ("X-Api-Key", "b"),
        ("Cookie", "c"),
        ("Content-Type", "application/json"),
    ]
    out = forward_headers(items, CREDS, keep_credentials=keep, api_key=key)
    names = {k.lower() for k, _ in out}
    assert dict(out).get("Authorization") == expected_auth
    assert ("cookie" in names) == (keep and key is None) and ("api-key" in names) == (keep and key is None)
    assert ("Content-Type", "application/json") in out


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("abc-123_X.y:z", True),
        ("a" * 128, True),
        ("a" * 129, False),
        ("a b", False),
        ("x\nSet-Cookie: a=1", False),
        ("é", False),
        ("", False),
        (None, False),
    ],
)
def test_only_plain_request_ids_are_reflected(value, kept):
    out = request_id(value)
    assert (out == value) is kept and len(out) <= 128 and out.replace("-", "").replace("_", "").isascii()


def test_keys_mode_admits_env_and_file_keys_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv("TEAM_A_KEY", "sk-team-a-0123456789abcdef")
    (tmp_path / "keys.txt").write_text("# clients\n" + key_file_line("team-b", "sk-team-b-0123456789abcdef") + "\n")
    policy = ClientPolicy(ClientsConfig(mode="keys", keys_env=["TEAM_A_KEY"], key_file="keys.txt"), tmp_path)

    def headers(**h: str):
        return {k.replace("_", "-"): v for k, v in h.items()}.get

    assert policy.check(headers(authorization="Bearer sk-team-a-0123456789abcdef")).client == "TEAM_A_KEY"
    assert policy.check(headers(authorization="bearer sk-team-b-0123456789abcdef")).client == "team-b"
    assert policy.check(headers(x_api_key="sk-team-b-0123456789abcdef")).allowed
    for h in (
        headers(),
        headers(authorization="Bearer nope"),
        headers(authorization="Bearer "),
        headers(authorization="Basic sk-team-a-0123456789abcdef"),
    ):
        v = policy.check(h)
        assert not v.allowed and v.reason
    assert ClientPolicy(ClientsConfig()).check(headers()).allowed  # passthrough checks nothing


@pytest.mark.parametrize(
    ("text", "needle"),
    [("team sha256:abc\n", "keys.txt:1"), ("\n\n# only comments\n", "no keys"), ("a b c\n", "keys.txt:1")],
)
def test_a_bad_key_file_names_the_file_and_line(tmp_path, text, needle):
    path = tmp_path / "keys.txt"
    path.write_text(text)
    with pytest.raises(BadInput) as err:
        read_key_file(path)
    assert needle in err.value.message


def test_keys_mode_without_keys_and_an_unset_key_variable_are_refused(monkeypatch):
    with pytest.raises(ValueError):
        ClientsConfig(mode="keys")
    monkeypatch.delenv("NOPE_KEY", raising=False)
    with pytest.raises(BadInput) as err:
        ClientPolicy(ClientsConfig(mode="keys", keys_env=["NOPE_KEY"]))
    assert "NOPE_KEY" in err.value.message


def test_the_connection_cap_fits_the_file_descriptor_limit(monkeypatch):
    """220 slow clients against a 200-descriptor process once starved everyone: the cap now leaves room for an
    upstream connection per client and a reserve."""
    import resource

    from switchover.httpfront import listener

    monkeypatch.setattr(resource, "getrlimit", lambda _: (200, 200))
    assert listener.fd_budget(1024) == (200 - listener.FD_RESERVE) // 2
    assert listener.fd_budget(10) == 10
    monkeypatch.setattr(resource, "getrlimit", lambda _: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert listener.fd_budget(1024) == 1024
