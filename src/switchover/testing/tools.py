"""External tools a test needs (promtool, prometheus, chromium, envoy): skip locally, fail in CI."""

from __future__ import annotations

import os
import shutil


def in_ci() -> bool:
    """True when the CI environment variable is set (CI=true, 1...); unset, empty, 0, false or no: not CI."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(reason: str) -> None:
    """A prerequisite is absent: skip the test here, fail it in CI (where scripts/test.sh installs everything)."""
    import pytest

    if in_ci():
        pytest.fail(f"{reason} (CI=true: the test environment must provide it)", pytrace=False)
    pytest.skip(reason)


def require_tool(*names: str, hint: str = "") -> str:
    """The path of the first of `names` found on PATH (or as an absolute path); otherwise `missing(...)`."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    missing(f"{' / '.join(names)} not installed" + (f" ({hint})" if hint else ""))
    raise AssertionError("unreachable")  # pragma: no cover (missing() always raises)
