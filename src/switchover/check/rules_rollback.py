"""The rule rollout.rollback (docs/checklist.md): a new engine you cannot go back from should not go live. Reads
the rollback part (the last drill, the prerequisites checked during the check, the holding window)."""

from __future__ import annotations

from switchover.check.evidence import Evidence
from switchover.check.judging import Judgement, Limits


def rollback(ev: Evidence, lim: Limits) -> Judgement:
    """no-go for a drill that did not bring old back within its budget; from 100 % (holding) on also for no drill
    or a blocking prerequisite (config, weights, route, old's readiness), which before that warn (the rollout
    itself will not enter 100 % without them); warn for an unverified prerequisite or a holding window at risk."""
    j = Judgement()
    r = j.source(ev.rollback, ev, "rollback")
    if r is None:
        return j
    j.fig("rollout", f"{r.rollout_status} ({r.stage})")
    strict = r.holding is not None  # at 100 %: the way back is all there is
    blocking = j.nogo if strict else j.warn
    d = r.drill
    if d is None:
        blocking.append(
            "no drill: the way back has never been timed (`switchover drill`: stop new, start old, "
            "time the first good answer)"
        )
    else:
        j.fig(
            "drill: new stopped → first good answer on old",
            d.recovery_s,
            "s",
            missing=None if d.recovery_s is not None else (d.reason or "old never answered"),
        )
        if d.max_recovery_s is not None:
            j.fig("drill budget", d.max_recovery_s, "s")
        if not d.ok:
            j.nogo.append(f"the last drill did not bring old back: {d.reason or d.last_reason or 'no reason'}")
        elif d.within_budget is False:
            j.nogo.append(f"the last drill took {d.recovery_s:.1f} s, over its budget of {d.max_recovery_s:g} s")
        else:
            j.ok.append(f"the last drill had old answering {d.recovery_s:.1f} s after new was stopped")
    for p in r.prerequisites:
        j.fig(f"prerequisite: {p.name}", p.status)
        if p.name == "drill":
            continue  # judged above, from the drill itself
        if p.blocks:
            blocking.append(f"rollback prerequisite {p.name} is {p.status}: {p.detail}")
        elif p.status != "ok":
            j.warn.append(f"rollback prerequisite {p.name} is {p.status}: {p.detail}")
    ok = [p.name for p in r.prerequisites if p.status == "ok" and p.name != "drill"]
    if ok:
        j.ok.append(f"prerequisites in place: {', '.join(ok)}")
    h = r.holding
    if h is not None:
        j.fig("holding window", f"{h.decision}{' (AT RISK)' if h.at_risk else ''}")
        if h.at_risk:
            j.warn.append(f"the rollback window is at risk: {h.reason or 'old cannot serve'}")
    return j
