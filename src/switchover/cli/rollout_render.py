"""How `switchover rollout` prints what it found: the status view, a gate report, the judge, the entry
evidence, the rollback prerequisites, the holding window and the client mix (cli/rollout_cmd.py runs the commands)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from switchover.cli.common import console

if TYPE_CHECKING:
    from switchover.rollout.client_defaults import ClientMix
    from switchover.rollout.controller import StatusView
    from switchover.rollout.entry import EntryReport
    from switchover.rollout.gates import GateReport
    from switchover.rollout.holding import HoldingReport, Prerequisite
    from switchover.rollout.judge.panel import JudgeReport

COLOURS = {
    "pass": "green",
    "hold": "yellow",
    "fail": "red",
    "advance": "green",
    "rollback": "red",
    "ok": "green",
    "failed": "red",
    "missing": "red",
    "unverified": "yellow",
    "end": "green",
    "rollback_blocked": "red",
    "open": "white",
    "closing": "green",
    "closed": "dim",
    "extended": "yellow",
}


def when(ts: float | None) -> str:
    if not ts:
        return "-"
    try:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):  # a time no calendar holds (a hand-edited state file)
        return f"{ts:g} s after the epoch"


def print_view(v: StatusView) -> None:
    marks = " → ".join(f"[bold]{s}[/]" if s == v.stage else s for s in ["0%", *v.stages])
    console.print(
        f"{v.status.value}: stage [bold]{v.stage}[/] (new weight {v.weight}%"
        f"{', shadow on' if v.shadow else ''}) since {when(v.entered_at)}",
        highlight=False,
    )
    console.print(marks, highlight=False)
    if v.next_stage:
        console.print(f"next: {v.next_stage}", highlight=False)
    for w in v.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    if v.holding is not None and v.status.value == "holding":
        h = v.holding
        left = [w for w in h.windows if w.status != "closed"]
        console.print(
            f"rollback window open since {when(h.started_at)}; due to end {when(h.ends_at)}; "
            f"open: {', '.join(w.failure_type.value for w in left) or 'none'}"
            f"{'; [red]AT RISK[/]: ' + escape(h.old.reason) if h.at_risk else ''}",
            highlight=False,
        )
    if v.judge is not None:
        print_judge(v.judge)
    for t in v.recent:
        console.print(
            f"  {when(t.ts)} {escape(t.who)} {t.action} {t.from_stage} → {t.to_stage}: {escape(t.why)}",
            highlight=False,
            soft_wrap=True,
        )


def print_report(r: GateReport) -> None:
    table = Table(title=f"gates of stage {r.stage} ({r.stats.source}, window {r.stats.window_s:.0f} s)")
    for col in ("gate", "verdict", "hard", "reason"):
        table.add_column(col)
    for g in r.results:
        table.add_row(
            g.gate.value, f"[{COLOURS[g.verdict]}]{g.verdict}[/]", "yes" if g.hard else "no", escape(g.reason)
        )
    for c in r.custom:
        table.add_row(
            escape(c.name), f"[{COLOURS[c.verdict]}]{c.verdict}[/]", "yes" if c.hard else "no", escape(c.reason)
        )
    if r.results or r.custom:
        console.print(table)
    if r.holding is not None:
        print_holding(r.holding)
    for b in r.blockers:
        console.print(f"[yellow]entry condition:[/] {escape(b)}", highlight=False)
    if r.entry is not None:
        print_entry(r.entry)
    if r.judge is not None:
        print_judge(r.judge)
    for n in r.stats.notes:
        console.print(f"[dim]note: {escape(n)}[/]", highlight=False)
    for w in r.stats.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
    console.print(f"decision: [{COLOURS.get(r.decision, 'yellow')}]{r.decision}[/]")


def print_judge(j: JudgeReport) -> None:
    """Per metric and test: the decision, requests so far, the effect's interval against the floor, distance left."""
    table = Table(title=f"judge (anytime-valid; requests since {when(j.since)}): {j.verdict}")
    for col in ("metric", "test", "decision", "requests old/new", "effect", "interval", "floor", "to decide"):
        table.add_column(col)
    word = {"regress": "fail", "ok": "pass", "undecided": "hold"}
    for d in j.decisions:
        pct = d.unit == "ratio"
        effect = "-" if d.effect is None else f"{d.effect * 100:+.1f} %" if pct else f"{d.effect * 100:+.2f} pp"
        floor = f"{'±' if d.two_sided else '+'}{d.floor * 100:g} {'%' if pct else 'pp'}"
        left = "-" if d.to_decision is None else f"{d.to_decision * 100:.1f} {'points' if pct else 'pp'}"
        table.add_row(
            d.metric,
            d.test,
            f"[{COLOURS[word[d.direction]]}]{d.direction}[/]",
            f"{d.requests_old}/{d.requests_new}",
            effect,
            d.interval.text(d.unit),
            floor,
            left,
        )
    console.print(table)
    for n in j.notes:
        console.print(f"[dim]note: {escape(n)}[/]", highlight=False)


def print_entry(e: EntryReport) -> None:
    table = Table(
        title=f"evidence to enter {e.stage}"
        + ("" if e.enforced else " (rollout.entry.enabled false: reported, not enforced)")
    )
    for col in ("item", "status", "reason", "produced by"):
        table.add_column(col)
    for i in e.items:
        colour = {"pass": "green", "waived": "yellow"}.get(i.status, "red")
        reason = i.reason + (f" [waived: {i.waived}]" if i.waived else "")
        table.add_row(i.id, f"[{colour}]{i.status}[/]", escape(reason), escape(i.command or ""))
    if e.items:
        console.print(table)


def print_prerequisites(pre: list[Prerequisite]) -> None:
    table = Table(title="rollback prerequisites (config, weights, route, monitoring; drill; old ready)")
    for col in ("prerequisite", "status", "required", "detail"):
        table.add_column(col)
    for p in pre:
        table.add_row(p.name, f"[{COLOURS[p.status]}]{p.status}[/]", "yes" if p.required else "no", escape(p.detail))
    console.print(table)


def print_holding(h: HoldingReport) -> None:
    table = Table(title=f"rollback window since {when(h.started_at)} (old: {escape(h.old.url)})")
    for col in ("failure type", "status", "ends", "gates", "why"):
        table.add_column(col)
    for w in h.windows:
        gates = ", ".join(f"{n} [{COLOURS[v]}]{v}[/]" for n, v, _ in w.verdicts()) or "[yellow]unwatched[/]"
        table.add_row(
            w.failure_type.value, f"[{COLOURS[w.status]}]{w.status}[/]", when(w.ends_at), gates, escape(w.reason)
        )
    console.print(table)
    colour = COLOURS[h.old.verdict]
    console.print(
        f"old ready: [{colour}]{h.old.verdict}[/] ({escape(h.old.reason)}; {h.old.checks} checks, "
        f"{h.old.failures} failed)",
        highlight=False,
        soft_wrap=True,
    )
    print_prerequisites(h.prerequisites)
    for text in h.warnings:
        console.print(f"[yellow]warning:[/] {escape(text)}", highlight=False, soft_wrap=True)
    console.print(
        f"holding: [{COLOURS.get(h.decision, 'yellow')}]{h.decision}[/] — {escape(h.reason)}",
        highlight=False,
        soft_wrap=True,
    )


def print_clients(mix: ClientMix) -> None:
    """What the clients send and which of their defaults behave differently on new (rollout/client_defaults.py)."""
    if not mix.requests:
        console.print("clients: no request row carries the client's fields", highlight=False)
        return
    used = ", ".join(f"{f.field} {f.share_set:.0%}" for f in mix.fields if f.set)
    console.print(
        f"clients ({mix.requests} requests) set: {used or 'no sampling field'}", highlight=False, markup=False
    )
    for sfx in mix.suffixes:
        console.print(
            f"  a fixed {sfx.role} ending on {sfx.share:.0%} of requests (hash {sfx.hash})",
            highlight=False,
            markup=False,
        )
    for f in mix.findings:
        console.print(f"[yellow]differs on new:[/] {escape(f.detail)}", highlight=False, soft_wrap=True)
    for n in mix.notes:
        console.print(f"[dim]{escape(n)}[/]", highlight=False, soft_wrap=True)
