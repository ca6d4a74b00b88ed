"""The per-request latency formulas, one each (docs/metrics.md): TTFT, E2E, TPOT, NTPOT and ITL.

Bench statistics (bench/stats.py), the gateway's ledger (gateway/observe.py) and its shadow all compute them here,
from when the events of one response arrived (`perf_counter_ns`, as folded by wire/fold.py: one entry per event
carrying choices, with its text delta) and N, the server's `usage.completion_tokens`.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

NS_PER_MS = 1_000_000


def first_token_index(chunk_text: Sequence[str]) -> int | None:
    """Position of the first event whose text delta is non-empty (the first token); None when none is."""
    for i, text in enumerate(chunk_text):
        if text:
            return i
    return None


def first_token_ns(chunk_ns: Sequence[int], chunk_text: Sequence[str]) -> int | None:
    """Arrival of the first event whose text delta is non-empty: where TTFT ends."""
    i = first_token_index(chunk_text)
    return None if i is None or i >= len(chunk_ns) else int(chunk_ns[i])


def last_event_ns(chunk_ns: Sequence[int]) -> int | None:
    """Arrival of the last event carrying choices (a token or the finish_reason; not usage-only, not [DONE]):
    where E2E ends."""
    return int(chunk_ns[-1]) if len(chunk_ns) else None


def ttft_ms(send_ns: int, first_ns: int | None) -> float | None:
    """TTFT = first token − send."""
    return None if first_ns is None else (first_ns - send_ns) / NS_PER_MS


def e2e_ms(send_ns: int, last_ns: int | None) -> float | None:
    """E2E = last event carrying choices − send (a non-streamed response: its body's arrival − send)."""
    return None if last_ns is None else (last_ns - send_ns) / NS_PER_MS


def tpot_ms(ttft: float | None, e2e: float | None, n: int | None) -> float | None:
    """TPOT = (E2E − TTFT) / (N − 1) with N from usage: the mean time per output token after the first. None when
    N < 2 or a time is missing."""
    if ttft is None or e2e is None or n is None or n < 2:
        return None
    return (e2e - ttft) / (n - 1)


def ntpot_ms(e2e: float | None, n: int | None) -> float | None:
    """NTPOT = E2E / N (normalized TPOT: includes the first token); None when N = 0 or E2E is missing."""
    if e2e is None or not n:
        return None
    return e2e / n


def itl_ms(chunk_ns: Sequence[int], first_index: int | None) -> list[float]:
    """ITL = the gaps between consecutive events, from the first token to the last event."""
    if first_index is None:
        return []
    tail = [int(t) for t in chunk_ns[first_index:]]
    return [(b - a) / NS_PER_MS for a, b in pairwise(tail)]
