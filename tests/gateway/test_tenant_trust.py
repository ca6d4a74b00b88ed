"""Tenant trust (issue 22): a client cannot choose its bucket in keys mode, the tenant -> bucket hash is seeded per
deployment, and one client alone cannot latch the kill switch for everyone."""

from __future__ import annotations

import stat

import orjson
import pytest

from switchover.config.gateway import ClientsConfig, GatewayConfig
from switchover.errors import BadInput
from switchover.gateway.clients import SEED_FILE, ClientPolicy, Verdict, deployment_seed
from switchover.gateway.policy import ANONYMOUS, bucket_of, tenant_hash, threshold
from switchover.testing import await_until
from tests.gateway.conftest import CHAT_BODY, chat, exchange, http_request, recorded_stack, request_rows, stack

KEY_A = "sk-client-team-a-5c1e9b7d"
KEY_B = "sk-client-team-b-08f2aa41"
KEY_C = "sk-client-team-c-77d03e6c"
NEW_FAULT = {"X-Fault": "status:503", "X-Fault-Arm": "new"}


def keys_env(monkeypatch: pytest.MonkeyPatch, **extra: object) -> dict[str, object]:
    for name, key in (("TEAM_A", KEY_A), ("TEAM_B", KEY_B), ("TEAM_C", KEY_C)):
        monkeypatch.setenv(name, key)
    return {"mode": "keys", "keys_env": ["TEAM_A", "TEAM_B", "TEAM_C"], **extra}


def header_of(mapping: dict[str, str]):
    low = {k.lower(): v for k, v in mapping.items()}
    return lambda name: low.get(name)


# ---- who a request counts as (pure) ---------------------------------------------------------------------------


def test_in_keys_mode_the_tenant_is_the_key_name_whatever_tenant_header_is_sent(monkeypatch):
    policy = ClientPolicy(ClientsConfig(**keys_env(monkeypatch)))
    for sent in ({}, {"x-tenant-id": "tenant-7"}, {"x-tenant-id": "anything-else"}):
        get = header_of({"authorization": f"Bearer {KEY_A}", **sent})
        verdict = policy.check(get)
        assert verdict.client == "TEAM_A"
        assert policy.tenant_key(get, verdict, "x-tenant-id") == "TEAM_A"


def test_a_key_listed_in_tenant_header_keys_may_name_its_own_tenants_and_others_may_not(monkeypatch):
    policy = ClientPolicy(ClientsConfig(**keys_env(monkeypatch, tenant_header_keys=["TEAM_A"])))
    front = header_of({"authorization": f"Bearer {KEY_A}", "x-tenant-id": "user-42"})
    other = header_of({"authorization": f"Bearer {KEY_B}", "x-tenant-id": "user-42"})
    assert policy.tenant_key(front, policy.check(front), "x-tenant-id") == "TEAM_A/user-42"
    assert policy.tenant_key(other, policy.check(other), "x-tenant-id") == "TEAM_B"
    bare = header_of({"authorization": f"Bearer {KEY_A}"})
    assert policy.tenant_key(bare, policy.check(bare), "x-tenant-id") == "TEAM_A"


def test_tenant_header_keys_must_name_configured_keys_and_need_keys_mode(monkeypatch):
    with pytest.raises(BadInput, match=r"tenant_header_keys.*TEAM_Z"):
        ClientPolicy(ClientsConfig(**keys_env(monkeypatch, tenant_header_keys=["TEAM_Z"])))
    with pytest.raises(ValueError, match="tenant_header_keys"):
        ClientsConfig(mode="passthrough", tenant_header_keys=["TEAM_A"])


def test_in_passthrough_the_tenant_is_the_header_else_the_bearer_token_else_anonymous():
    policy = ClientPolicy(ClientsConfig())
    cases = [
        ({"x-tenant-id": "t1", "authorization": "Bearer tok"}, "t1"),
        ({"authorization": "Bearer tok"}, "tok"),
        ({}, None),
    ]
    for headers, want in cases:
        get = header_of(headers)
        assert policy.tenant_key(get, Verdict(True), "x-tenant-id") == want
    assert tenant_hash(None, b"s" * 32) == tenant_hash(ANONYMOUS, b"s" * 32)


def test_the_kill_switch_counts_a_client_by_key_only_when_there_are_several_keys(monkeypatch):
    several = ClientPolicy(ClientsConfig(**keys_env(monkeypatch)))
    assert several.counted_as(Verdict(True, client="TEAM_B")) == "TEAM_B"
    one = ClientPolicy(ClientsConfig(mode="keys", keys_env=["TEAM_A"]))
    assert one.counted_as(Verdict(True, client="TEAM_A")) is None  # the one client is everyone: not capped
    assert ClientPolicy(ClientsConfig()).counted_as(Verdict(True)) is None  # passthrough: no verified identity


# ---- the seeded hash (pure) ------------------------------------------------------------------------------------


def test_the_bucket_of_a_tenant_depends_on_the_deployment_seed_and_is_stable_under_one_seed():
    tenants = [f"tenant-{i}" for i in range(200)]
    s1, s2 = b"\x01" * 32, b"\x02" * 32
    first = [bucket_of(tenant_hash(t, s1)) for t in tenants]
    assert first == [bucket_of(tenant_hash(t, s1)) for t in tenants]  # sticky within a deployment
    assert first != [bucket_of(tenant_hash(t, s2)) for t in tenants]
    assert first != [bucket_of(tenant_hash(t)) for t in tenants]  # not the public (unseeded) hash
    for weight in (5, 20, 50):  # raising the weight still only moves tenants old -> new
        assert {t for t, b in zip(tenants, first, strict=True) if b < threshold(weight)} <= {
            t for t, b in zip(tenants, first, strict=True) if b < threshold(weight + 10)
        }


def test_the_seed_is_made_once_readable_only_by_its_owner_and_then_reused(tmp_path):
    path = tmp_path / "run" / SEED_FILE
    path.parent.mkdir()
    seed = deployment_seed(path)
    assert len(seed) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert deployment_seed(path) == seed


def test_gateways_starting_together_on_a_new_seed_file_all_read_the_same_seed(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / SEED_FILE
    with ThreadPoolExecutor(8) as pool:
        seeds = set(pool.map(lambda _: deployment_seed(path), range(32)))
    assert len(seeds) == 1 and path.read_text().strip() == seeds.pop().hex()
    assert [p.name for p in tmp_path.iterdir()] == [SEED_FILE]  # no temporary file left behind


@pytest.mark.parametrize(
    "content", [b"", b"abc", b"zz" * 32, b"\xff" * 64], ids=["empty", "short", "not_hex", "binary"]
)
def test_a_seed_file_that_is_not_a_seed_is_refused_naming_the_file(tmp_path, content):
    path = tmp_path / SEED_FILE
    path.write_bytes(content)
    with pytest.raises(BadInput, match=SEED_FILE) as exc:
        deployment_seed(path)
    if content:  # a seed file's content is never echoed
        assert content.decode("latin-1") not in exc.value.message


def test_a_seed_file_that_is_a_symlink_is_refused_and_its_target_left_alone(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"0" * 64)
    (tmp_path / SEED_FILE).symlink_to(target)
    with pytest.raises(BadInput, match=SEED_FILE):
        deployment_seed(tmp_path / SEED_FILE)
    dangling = tmp_path / "d" / SEED_FILE
    dangling.parent.mkdir()
    dangling.symlink_to(tmp_path / "not-yet")
    with pytest.raises(BadInput, match=SEED_FILE):
        deployment_seed(dangling)
    assert not (tmp_path / "not-yet").exists()


def test_a_configured_seed_file_is_relative_to_the_config_file():
    gw = GatewayConfig(tenant_seed_file="shared/tenant.seed")
    from pathlib import Path

    assert gw.resolved_seed_file(Path("/etc/sw/switchover.yaml"), Path("/run/gw")) == Path("/etc/sw/shared/tenant.seed")
    assert GatewayConfig().resolved_seed_file(None, Path("/run/gw")) == Path("/run/gw") / SEED_FILE


# ---- through the gateway ----------------------------------------------------------------------------------------


async def test_a_keys_mode_client_cannot_steer_its_requests_with_the_tenant_header(tmp_path, monkeypatch):
    """Tenant ids chosen by the public hash to land on new and on old: in keys mode they all go where the key's
    name lands, and the ledger's tenant is the key's."""
    public_new = next(f"t{i}" for i in range(10_000) if bucket_of(tenant_hash(f"t{i}")) < threshold(50))
    public_old = next(f"t{i}" for i in range(10_000) if bucket_of(tenant_hash(f"t{i}")) >= threshold(50))
    async with recorded_stack(tmp_path, weight=50, clients=keys_env(monkeypatch)) as (s, _):
        for tenant in (public_new, public_old, public_new, public_old):
            ex = await exchange(
                s.port,
                http_request(body=CHAT_BODY, headers=[("Authorization", f"Bearer {KEY_A}"), ("X-Tenant-Id", tenant)]),
            )
            assert ex.reply.status == 200, ex.data[:300]
        rows = request_rows(s)
        assert len(rows) == 4
        assert len({r["arm"] for r in rows}) == 1, f"the tenant header steered a keys-mode client: {rows}"
        assert {r["tenant"] for r in rows} == {tenant_hash("TEAM_A", s.gw.tenant_seed)}


async def test_the_deployment_seed_is_written_once_in_the_run_dir_and_never_shown(tmp_path, caplog):
    async with stack(tmp_path, weight=50) as s:
        path = s.gw.run_dir / SEED_FILE
        seed = s.gw.tenant_seed
        assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600 and len(seed) == 32
        await s.post(chat(), tenant="tenant-1")
        rows = s.rows()
        assert rows[0].bucket == bucket_of(tenant_hash("tenant-1", seed))
        async with s.http.get(s.url + "/metrics") as r:
            metrics = await r.read()
    async with stack(tmp_path, weight=50) as again:
        assert again.gw.tenant_seed == seed  # the same deployment keeps its buckets across a restart
    seen = b"\n".join([metrics, *(p.read_bytes() for p in s.gw.run_dir.glob("ledger-*.jsonl"))])
    seen += caplog.text.encode()
    assert seed.hex().encode() not in seen and seed not in seen


async def test_thirty_failing_requests_from_one_client_do_not_latch_the_kill_switch_for_everyone(tmp_path, monkeypatch):
    ks = {"min_samples": 20, "max_fallback_ratio": 0.2, "window": 60}
    async with stack(tmp_path, weight=100, kill_switch=ks, clients=keys_env(monkeypatch)) as s:
        for _ in range(30):  # every one falls back to old: the client sees 200s
            status, _, _ = await s.post(chat(), headers={"Authorization": f"Bearer {KEY_A}", **NEW_FAULT})
            assert status == 200
        assert not s.gw.killswitch.latched, "one client latched the kill switch for everyone"
        for key in (KEY_B, KEY_C):  # the same failures from two more clients: now it is the engine
            for _ in range(10):
                await s.post(chat(), headers={"Authorization": f"Bearer {key}", **NEW_FAULT})
        assert s.gw.killswitch.latched
        status, body, _ = await s.post(chat(), headers={"Authorization": f"Bearer {KEY_B}"})
        assert status == 200 and s.rows()[-1].route_reason == "kill_switch", orjson.loads(body)


async def test_a_reloaded_tenant_seed_file_waits_for_a_restart_and_the_log_says_so(tmp_path, caplog):
    async with stack(tmp_path, weight=50) as s:
        seed = s.gw.tenant_seed
        s.rewrite(tenant_seed_file=str(tmp_path / "other.seed"))
        await await_until(lambda: s.gw.live.gw.tenant_seed_file is not None, 5, "the rewrite reloaded")
        assert s.gw.tenant_seed == seed and not (tmp_path / "other.seed").exists()
        assert "tenant_seed_file changes take effect only after a restart" in caplog.text
