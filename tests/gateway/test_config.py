"""The gateway section of switchover.yaml: defaults, validation errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from switchover.config import load_migration
from switchover.errors import BadInput
from switchover.gateway.config import GatewayConfig

BASE = {"old": {"url": "http://127.0.0.1:1", "engine": "vllm"},
        "new": {"url": "http://127.0.0.1:2", "engine": "llamacpp"}}


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


@pytest.mark.parametrize(("gateway", "needle"), [
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
])
def test_bad_values_name_the_field_and_line(tmp_path, gateway, needle):
    with pytest.raises(BadInput) as exc:
        load_migration(write(tmp_path, gateway))
    assert needle in exc.value.message and "line" in exc.value.message


def test_run_dir_is_relative_to_the_config_file(tmp_path):
    g = GatewayConfig(run_dir="runs/gw")
    assert g.resolved_run_dir(tmp_path / "switchover.yaml") == tmp_path.resolve() / "runs/gw"
