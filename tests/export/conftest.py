"""Migration files for the export tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchover.config import Migration, load_migration

BASE = """\
old: {url: http://127.0.0.1:18001, engine: vllm}
new: {url: http://127.0.0.1:18002, engine: %(new_engine)s}
gateway:
  weight: %(weight)s
  rollback: %(rollback)s
  tenant_header: x-team
  bypass_paths: [/v1/embeddings, /v1/audio]
  shadow: {percent: %(shadow)s}
rollout:
  stages: [shadow, 5, 20, 50, 100]
  gates: {min_samples: 40, max_error_rate: 0.01}
"""


@pytest.fixture
def make_migration(tmp_path: Path):
    def make(
        *,
        weight: float = 5,
        rollback: bool = False,
        shadow: float = 10,
        new_engine: str = "llamacpp",
        new_url: str | None = None,
    ) -> Migration:
        text = BASE % dict(weight=weight, rollback=str(rollback).lower(), shadow=shadow, new_engine=new_engine)
        if new_url:
            text = text.replace("http://127.0.0.1:18002", new_url)
        p = tmp_path / "switchover.yaml"
        p.write_text(text)
        return load_migration(p)

    return make
