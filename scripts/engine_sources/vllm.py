"""vLLM releases for scripts/engine_releases.py: every final and post release since 0.4.0 on PyPI, read from its
sdist (0.4.0, 0.4.0.post1 and 0.15.x publish wheels only: their .py files are read from the smallest wheel). The
sdist's paths are the repository's (vllm/engine/arg_utils.py), so a fact's URL is the file at the release tag.

    python scripts/engine_sources/vllm.py fetch 0.6.3     # fill the source cache for one release, write nothing
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine_sources.pysource import PyPISource
from switchover.engines.extract.vllm import extract

SOURCE_URL = "https://github.com/vllm-project/vllm/blob/{ref}/{path}"
SINCE = "0.4.0"
ENV_PREFIXES = ("VLLM_",)
NOTES = [
    "Metrics are named as a Prometheus scrape shows them: prometheus_client exposes a counter as <name>_total "
    "(whether or not the source writes the _total), so counters are recorded with exactly one _total; histograms and "
    "summaries by their base name (without _bucket, _sum, _count).",
    "Where the V0 and V1 engines define different series, a release records those of the engine it runs by "
    "default: V0 until VLLM_USE_V1 defaults to 1 (vllm/envs.py, 0.8.0), V1 after; a series only the other engine "
    "serves is absent at that release. Series hidden behind --show-hidden-metrics-for-version are left out.",
    "Environment variables are the names in vllm/envs.py's environment_variables table (from 0.17.0 vLLM warns "
    "about, or refuses, a VLLM_* variable missing from it), plus the variables those entries fall back to (HOST_IP "
    "for VLLM_HOST_IP); 0.4.0 and 0.4.1 have no envs.py, so their VLLM_* variables are those the package reads by "
    "name. Variables read only by libraries vLLM loads (CUDA, NCCL, Hugging Face) are not listed. A variable is "
    "marked deprecated where the comment above its envs.py entry says so; a name in removed_environment_variables "
    "(0.34.0: vLLM refuses to start when it is set) is not in the table, so the release shows it absent.",
    "-O3 is read per release from FlexibleArgumentParser.parse_args: argparse's -O 3 (-O an alias of "
    "--compilation-config) until 0.9.1, the key --compilation-config.level (0.9.2) or .mode (0.11.1) through the "
    "dotted-key path, then --optimization-level (0.12.0); any one-letter option that takes a value (-q) may have "
    "it attached, as argparse reads it.",
]
_SOURCE = PyPISource("vllm", "vllm", SINCE, extract, ENV_PREFIXES)
releases = _SOURCE.releases
fetch = _SOURCE.fetch


if __name__ == "__main__":
    sys.exit(_SOURCE.main())
