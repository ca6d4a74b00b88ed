"""SGLang releases for scripts/engine_releases.py: every final and post release since 0.3.0 on PyPI, read from its
sdist (from 0.5.11 SGLang publishes wheels only: their .py files are read from the smallest wheel). The archives
hold the repository's python/ folder (sglang/srt/server_args.py is python/sglang/srt/server_args.py in the
repository), hence the python/ in SOURCE_URL.

    python scripts/engine_sources/sglang.py fetch 0.4.6   # fill the source cache for one release, write nothing
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine_sources.pysource import PyPISource
from switchover.engines.extract.sglang import extract
from switchover.engines.extract.sglang_environ import PREFIXES as ENV_PREFIXES

SOURCE_URL = "https://github.com/sgl-project/sglang/blob/{ref}/python/{path}"
SINCE = "0.3.0"
NOTES = [
    "Metrics are named as a Prometheus scrape shows them: prometheus_client exposes a counter as <name>_total "
    "(whether or not the source writes the _total), so counters are recorded with exactly one _total; histograms and "
    "summaries by their base name (without _bucket, _sum, _count).",
    "Environment variables are the fields of the Envs registry (sglang/srt/environ.py, 0.5.3 on; a field's "
    "deprecated_name alias included) and every SGLANG_* / SGL_* variable the server package reads by name "
    "(get_bool_env_var, os.getenv, os.environ); the frontend language, benchmark and test scripts are left out. Where "
    "a variable is read in several places, the first file cites it and a default is recorded only when the reads "
    "agree. Releases whose environ.py rewrites the SGL_ prefix at import read any SGL_<X> variable as SGLANG_<X> "
    "(with a warning): a release's env_prefix_aliases say so. A variable is marked deprecated where environ.py says "
    "so (its warning functions, a loop over a {old: new} dict, the _DEPRECATED_ENVS registry, a field's "
    "deprecated_name alias), with the replacement and the release's own hint; a name environ.py reads only to warn "
    "or forward is listed too. Variables read only by libraries SGLang loads (CUDA, NCCL, Hugging Face) are not "
    "listed.",
]
_SOURCE = PyPISource("sglang", "sglang", SINCE, extract, ENV_PREFIXES)
releases = _SOURCE.releases
fetch = _SOURCE.fetch


if __name__ == "__main__":
    sys.exit(_SOURCE.main())
