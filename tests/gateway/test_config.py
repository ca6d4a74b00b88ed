"""The gateway section of switchover.yaml: defaults, validation errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from switchover.config import load_migration
from switchover.config.gateway import GatewayConfig
from switchover.errors import BadInput

BASE = {
    "old": {"url": "http://127.0.0.1:1", "engine": "vllm"},
    "new": {"url": "http://127.0.0.1:2", "engine": "llamacpp"},
}


def write(tmp_path: Path, gateway: object) -> Path:
    p = tmp_path / "switchover.yaml"
    p.write_text(yaml.safe_dump({**BASE, "gateway": gateway}))
    return p


def test_defaults_are_safe():
    g = GatewayConfig()
    assert g.weight == 0 and not g.rollback and not g.override_header_enabled and not g.expose_arm_header
    assert g.fallback.statuses == [500, 502, 503, 504] and g.shadow.percent == 0
    assert g.listen.host == "127.0.0.1"


def test_section_is_optional_and_loads(tmp_path):
    assert load_migration(write(tmp_path, {"weight": 5, "shadow": {"percent": 10}})).gateway.weight == 5
    p = tmp_path / "plain.yaml"
    p.write_text(yaml.safe_dump(BASE))
    assert load_migration(p).gateway is None


@pytest.mark.parametrize(
    ("gateway", "needle"),
    [
        ({"weight": 101}, "gateway.weight"),
        ({"weight": -1}, "gateway.weight"),
        ({"rollback": "maybe"}, "gateway.rollback"),
        ({"fallback": {"statuses": [700]}}, "gateway.fallback.statuses"),
        ({"shadow": {"upstream": "ftp://x"}}, "gateway.shadow.upstream"),
        ({"shadow": {"percent": 200}}, "gateway.shadow.percent"),
        ({"kill_switch": {"max_fallback_ratio": 0}}, "gateway.kill_switch.max_fallback_ratio"),
        ({"bypass_paths": ["v1/embeddings"]}, "gateway.bypass_paths"),
        ({"wieght": 5}, "gateway.wieght: unknown field"),
        ({"fallback": {"on_timeout_ms": 9000}, "timeouts": {"first_byte_ms": 1000}}, "on_timeout_ms"),
        ({"ledger_rotate_mb": float("inf")}, "gateway.ledger_rotate_mb"),
        ({"ledger_rotate_mb": 1e-12}, "gateway.ledger_rotate_mb"),
        ({"reload_poll_s": 1e-9}, "gateway.reload_poll_s"),
        ({"drain_seconds": float("nan")}, "gateway.drain_seconds"),
        ({"shadow": {"upstream": "http://user:pw@evil:9"}}, "gateway.shadow.upstream"),
        ({"clients": {"mode": "keys"}}, "gateway.clients"),
        ({"clients": {"mode": "open", "keys_env": ["K"]}}, "gateway.clients"),
        ({"clients": {"mode": "sometimes"}}, "gateway.clients.mode"),
        ({"clients": {"credential_headers": ["bad header"]}}, "gateway.clients.credential_headers"),
        ({"allowed_paths": ["/v1/../admin"]}, "gateway.allowed_paths"),
        ({"allowed_paths": ["v1"]}, "gateway.allowed_paths"),
        ({"limits": {"max_connections": 0}}, "gateway.limits.max_connections"),
        ({"limits": {"header_timeout_s": float("inf")}}, "gateway.limits.header_timeout_s"),
        ({"limits": {"max_head_bytes": 10}}, "gateway.limits.max_head_bytes"),
        ({"front": "aiohttp"}, "gateway.front: unknown field"),
    ],
)
def test_bad_values_name_the_field_and_line(tmp_path, gateway, needle):
    with pytest.raises(BadInput) as exc:
        load_migration(write(tmp_path, gateway))
    assert needle in exc.value.message and "line" in exc.value.message


def test_a_key_pasted_into_keys_env_is_refused_without_echoing_it(tmp_path):
    """keys_env holds variable names (inputs.env_var_name): a pasted key is named as one, never printed back."""
    key = "sk-live-0123456789abcdef"
    with pytest.raises(BadInput) as exc:
        load_migration(write(tmp_path, {"clients": {"mode": "keys", "keys_env": ["GOOD_NAME", key]}}))
    assert "gateway.clients.keys_env" in exc.value.message and key not in exc.value.message
    assert "looks like a key" in exc.value.message


def test_run_dir_is_relative_to_the_config_file(tmp_path):
    g = GatewayConfig(run_dir="runs/gw")
    assert g.resolved_run_dir(tmp_path / "switchover.yaml") == tmp_path.resolve() / "runs/gw"


def test_engine_keys_without_a_chosen_client_policy_are_refused_at_start(tmp_path, monkeypatch):
    """Passthrough (the default) never sends api_key_env: leaving the mode implicit would 401 every client."""
    from switchover.gateway.app import resolve_live

    monkeypatch.setenv("NEW_KEY", "sk-engine-0123456789")
    p = tmp_path / "switchover.yaml"
    cfg = {**BASE, "new": {**BASE["new"], "api_key_env": "NEW_KEY"}, "gateway": {"weight": 5}}
    p.write_text(yaml.safe_dump(cfg))
    with pytest.raises(BadInput) as exc:
        resolve_live(load_migration(p), p)
    assert "gateway.clients" in exc.value.message and "new.api_key_env" in exc.value.message
    for mode in ("passthrough", "open"):
        cfg["gateway"]["clients"] = {"mode": mode}
        p.write_text(yaml.safe_dump(cfg))
        live = resolve_live(load_migration(p), p)
        assert live.engine_key("new") == (None if mode == "passthrough" else "sk-engine-0123456789")


@pytest.mark.parametrize("tokenizer", ["/dev/zero", "missing/tokenizer.json", "__binary__"])
def test_a_bad_routing_tokenizer_is_a_one_line_error_naming_the_field(tmp_path, tokenizer):
    from switchover.gateway.app import Gateway

    if tokenizer == "__binary__":
        (tmp_path / "tok.json").write_bytes(b"\x00\xff" * 100)
        tokenizer = str(tmp_path / "tok.json")
    p = write(tmp_path, {"max_context_tokens": 100, "tokenizer": tokenizer, "run_dir": str(tmp_path / "run")})
    with pytest.raises(BadInput) as exc:
        Gateway(load_migration(p), p)
    assert exc.value.message.startswith("gateway.tokenizer")
