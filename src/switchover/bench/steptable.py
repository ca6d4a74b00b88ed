"""The step table, once: the columns a bench step is shown with, for the console summary and report.html."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from switchover.evidence.bench_step import StepSummary

if TYPE_CHECKING:
    from switchover.evidence.bench_caps import StepLimit


def fmt(v: float | None, digits: int = 1) -> str:
    """A number with `digits` decimals; '—' when it was not measured."""
    return "—" if v is None else f"{v:.{digits}f}"


def load_cell(s: StepSummary) -> str:
    """A step's load: its concurrency or target rate, or 'trace' with the rate a trace replay achieved."""
    if s.concurrency is None and s.rate is None:
        return "trace" + (f" ({s.req_per_s:.2f} req/s)" if s.req_per_s is not None else "")
    if s.concurrency is not None:
        return fmt(float(s.concurrency), 0)
    return fmt(s.rate, 2)


Column = tuple[str, Callable[[StepSummary], str]]

# shown in both the console and the HTML step table, in this order
STEP_COLUMNS: tuple[Column, ...] = (
    ("endpoint", lambda s: s.endpoint),
    ("bucket", lambda s: s.bucket or ""),
    ("load", load_cell),
    ("ok", lambda s: f"{s.ok}/{s.requests}"),
    ("req/s", lambda s: fmt(s.req_per_s, 2)),
    ("tok/s", lambda s: fmt(s.out_tok_per_s, 1)),
    ("TTFT p50", lambda s: fmt(s.ttft_ms.p50 if s.ttft_ms else None)),
    ("TTFT p99", lambda s: fmt(s.ttft_ms.p99 if s.ttft_ms else None)),
    ("TPOT p50", lambda s: fmt(s.tpot_ms.p50 if s.tpot_ms else None, 2)),
    ("TPOT p99", lambda s: fmt(s.tpot_ms.p99 if s.tpot_ms else None, 2)),
    ("E2E p99", lambda s: fmt(s.e2e_ms.p99 if s.e2e_ms else None)),
    ("ISL", lambda s: fmt(s.lengths.isl_mean, 1)),
)


def step_flags(s: StepSummary) -> list[str]:
    """What makes a step's figures need a second look (not steady, client-bound, lengths off, timing artefacts)."""
    flags = []
    if s.steady is not None and s.steady.reached is False:
        flags.append(f"not steady ({fmt(s.steady.achieved)} of {s.steady.target:g})")
    if s.client_flag:
        flags.append(f"client at {s.client_load:.0%} of ceiling")
    short = [w for w in s.workers if w.reached is False]
    if s.workers:
        flags.append(f"{len(s.workers)} workers" + (f", {len(short)} below target" if short else ""))
    if s.lengths.isl_off_by_more_than_1:
        flags.append(f"ISL off by >1 on {s.lengths.isl_off_by_more_than_1}")
    if s.one_read:
        flags.append(f"{s.one_read} with all tokens in one read (TPOT 0)")
    if s.itl_zero and s.itl_ms:
        flags.append(f"{s.itl_zero}/{s.itl_ms.count} ITL gaps 0 (events read together)")
    if s.lengths.retok_mismatch:
        flags.append(f"re-tokenized N differs on {s.lengths.retok_mismatch}/{s.lengths.retok_compared}")
    return flags


def step_table(steps: list[StepSummary], extra: tuple[Column, ...] = ()) -> tuple[list[str], list[list[str]]]:
    """The step table's header and rows: the shared columns, then `extra`."""
    columns = STEP_COLUMNS + extra
    return [name for name, _ in columns], [[cell(s) for _, cell in columns] for s in steps]


def limit_columns(limits: Sequence[StepLimit]) -> tuple[Column, ...]:
    """The 'cap' (which cap bound, bench/capbind.py) and 'OOM' (out-of-memory answers / measured) columns, for the
    steps `limits` covers ('—' for a step it does not)."""
    by_key = {(x.endpoint, x.bucket, x.step, x.repeat): x for x in limits}

    def find(s: StepSummary) -> StepLimit | None:
        return by_key.get((s.endpoint, s.bucket or "", s.step, s.repeat))

    def cap(s: StepSummary) -> str:
        lim = find(s)
        if lim is not None and lim.detail.startswith("not measured"):  # too few scrapes: said, with their count
            return f"not measured ({lim.scrapes} scrapes)"
        return "—" if lim is None else lim.binding.replace("_", " ")

    def oom(s: StepSummary) -> str:
        lim = find(s)
        if lim is None or not lim.requests:
            return "—"
        return f"{lim.oom}/{lim.requests}" + (f" (+{lim.engine_dead} engine dead)" if lim.engine_dead else "")

    return (("cap", cap), ("OOM", oom))
