"""switchover: make changing what serves an LLM API a measured, reversible operation."""

from __future__ import annotations

from typing import Any

__all__ = ["__version__", "cachekey"]


def _version() -> str:
    """The installed distribution's version, read on first use (importlib.metadata is not needed to start)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("switchover")
    except PackageNotFoundError:  # running from a source tree without install
        return "0.0.0+source"


def __getattr__(name: str) -> Any:
    """`switchover.__version__`, and `switchover.cachekey(...)`: model id + weights + tokenizer + template + prompt
    hashes (both imported lazily so that `import switchover` stays fast)."""
    if name == "__version__":
        globals()["__version__"] = value = _version()
        return value
    if name == "cachekey":
        from switchover.model.cachekey import cachekey

        return cachekey
    raise AttributeError(f"module 'switchover' has no attribute {name!r}")
