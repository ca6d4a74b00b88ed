"""switchover: make changing what serves an LLM API a measured, reversible operation."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("switchover")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
