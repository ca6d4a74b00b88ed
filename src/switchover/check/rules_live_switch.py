"""The rules of what a live switch shows (docs/checklist.md): the warm-up tail after the drill's first good answer,
which cap binds on new in the bench, and new's out-of-memory answers. Read the rollback part (the drill) and the
bench part (its `limits`, bench/capbind.py)."""

from __future__ import annotations

from switchover.check.evidence import Evidence
from switchover.check.judging import Judgement, Limits
from switchover.check.rules_engine_switch import _bench_link
from switchover.evidence.bench_caps import WORDS, advice


def warmup_tail(ev: Evidence, lim: Limits) -> Judgement:
    """warn when the last drill has no warm-up measurement or its TTFT never settled; the tail and the switch time
    (stop issued → old at its steady TTFT) as figures; go otherwise."""
    j = Judgement()
    r = j.source(ev.rollback, ev, "rollback")
    if r is None:
        return j
    d = r.drill
    if d is None or not d.ok:
        j.warn.append("no drill that brought old back: the warm-up tail is unmeasured (`switchover drill`)")
        return j
    w = d.warmup
    if w is None:
        j.warn.append("the last drill did not measure the warm-up tail (run `switchover drill` without --no-warmup)")
        return j
    j.fig("drill: first good answer → steady TTFT", w.tail_s, "s", missing=None if w.steady else w.reason)
    j.fig("drill: probes before steady", w.tail_requests, None, missing=None if w.steady else "not steady")
    j.fig("drill: first probe TTFT", w.first_ttft_ms, "ms")
    j.fig("drill: steady TTFT", w.steady_ttft_ms, "ms", missing=None if w.steady else "not steady")
    j.fig(
        "drill: stop → old at steady speed", d.switch_s, "s", missing=None if d.switch_s is not None else "not steady"
    )
    if not w.steady:
        j.warn.append(f"old's TTFT did not settle after the switch: {w.reason}")
    else:
        j.ok.append(f"old answered at its steady TTFT {d.switch_s:.2f} s after the stop ({w.reason})")
    return j


def binding_cap(ev: Evidence, lim: Limits) -> Judgement:
    """warn when a cap binds on new at a lower load than any cap binds on old (the advice names the flag to
    raise); go when new's first binding load is not lower; the verdicts per side as figures."""
    j = Judgement()
    b = _bench_link(ev, j)
    if b is None:
        return j
    if not b.limits:
        j.missing.append("the bench run holds no binding-cap verdicts (a bench of an older switchover)")
        return j
    first: dict[str, tuple[int, str, str] | None] = {}
    for side in ("old", "new"):
        bound = sorted((x.step, x.load, x.binding) for x in b.limits if x.endpoint == side and x.binding in WORDS)
        known = [x for x in b.limits if x.endpoint == side and x.binding != "unknown"]
        first[side] = bound[0] if bound else None
        j.fig(
            f"{side}: first load where a cap bound",
            f"{bound[0][1]} ({WORDS[bound[0][2]]})" if bound else None,
            None,
            missing=None if bound else ("no cap bound in the ladder" if known else "no /metrics verdict"),
        )
    o, n = first["old"], first["new"]
    if n is not None and (o is None or n[0] < o[0]):
        engines = {e.label: e.engine for e in b.endpoints}
        lines = advice([x for x in b.limits if x.endpoint == "new"], engines)
        j.warn.append(
            f"new's {WORDS[n[2]]} binds at {n[1]}, "
            + (f"old's first cap at {o[1]}" if o else "no cap bound on old in the ladder")
            + ("; " + "; ".join(lines) if lines else "")
        )
    elif n is None:
        j.ok.append("no cap bound on new within the ladder")
    else:
        j.ok.append(f"new's first binding cap ({n[1]}) comes no earlier than old's ({o[1] if o else '—'})")
    return j


def oom_rate(ev: Evidence, lim: Limits) -> Judgement:
    """no-go when new answered out of memory where old did not; warn when both did, or when new's engine died
    (cause not in the answer); go when new had no OOM answer."""
    j = Judgement()
    b = _bench_link(ev, j)
    if b is None:
        return j
    if not b.limits:
        j.missing.append("the bench run holds no OOM counts (a bench of an older switchover)")
        return j
    total = {
        side: (
            sum(x.oom for x in b.limits if x.endpoint == side),
            sum(x.requests for x in b.limits if x.endpoint == side),
            sum(x.engine_dead for x in b.limits if x.endpoint == side),
        )
        for side in ("old", "new")
    }
    for side, (oom, n, _) in total.items():
        j.fig(f"{side}: OOM answers", oom, f"of {n} requests")
    oom_new, _, dead_new = total["new"]
    if oom_new and not total["old"][0]:
        worst = max((x for x in b.limits if x.endpoint == "new"), key=lambda x: x.oom)
        j.nogo.append(
            f"new answered out of memory {oom_new} time(s), old never; most at {worst.load} "
            f"({worst.oom}/{worst.requests}: {', '.join(worst.oom_texts)})"
        )
    elif oom_new:
        j.warn.append(f"both ran out of memory in the bench: new {oom_new}, old {total['old'][0]} answers")
    else:
        j.ok.append("new gave no out-of-memory answer in the bench")
    if dead_new:
        j.warn.append(f"new's engine died under the bench ({dead_new} answers said so; its log says why)")
    return j


def client_defaults(ev: Evidence, lim: Limits) -> Judgement:
    """warn for each client default that behaves differently on new (rollout/client_defaults.py findings), with
    the share of requests it touches; go when the ledger's requests rely on nothing that differs; not run without
    ledger rows carrying the client's fields."""
    j = Judgement()
    mix = j.source(ev.clients, ev, "clients")
    if mix is None:
        return j
    j.fig("requests with the client's fields", mix.requests, None)
    for sfx in mix.suffixes:
        j.fig(f"a fixed {sfx.role} ending (hash {sfx.hash})", round(sfx.share * 100, 1), "% of requests")
    if not mix.requests:
        j.missing.append("; ".join(mix.notes) or "the ledger holds no request with the client's fields")
        return j
    if not (mix.old_engine and mix.new_engine):
        j.missing.append("; ".join(mix.notes) or "an endpoint has no engine profile")
        return j
    for f in mix.findings:
        j.warn.append(f.detail + (f" ({f.source})" if f.source else ""))
    if not mix.findings:
        j.ok.append(f"no client default of these {mix.requests} requests behaves differently on new")
    return j
