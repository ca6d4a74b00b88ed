"""The gateway's fault matrix at full size: 10,000 requests (stream and not) through a gateway whose old and
new upstreams fail at random (refuse, 5xx, hang before the first byte, die mid-stream, slow drip, malformed
SSE, in-band error, truncation). Checks that every request got exactly one ledger row and that none ran past
its timeout bound. In-process, loopback only, bounded; tests/gateway/test_reliability.py runs 400.

    python bench/gateway_reliability.py [--n 10000] [--concurrency 64] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import orjson

from switchover.gateway.fault_matrix import fault_matrix


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not 1 <= args.n <= 10_000_000 or not 1 <= args.concurrency <= 4096:
        ap.error("--n must be 1-10,000,000 and --concurrency 1-4096")
    with tempfile.TemporaryDirectory(prefix="gw-faults-") as d:
        try:
            import uvloop

            r = uvloop.run(fault_matrix(Path(d) / "run", args.n, args.concurrency, args.seed))
        except ImportError:
            r = asyncio.run(fault_matrix(Path(d) / "run", args.n, args.concurrency, args.seed))
    sys.stdout.write(orjson.dumps(r, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n")
    # the bound is the sum of the timeouts + 1 s; on a starved CPU the event loop itself runs late, so the
    # largest measured loop lag (twice: client and gateway share the loop) is added before calling it a hang
    limit = r["bound_s"] + 2 * r["max_loop_lag_s"]
    ok = (
        r["rows"] == r["requests"]
        and not r["missing"]
        and not r["duplicates"]
        and r["max_duration_s"] < limit
        and -1 not in r["client_statuses"]
        and -2 not in r["client_statuses"]
    )
    print(
        f"{'PASS' if ok else 'FAIL'}: {r['rows']} ledger rows for {r['requests']} requests "
        f"({r['missing']} missing, {r['duplicates']} duplicated); slowest {r['max_duration_s']:.2f} s "
        f"(timeout bound {r['bound_s']:.2f} s + 2 x loop lag {r['max_loop_lag_s']:.2f} s)"
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
