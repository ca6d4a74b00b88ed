"""gateway.data_plane / gateway.envoy: builtin stays the default; what Envoy cannot provide is refused by name."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from switchover.config.gateway import GatewayConfig


def test_builtin_is_the_default_data_plane() -> None:
    gw = GatewayConfig()
    assert gw.data_plane == "builtin" and gw.envoy.admin_port == 9901 and gw.envoy.base_id is None


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"clients": {"mode": "open"}}, "clients.mode"),
        ({"max_context_tokens": 1000}, "max_context_tokens"),
        ({"shadow": {"upstream": "http://127.0.0.1:9"}}, "shadow.upstream"),
        ({"override_header_enabled": True}, "override_header_enabled"),
        ({"review": {"pairs_per_day": 5}}, "review.pairs_per_day"),
    ],
)
def test_envoy_refuses_what_it_cannot_provide_and_names_it(extra: dict, named: str) -> None:
    GatewayConfig(**extra)  # fine for the built-in gateway
    with pytest.raises(ValidationError, match=named.replace(".", r"\.")):
        GatewayConfig(data_plane="envoy", **extra)


def test_unknown_envoy_keys_are_rejected() -> None:
    with pytest.raises(ValidationError, match="extra"):
        GatewayConfig(data_plane="envoy", envoy={"workers": 2})
