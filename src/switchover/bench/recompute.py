"""`bench recompute RUN --as vllm|sglang|guidellm|aiperf`: one run's raw rows in another tool's vocabulary.

Each tool's formulas follow reference/bench-metrics.md §2 (read from their sources; no code copied):
  vllm      TTFT = first event with choices − send; TPOT = (E2E − TTFT)/(N − 1); ITL = every event gap after
            the first token, pooled; E2E ends at the last event with choices; N = usage.
  sglang    TTFT = first event with text; TPOT as vLLM; ITL = event gaps; E2E ends at the end of the stream.
  guidellm  TTFT as sglang; "TPOT" = (last token − send)/N (includes TTFT); "ITL" = (last − first)/(N − 1).
  aiperf    TTFT as sglang; "ITL" = (E2E − TTFT)/(N − 1) with N re-tokenized by default (usage with
            --use-server-token-count); "ICL" = event gaps.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from switchover.bench.stats import NS_PER_MS, Row, first_token_ns, last_chunk_ns
from switchover.errors import BadInput
from switchover.measure.timing import ntpot_ms, tpot_ms
from switchover.runs import RunDir

Tool = Literal["vllm", "sglang", "guidellm", "aiperf"]
TOOLS: tuple[str, ...] = ("vllm", "sglang", "guidellm", "aiperf")


class ToolMetric(BaseModel):
    name: str
    same_as: str = Field(description="the switchover metric it equals, or how it differs")
    count: int
    mean: float | None
    median: float | None
    p99: float | None


class ToolStep(BaseModel):
    endpoint: str
    bucket: str | None
    step: int
    load: float | None
    duration_s: float | None
    metrics: list[ToolMetric]
    notes: list[str] = Field(default_factory=list)


class Recomputed(BaseModel):
    tool: str
    run: str
    steps: list[ToolStep]


def _first_choice_ns(r: Row) -> int | None:
    chunks = r.get("chunk_ns") or []
    return int(chunks[0]) if chunks else None


def _n_usage(r: Row) -> int | None:
    n = r.get("completion_tokens")
    return None if n is None else int(n)


def _gaps_after(r: Row, start: int | None) -> list[float]:
    chunks = [int(t) for t in r.get("chunk_ns") or []]
    if start is None or start not in chunks:
        return []
    i = chunks.index(start)
    return [(b - a) / NS_PER_MS for a, b in zip(chunks[i:], chunks[i + 1 :], strict=False)]


def _ms(a: int | None, b: int | None) -> float | None:
    return None if a is None or b is None else (b - a) / NS_PER_MS


def _decode(r: Row, first: int | None, last: int | None, n: int | None) -> float | None:
    """(last − first) / (N − 1): the one TPOT formula (measure/timing.py) with the tool's own first / last events."""
    return tpot_ms(_ms(r["send_ns"], first), _ms(r["send_ns"], last), n)


def _ntpot(r: Row) -> float | None:
    return ntpot_ms(_ms(r["send_ns"], last_chunk_ns(r)), _n_usage(r))


Formula = Callable[[Row], list[float] | float | None]


def _formulas(tool: str, use_server_count: bool) -> list[tuple[str, str, Formula]]:
    if tool == "vllm":
        return [
            (
                "TTFT",
                "switchover TTFT, except that an empty first event already counts",
                lambda r: _ms(r["send_ns"], _first_choice_ns(r)),
            ),
            ("TPOT", "switchover TPOT", lambda r: _decode(r, _first_choice_ns(r), last_chunk_ns(r), _n_usage(r))),
            ("ITL", "switchover ITL (event gaps, pooled)", lambda r: _gaps_after(r, _first_choice_ns(r))),
            ("E2EL", "switchover E2E", lambda r: _ms(r["send_ns"], last_chunk_ns(r))),
        ]
    if tool == "sglang":
        return [
            ("TTFT", "switchover TTFT", lambda r: _ms(r["send_ns"], first_token_ns(r))),
            ("TPOT", "switchover TPOT", lambda r: _decode(r, first_token_ns(r), last_chunk_ns(r), _n_usage(r))),
            ("ITL", "switchover ITL", lambda r: _gaps_after(r, first_token_ns(r))),
            (
                "E2E Latency",
                "switchover E2E plus the usage event and [DONE]",
                lambda r: _ms(r["send_ns"], r.get("end_ns")),
            ),
        ]
    if tool == "guidellm":
        return [
            ("time_to_first_token_ms", "switchover TTFT", lambda r: _ms(r["send_ns"], first_token_ns(r))),
            ("time_per_output_token_ms", "switchover NTPOT (includes TTFT; not switchover TPOT)", _ntpot),
            (
                "inter_token_latency_ms",
                "switchover TPOT",
                lambda r: _decode(r, first_token_ns(r), last_chunk_ns(r), _n_usage(r)),
            ),
            (
                "request_latency",
                "switchover E2E plus the trailing events",
                lambda r: _ms(r["send_ns"], r.get("end_ns")),
            ),
        ]

    def n_aiperf(r: Row) -> int | None:
        if use_server_count:
            return _n_usage(r)
        retok = r.get("retok_tokens")
        return None if retok is None else int(retok)

    return [
        ("time_to_first_token", "switchover TTFT", lambda r: _ms(r["send_ns"], first_token_ns(r))),
        (
            "inter_token_latency",
            "switchover TPOT" + ("" if use_server_count else ", but with re-tokenized N"),
            lambda r: _decode(r, first_token_ns(r), last_chunk_ns(r), n_aiperf(r)),
        ),
        ("inter_chunk_latency", "switchover ITL", lambda r: _gaps_after(r, first_token_ns(r))),
        ("request_latency", "switchover E2E", lambda r: _ms(r["send_ns"], last_chunk_ns(r))),
    ]


def _summ(name: str, same: str, values: Sequence[float]) -> ToolMetric:
    if not values:
        return ToolMetric(name=name, same_as=same, count=0, mean=None, median=None, p99=None)
    a = np.asarray(values, float)
    return ToolMetric(
        name=name,
        same_as=same,
        count=a.size,
        mean=float(a.mean()),
        median=float(np.median(a)),
        p99=float(np.percentile(a, 99)),
    )


def recompute_rows(rows: Sequence[Row], tool: str, *, use_server_count: bool = False) -> list[ToolStep]:
    """Group measured rows by (endpoint, bucket, step) and apply the tool's formulas."""
    if tool not in TOOLS:
        raise BadInput(f"--as must be one of {', '.join(TOOLS)}, got {tool!r}")
    groups: dict[tuple[str, str | None, int], list[Row]] = defaultdict(list)
    for r in rows:
        if not r.get("warmup"):
            groups[(str(r["endpoint"]), r.get("bucket"), int(r["step"]))].append(r)
    out = []
    formulas = _formulas(tool, use_server_count)
    for (ep, bucket, step), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], str(kv[0][1]), kv[0][2])):
        ok = [r for r in rs if not r.get("failure_kind")]
        metrics = []
        for name, same, fn in formulas:
            vals: list[float] = []
            for r in ok:
                v = fn(r)
                if isinstance(v, list):
                    vals.extend(v)
                elif v is not None:
                    vals.append(v)
            metrics.append(_summ(name, same, vals))
        sends = [int(r["send_ns"]) for r in rs]
        ends = [int(r["end_ns"]) for r in rs if r.get("end_ns") is not None]
        dur = (max(ends) - min(sends)) / 1e9 if sends and ends else None
        notes = []
        if dur:
            counts = [_n_usage(r) for r in ok]
            n_tot = sum(c for c in counts if c is not None) if counts and None not in counts else None
            metrics.append(
                ToolMetric(
                    name="output_throughput_tok_s",
                    same_as="switchover out_tok_per_s",
                    count=len(ok),
                    mean=None if n_tot is None else n_tot / dur,  # every request needs N, as out_tok_per_s
                    median=None,
                    p99=None,
                )
            )
            metrics.append(
                ToolMetric(
                    name="request_throughput",
                    same_as="switchover req_per_s",
                    count=len(ok),
                    mean=len(ok) / dur,
                    median=None,
                    p99=None,
                )
            )
        if tool == "aiperf" and not use_server_count and not any(r.get("retok_tokens") is not None for r in ok):
            notes.append(
                "AIPerf re-tokenizes by default: this run has no re-tokenized counts (bench --tokenizer), "
                "so inter_token_latency is empty; use --use-server-token-count"
            )
        load = rs[0].get("concurrency") or rs[0].get("rate")
        out.append(
            ToolStep(endpoint=ep, bucket=bucket, step=step, load=load, duration_s=dur, metrics=metrics, notes=notes)
        )
    return out


def recompute(run: RunDir, tool: str, *, use_server_count: bool = False) -> Recomputed:
    rows: list[dict[str, Any]] = run.read_records("requests")
    return Recomputed(tool=tool, run=str(run.path), steps=recompute_rows(rows, tool, use_server_count=use_server_count))
