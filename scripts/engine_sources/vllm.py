"""vLLM releases for scripts/engine_releases.py: every final and post release since 0.4.0 on PyPI, read from its
sdist (0.4.0, 0.4.0.post1 and 0.15.x publish wheels only: their .py files are read from the smallest wheel). The
sdist's paths are the repository's (vllm/engine/arg_utils.py), so a fact's URL is the file at the release tag.

    python scripts/engine_sources/vllm.py fetch 0.6.3     # fill the source cache for one release, write nothing
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine_sources.common import Release
from engine_sources.pysource import fetch_release, listed, main
from switchover.engines.extract.vllm import extract

SOURCE_URL = "https://github.com/vllm-project/vllm/blob/{ref}/{path}"
SINCE = "0.4.0"
_FILES: dict[str, list[dict]] = {}


def releases(args: argparse.Namespace) -> list[Release]:
    """Every final and post release since 0.4.0, oldest first."""
    out = []
    for release, files in listed("vllm", SINCE):
        _FILES[release.version] = files
        out.append(release)
    return out


def fetch(release: Release, args: argparse.Namespace) -> Path:
    """The cached source folder of a release (downloaded and pruned the first time)."""
    if release.version not in _FILES:
        releases(args)
    return fetch_release("vllm", "vllm", release, _FILES[release.version], args, extract)


if __name__ == "__main__":
    sys.exit(main("vllm", SINCE, "vllm", extract))
