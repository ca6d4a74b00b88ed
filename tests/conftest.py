"""Shared test configuration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ENGINE_TIER = Path(__file__).with_name("engines")
ENGINE_TIER_TIMEOUT_S = 900  # the real-engine tier starts vLLM CPU and llama-server: minutes on 2 cores


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every real-engine test gets an explicit timeout mark (unless it has its own): the default in pyproject.toml
    ([tool.pytest.ini_options] --timeout) is for tests without engines."""
    for item in items:
        in_tier = item.get_closest_marker("engines") is not None or ENGINE_TIER in item.path.parents
        if in_tier and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(ENGINE_TIER_TIMEOUT_S))
