"""The client's own share of a step: requests waiting in the client vs on the wire, and its memory, so a saturated
client (one core, thousands of streams) is never read as a slow server; and the open-file limit those streams need.

On the wire (Little's law): req/s × mean E2E requests are out at the server on average. In a concurrency step the
rest of the slots asked for wait in the client: between a response's last byte and the next send on that slot
(`send lag`: the row's send_ns − sched_ns, where sched_ns is when the slot freed; in rate mode, the scheduled time).
"""

from __future__ import annotations

import os
import resource
import sys

from switchover.errors import BadInput
from switchover.evidence.bench_step import STEADY_FRACTION, ClientQueue, StepSummary

FDS_SPARE = 64  # files besides the streams: the run's Parquet files, the dataset, stdio, the event loop's own


def client_queue(s: StepSummary, lag_n: int, lag_sum_ns: int, lag_max_ns: int) -> ClientQueue:
    """The queueing figures of a summarised step, from its send lags (ns) and its req/s and mean E2E."""
    q = ClientQueue(
        endpoint=s.endpoint, step=s.step, repeat=s.repeat, bucket=s.bucket, concurrency=s.concurrency, rate=s.rate
    )
    if s.req_per_s is not None and s.e2e_ms is not None:
        q.on_wire = s.req_per_s * s.e2e_ms.mean / 1000
    if q.on_wire is not None and s.concurrency:
        q.in_client = max(s.concurrency - q.on_wire, 0.0)
        q.client_bound = q.on_wire < STEADY_FRACTION * s.concurrency
    if lag_n:
        q.send_lag_ms_mean = lag_sum_ns / lag_n / 1e6
        q.send_lag_ms_max = lag_max_ns / 1e6
        if s.rate and q.client_bound is None:
            q.client_bound = q.send_lag_ms_mean > 1000 / s.rate  # on average later than one arrival gap
    return q


def rss_mb() -> float | None:
    """This process's resident memory now, MB (None where /proc is absent)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError, IndexError):
        return None


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, MB (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e6 if sys.platform == "darwin" else peak * 1024 / 1e6


def open_files_for(streams: int) -> int:
    """Raise this process's open-file soft limit to its hard limit when `streams` connections need more; BadInput
    naming both when even the hard limit is too low. Returns the soft limit in force."""
    need = streams + FDS_SPARE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        top = need if hard == resource.RLIM_INFINITY else hard
        if top < need:
            raise BadInput(
                f"--concurrency {streams} needs about {need} open files, but this process may open at "
                f"most {hard} (ulimit -Hn); raise the hard limit or lower --concurrency"
            )
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(top, soft), hard))
        soft = max(top, soft)
    return int(soft)


__all__ = ["client_queue", "open_files_for", "peak_rss_mb", "rss_mb"]
