"""Fixtures the plan tests share."""

from __future__ import annotations

import pytest

from switchover.engines import releases
from switchover.engines.releases import EngineReleases


@pytest.fixture
def no_release_data(monkeypatch: pytest.MonkeyPatch) -> dict[str, EngineReleases]:
    """No engine has release data unless a test adds it to the returned table: results do not move with the
    packaged data."""
    table: dict[str, EngineReleases] = {}
    monkeypatch.setattr(releases, "load_releases", lambda engine: table.get(engine))
    return table
