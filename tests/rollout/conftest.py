"""Fixtures for the rollout tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rollout.builders import CONFIG


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    p = tmp_path / "switchover.yaml"
    p.write_text(CONFIG)
    return p
