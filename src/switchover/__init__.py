"""switchover: make changing what serves an LLM API a measured, reversible operation."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("switchover")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+source"

__all__ = ["__version__", "cachekey"]


def __getattr__(name: str) -> Any:
    """`switchover.cachekey(...)`: model id + weights + tokenizer + template + prompt hashes (imported lazily so
    that `import switchover` stays fast)."""
    if name == "cachekey":
        from switchover.model.cachekey import cachekey

        return cachekey
    raise AttributeError(f"module 'switchover' has no attribute {name!r}")
