"""Rules for the six impact areas of an engine switch (docs/checklist.md, engine.*). Each reads Evidence and
returns a Judgement; every statement names the figures it used, so the verdict can be checked against the evidence
shown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from switchover.check.evidence import Evidence
from switchover.check.judging import Judgement, Limits, pct, short_text
from switchover.verify.report import EquivalenceReport, LongInputCheck, LongInputSide, StructuredSide

if TYPE_CHECKING:
    from switchover.evidence.bench import BenchReport
    from switchover.probe.report import ProbeReport, ProbeResult

S = TypeVar("S", StructuredSide, LongInputSide)

DEFAULTS_CATEGORIES = (
    "stop",
    "finish_reason",
    "sampling",
    "n",
    "request",
    "response_format",
    "logprobs",
    "tools",
    "stream",
    "response",
)


def _short(text: str | None, n: int = 70) -> str:
    return short_text(text, n)


def probe_differences(
    ev: Evidence, j: Judgement, categories: tuple[str, ...], *, breaking_nogo: bool, label: str
) -> None:
    """Probe results of these categories: breaking differences (no-go or warn), other differences (warn)."""
    probe = j.source(ev.probe, ev, "probe")
    if probe is None:
        return
    results = [r for r in probe.results if r.category in categories]
    if not results:
        j.missing.append(f"no {label} probe was run")
        return
    same = [r for r in results if r.verdict == "same"]
    differs = [r for r in results if r.verdict == "differs"]
    unclear = [r for r in results if r.verdict not in ("same", "differs")]
    j.fig(f"{label} probes: same / differ / inconclusive", f"{len(same)} / {len(differs)} / {len(unclear)}")
    for r in differs:
        old = _short(r.old.summary) if r.old else "?"
        new = _short(r.new.summary) if r.new else "?"
        text = f"probe {r.id} ({r.title}) differs: old {old!r}, new {new!r}"
        if r.breaking_difference and breaking_nogo:
            j.nogo.append(text + f" — what breaks: {_short(r.breaks, 120)}")
        else:
            j.warn.append(text)
    if same and not differs:
        j.ok.append(f"{len(same)} {label} probe(s) behave the same on old and new")
    _profile_mismatches(probe, results, j)
    if probe.partial:
        j.missing.append(f"probe report partial: {probe.partial_reason}")


def _profile_mismatches(probe: ProbeReport, results: Sequence[ProbeResult], j: Judgement) -> None:
    """A side whose observation differs from what its engine's profile predicts at default flags (warn: a launch
    flag may change it, or the engine release behaves otherwise than the profile says)."""
    for r in results:
        for side, obs, info in (("old", r.old, probe.old), ("new", r.new, probe.new)):
            if obs is not None and obs.profile_match is False:
                engine = (info.engine if info is not None else None) or "its engine"
                j.warn.append(
                    f"probe {r.id} on {side}: observed {_short(str(obs.value))!r}, but the {engine} "
                    f"profile predicts {_short(str(obs.expected))!r} at default flags (a launch flag may "
                    f"change it; engines/data/{engine}.yaml cites the source)"
                )


def _bench_link(ev: Evidence, j: Judgement) -> BenchReport | None:
    if ev.bench is None:
        j.missing.append(ev.why_missing("bench"))
        return None
    j.link("bench summary", f"{ev.bench_dir}/summary.json")
    j.link("bench per-request rows", f"{ev.bench_dir}/requests.parquet")
    j.link("bench report", f"{ev.bench_dir}/report.html")
    return ev.bench


def _error_rates(b: BenchReport, j: Judgement, lim: Limits) -> None:
    """Every step's error rate on new against max_error_rate (old's at the same concurrency shown beside it)."""
    rates = {side: [(s.concurrency, s.error_rate) for s in b.steps if s.endpoint == side] for side in ("old", "new")}
    for side in ("old", "new"):
        vals = [r for _, r in rates[side] if r is not None]
        j.fig(
            f"{side}: worst step error rate",
            max(vals) if vals else None,
            None,
            None if vals else "no step measured an error rate",
        )
    j.fig("limit: max_error_rate", lim.max_error_rate)
    old_by_c = dict(rates["old"])
    bad = [(c, r) for c, r in rates["new"] if r is not None and r > lim.max_error_rate]
    for c, r in bad:
        j.nogo.append(
            f"new's error rate {r:.1%} at concurrency {c} > max_error_rate {lim.max_error_rate:.1%} "
            f"(old: {old_by_c.get(c)})"
        )
    measured = [r for _, r in rates["new"] if r is not None]
    if measured and not bad:
        j.ok.append(f"new's error rate <= {lim.max_error_rate:.1%} at every step (worst {max(measured):.1%})")


def _ttft_regression(b: BenchReport, j: Judgement, lim: Limits) -> None:
    """The A/B TTFT p99 deltas: a significant one beyond max_regression_pct is no-go, an unproven one a warning."""
    deltas = [(ab.concurrency, d) for ab in b.ab for d in ab.deltas if d.metric == "ttft" and d.stat == "p99"]
    if not deltas:
        j.missing.append("no A/B TTFT p99 comparison in the bench run")
        return
    at, worst = max(deltas, key=lambda cd: cd[1].delta_pct if cd[1].delta_pct is not None else -1e9)
    j.fig(f"TTFT p99 old at c={at}", round(worst.old, 2), "ms")
    j.fig(f"TTFT p99 new at c={at}", round(worst.new, 2), "ms")
    j.fig("TTFT p99 change (worst step)", worst.delta_pct, "%")
    j.fig("p-value (Mann-Whitney U)", worst.p_value)
    j.fig("limit: max_regression_pct", lim.max_regression_pct, "%")
    over = [(c, d) for c, d in deltas if d.delta_pct is not None and d.delta_pct > lim.max_regression_pct]
    for c, d in over:
        shift = f"TTFT p99 at concurrency {c}: new {d.new:.1f} ms vs old {d.old:.1f} ms ({d.delta_pct:+.0f}%"
        if d.significant:
            j.nogo.append(f"{shift}, significant, p={d.p_value:.3g}) > +{lim.max_regression_pct:g}%")
        else:
            p = "n/a" if d.p_value is None else f"{d.p_value:.3g}"
            j.warn.append(
                f"{shift}) but not significant (p={p}, n={d.n_old}/{d.n_new}): too few requests to tell; bench longer"
            )
    if not over:
        j.ok.append(
            f"no TTFT p99 regression beyond +{lim.max_regression_pct:g}% "
            f"(worst {worst.delta_pct:+.0f}% at concurrency {at})"
        )


def _error_probes(ev: Evidence, j: Judgement) -> None:
    """Error-shape probes that differ: client retry logic is keyed on statuses and bodies."""
    probe = j.source(ev.probe, ev, "probe")
    if probe is None:
        return
    errors = [r for r in probe.results if r.category == "errors"]
    differs = [r for r in errors if r.verdict == "differs"]
    for r in differs:
        j.warn.append(
            f"error probe {r.id} differs: old {_short(r.old.summary) if r.old else '?'!r}, "
            f"new {_short(r.new.summary) if r.new else '?'!r} (client retry logic keyed on statuses)"
        )
    j.fig("error-shape probes differing", f"{len(differs)} of {len(errors)}")


def scheduling(ev: Evidence, lim: Limits) -> Judgement:
    j = Judgement()
    b = _bench_link(ev, j)
    if b is not None:
        j.plots.append("bench_latency")
        _error_rates(b, j, lim)
        _ttft_regression(b, j, lim)
    _error_probes(ev, j)
    return j


def _sides(v: EquivalenceReport, sides: Sequence[S]) -> tuple[S | None, S | None]:
    """The old and the new endpoint's entry of a per-endpoint list of the verify report."""
    old = next((s for s in sides if s.url == v.old_url), None)
    new = next((s for s in sides if s.url == v.new_url), None)
    return old, new


def kv_cache(ev: Evidence, lim: Limits) -> Judgement:
    j = Judgement()
    v = j.source(ev.verify, ev, "verify")
    if v is not None:
        old, new = _sides(v, v.long_inputs)
        ob = old.boundary if old is not None else None
        nb = new.boundary if new is not None else None
        o = ob.longest_ok_prompt_tokens if ob else None
        n = nb.longest_ok_prompt_tokens if nb else None
        j.fig("old: longest input served", o, "prompt tokens", None if ob else "boundary search not run")
        j.fig("new: longest input served", n, "prompt tokens", None if nb else "boundary search not run")
        j.fig("old: configured context", ob.configured_context if ob else (old.context if old else None), "tokens")
        j.fig("new: configured context", nb.configured_context if nb else (new.context if new else None), "tokens")
        j.fig("limit: longest_input_tolerance", lim.longest_input_tolerance)
        if o is not None and n is not None:
            if n < o * (1 - lim.longest_input_tolerance):
                j.nogo.append(
                    f"new serves at most {n} prompt tokens, old {o} ({pct(o, n):+.0f}%): requests that "
                    "fit today fail after the switch"
                )
            else:
                j.ok.append(f"new serves {n} prompt tokens, old {o} (within {lim.longest_input_tolerance:.0%})")
        else:
            j.missing.append("the longest input that really succeeds was not measured on both sides")
    if ev.probe is not None:
        probe_differences(ev, j, ("length",), breaking_nogo=False, label="length")
    p = ev.plan
    if p is not None and p.capacity is not None:
        cap = p.capacity
        j.fig("plan: max concurrency at context", cap.max_concurrency, "requests")
        j.fig("plan: binding limit", cap.binding_limit)
        if cap.max_concurrency < 1:
            j.nogo.append(
                f"plan: the KV pool holds no request of {cap.context} tokens (binding limit: {cap.binding_limit})"
            )
        else:
            j.ok.append(
                f"plan: {cap.max_concurrency} concurrent requests of {cap.context} tokens "
                f"(binding limit: {cap.binding_limit})"
            )
        j.link("plan", "plan.json")
    elif p is not None:
        j.missing.append("plan capacity: " + ("; ".join(p.notes) or "no model/GPU given"))
    return j


def batching(ev: Evidence, lim: Limits) -> Judgement:
    j = Judgement()
    b = _bench_link(ev, j)
    if b is not None:
        j.plots.append("bench_latency")
        buckets = sorted({k.split("/", 1)[1] for k in b.knees})
        for bucket in buckets:
            ko, kn = b.knees.get(f"old/{bucket}"), b.knees.get(f"new/{bucket}")
            co = ko.concurrency if ko is not None and ko.found else None
            cn = kn.concurrency if kn is not None and kn.found else None
            j.fig(f"old knee ({bucket} tok)", co, "concurrency", None if co else (ko.message if ko else "no data"))
            j.fig(f"new knee ({bucket} tok)", cn, "concurrency", None if cn else (kn.message if kn else "no data"))
            if cn is not None and (co is None or cn < co):
                j.warn.append(
                    f"new's TPOT p99 bends at concurrency {cn:g} ({bucket}-token inputs), old's "
                    + (f"at {co:g}" if co is not None else "not within the ladder")
                    + ": cap the canary share and timeouts below new's knee"
                )
            elif ko is not None and kn is not None:
                j.ok.append(
                    f"new's knee ({cn if cn is not None else 'none in the ladder'}) is not earlier than "
                    f"old's ({co if co is not None else 'none in the ladder'}) for {bucket}-token inputs"
                )
        top = {
            side: {c: s.out_tok_per_s for s in b.steps if s.endpoint == side and (c := s.concurrency) is not None}
            for side in ("old", "new")
        }
        common = sorted(set(top["old"]) & set(top["new"]))
        if common:
            c = common[-1]
            o, n = top["old"][c], top["new"][c]
            j.fig(f"old output tok/s at c={c}", round(o, 1) if o else o, "tok/s")
            j.fig(f"new output tok/s at c={c}", round(n, 1) if n else n, "tok/s")
            if o and n is not None and n < o * (1 - lim.max_regression_pct / 100):
                j.warn.append(
                    f"new's output throughput at concurrency {c} is {n:.1f} tok/s vs old {o:.1f} "
                    f"({pct(o, n):+.0f}%, beyond -{lim.max_regression_pct:g}%)"
                )
            elif o and n is not None:
                j.ok.append(
                    f"output throughput at concurrency {c}: new {n:.1f} vs old {o:.1f} tok/s ({pct(o, n):+.0f}%)"
                )
        else:
            j.missing.append("no common concurrency step with throughput on both sides")
    if ev.plan is not None and ev.plan.translation is not None:
        lost = ev.plan.translation.lost
        j.fig("launch flags lost in translation", len(lost))
        for x in lost[:6]:
            j.warn.append(f"launch: {x.intent} — {x.kind}: {_short(x.detail, 110)}")
        j.link("plan", "plan.json")
    return j


def _structured(v: EquivalenceReport, j: Judgement, lim: Limits) -> None:
    """Valid JSON-schema outputs among the answered structured requests: a drop beyond structured_drop is no-go."""
    old, new = _sides(v, v.structured)
    if old is None or new is None:
        j.missing.append("structured-output check not run on both sides")
        return
    if old.rate is None or new.rate is None:
        j.missing.append(
            "structured-output check: no request got an answer on "
            + " and ".join(n for n, side in (("old", old), ("new", new)) if side.rate is None)
        )
        return
    j.fig("old: valid JSON-schema outputs", old.summary())
    j.fig("new: valid JSON-schema outputs", new.summary())
    j.fig("limit: structured_drop", lim.structured_drop)
    if new.rate < old.rate - lim.structured_drop - 1e-9:
        j.nogo.append(
            f"valid JSON-schema outputs fell from {old.rate:.0%} to {new.rate:.0%} (more than "
            f"{lim.structured_drop:.0%} lower)"
        )
    else:
        j.ok.append(f"valid JSON-schema outputs: old {old.summary()}, new {new.summary()}")


def _anomalies(c: LongInputCheck) -> list[str]:
    return [
        k
        for k, on in (
            ("loop", c.loop),
            ("early stop", c.early_stop),
            (f"script drift {c.script_drift}", bool(c.script_drift)),
        )
        if on
    ]


def _long_inputs(v: EquivalenceReport, j: Judgement) -> None:
    """Loops, early stops and script drift on long inputs that new shows and old does not (at the same length)."""
    lo, ln = _sides(v, v.long_inputs)
    if lo is None or ln is None or not ln.checks:
        j.missing.append(
            "long-input checks not run on both sides" + (f" ({ln.skipped})" if ln is not None and ln.skipped else "")
        )
        return
    old_bad = {c.target_fraction: set(_anomalies(c)) for c in lo.checks}
    found = []
    for c in ln.checks:
        extra = [k for k in _anomalies(c) if k not in old_bad.get(c.target_fraction, set())]
        if extra:
            found.append(
                f"{', '.join(extra)} at {c.target_fraction:.0%} of the context ({c.prompt_tokens} prompt tokens)"
            )
    j.fig("new: long-input anomalies old lacks", len(found))
    j.nogo.extend(f"long input on new: {a}, not on old" for a in found)
    if not found:
        j.ok.append(f"no long-input anomaly on new that old lacks ({len(ln.checks)} input(s))")


def _greedy(v: EquivalenceReport, j: Judgement) -> None:
    """The greedy comparison's summary; each flagged prompt (at most 4 named) is a warning."""
    s = v.summary
    if s is None:
        j.missing.append("greedy comparison not run")
        return
    j.fig("greedy: identical outputs", f"{s.identical}/{s.prompts}")
    j.fig("greedy: flagged prompts", s.flagged)
    j.fig("greedy: common prefix p50", s.prefix_chars_p50, "chars")
    j.fig("greedy: token agreement (mean)", s.token_agreement_mean)
    flagged = [d for d in v.greedy if d.flags]
    j.warn.extend(f"greedy {d.id}: {'; '.join(d.flags)}" for d in flagged[:4])
    if len(flagged) > 4:
        j.warn.append(f"... and {len(flagged) - 4} more flagged prompt(s)")
    if not flagged:
        j.ok.append(f"no greedy output flagged ({s.identical}/{s.prompts} identical)")


def kernels(ev: Evidence, lim: Limits) -> Judgement:
    j = Judgement()
    v = j.source(ev.verify, ev, "verify", plot="verify_prefix")
    if v is None:
        return j
    _structured(v, j, lim)
    _long_inputs(v, j)
    _greedy(v, j)
    if v.partial:
        j.warn.append(f"verify is partial: {v.partial_reason}")
    return j


def defaults(ev: Evidence, lim: Limits) -> Judgement:
    j = Judgement()
    probe_differences(ev, j, DEFAULTS_CATEGORIES, breaking_nogo=True, label="API-default")
    p = ev.plan
    if p is not None and p.api_differences:
        j.fig("API facts that differ between the engine profiles", len(p.api_differences))
        j.link("plan", "plan.json")
        if ev.probe is None:  # without live evidence, the cited profile facts are what we have
            for x in p.api_differences[:6]:
                j.warn.append(f"profiles: {x.intent}: {_short(x.detail, 110)}")
    return j


def observability(ev: Evidence, lim: Limits) -> Judgement:
    j = Judgement()
    m = j.source(ev.metrics, ev, "metrics")
    if m is not None:
        for side, s in (("old", m.old), ("new", m.new)):
            j.fig(
                f"{side}: /metrics families",
                s.families if s and s.reachable else None,
                None,
                None if s and s.reachable else (s.reason if s else "not scraped"),
            )
        if m.new is not None and m.old is not None:
            if m.old.reachable and not m.new.reachable:
                j.nogo.append(
                    f"new serves no /metrics ({m.new.reason}) while old does: dashboards and alerts go "
                    "blind at the switch"
                )
            elif m.new.reachable and m.new.profile_names_missing:
                missing = ", ".join(m.new.profile_names_missing[:5])
                j.warn.append(f"new's /metrics lacks series its profile lists: {missing}")
        changed = [i for i in m.intents if i.status != "same" and i.status != "new_only"]
        n_of = {k: sum(i.status == k for i in m.intents) for k in ("renamed", "unit", "buckets", "missing_in_new")}
        j.fig("metric intents renamed / unit / buckets / missing in new", " / ".join(str(v) for v in n_of.values()))
        if changed:
            sample = ", ".join(f"{i.intent}: {i.old} → {i.new or '(none)'}" for i in changed[:4])
            j.warn.append(
                f"{len(changed)} metric(s) differ between {m.old_engine} and {m.new_engine} ({sample}"
                f"{', …' if len(changed) > 4 else ''}): map them in the monitoring adapter, or watch the "
                "gateway's switchover_gateway_* series, which are the same on both arms"
            )
        elif m.intents:
            j.ok.append(f"{len(m.intents)} metric intents have the same name and unit")
    probe_differences(ev, j, ("usage",), breaking_nogo=True, label="usage")
    return j
