"""Garbage-collector settings for the processes that sit on a hot path: the gateway and the load generator.

A proxied request or a streamed response allocates hundreds of short-lived objects; with CPython's default
young-generation threshold (700 net allocations) the collector runs several times per request and scans
everything alive, including all that was built at start-up. `quiet_gc` freezes the start-up objects out of the
scans and collects the young generation every 20,000 net allocations. Reference cycles are still collected,
less often. Measured in paired runs: bench/gateway_overhead.py (gateway: streamed CPU per request 367-420 ->
313 µs, c=1 p50 about -0.1 ms) and bench/loadgen_vs_peers.py (client CPU per 64-chunk request 0.214-0.227 ->
0.205-0.209 ms, about 5 %); see docs/gateway.md and docs/bench.md.
"""

from __future__ import annotations

import gc

THRESHOLDS = (20_000, 20, 20)


def quiet_gc() -> None:
    """Freeze what exists now out of the collector's scans and raise the young generation's threshold."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
