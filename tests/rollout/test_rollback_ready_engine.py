"""The holding window's readiness check of old is told old's engine, so old's own loading answer (its profile's
readiness data) is what reads as "loading", not any 503."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from switchover.config import load_migration
from switchover.rollout import rollback_ready
from switchover.rollout.controller import Rollout
from switchover.wire.readiness import Readiness

CONFIG = """
old: {url: "http://127.0.0.1:9/v1", engine: llamacpp, engine_version: b4000}
new: {url: "http://127.0.0.1:8/v1", engine: vllm}
rollout: {stages: [shadow, 100]}
"""


def test_holdings_readiness_check_passes_olds_engine_and_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    async def fake_check_ready(url: str, **kw: Any) -> Readiness:
        seen.update(kw, url=url)
        return Readiness(url=url, state="ready", ready=True, reason="fake", max_ms=kw["max_ms"])

    monkeypatch.setattr(rollback_ready, "check_ready", fake_check_ready)
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(CONFIG)
    r = Rollout(load_migration(cfg), cfg)
    res = r.holding.ready("http://127.0.0.1:9/v1", None, 500.0)
    assert res.ready
    assert seen["engine"] == "llamacpp" and seen["engine_version"] == "b4000"
