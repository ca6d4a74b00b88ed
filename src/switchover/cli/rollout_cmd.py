"""`switchover rollout ...`: staged rollout driven by gates over the gateway's ledger or Prometheus."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import typer
from rich.markup import escape
from rich.table import Table

from switchover import inputs
from switchover.cli import params
from switchover.cli import rollout_render as render
from switchover.cli.common import console, print_json
from switchover.errors import BadInput, ExitCode, Unreachable
from switchover.rollout.abandon import ABANDON_CRITERIA

if TYPE_CHECKING:  # the machinery is imported by the commands that run, so `rollout --help` stays quick
    from switchover.rollout.controller import ActionResult, Rollout

app = typer.Typer(
    help="Staged rollout: shadow → 5 → 20 → 50 → 100 % → holding, gated, audited, reversible.\n\n"
    "Example: switchover rollout advance -c switchover.yaml -m 'shadow clean for 24 h'",
    no_args_is_help=True,
)

CONFIG = params.config_file("The migration file the gateway watches.")
LEDGER = typer.Option(None, "--ledger", help="Gateway run directory (default: rollout.ledger or gateway.run_dir).")
JSON = params.json_flag()
REASON = typer.Option(..., "--reason", "-m", help="Why, for the audit log.")
FAILED_ACTIONS = ("hold", "auto_rollback", "refused", "rollback_blocked")


def _rollout(config: Path, ledger: Path | None = None) -> Rollout:
    """The rollout of the migration file at `config`, read and validated here, once per command."""
    from switchover.config import load_migration
    from switchover.rollout.controller import Rollout

    if ledger is not None and not ledger.exists():  # typed by the user: a typo, unlike a run dir not written yet
        raise BadInput(
            f"--ledger {ledger}: no such file or directory",
            hint="point --ledger at the gateway's run_dir (ledger-NNNNN.jsonl files)",
        )
    if ledger is not None and not (ledger.is_dir() or ledger.is_file()):  # a FIFO or a device: never read
        from switchover.ledger_files import file_kind

        raise BadInput(
            f"--ledger {ledger}: {file_kind(ledger.stat().st_mode)}, not a ledger file or run directory",
            hint="point --ledger at the gateway's run_dir (ledger-NNNNN.jsonl files)",
        )
    return Rollout(load_migration(config), config, ledger=ledger)


def _finish(res: ActionResult, json_out: bool) -> None:
    if json_out:
        print_json(res)
    else:
        if res.report is not None:
            render.print_report(res.report)
        colour = {"advance": "green", "hold": "yellow", "none": "white", "holding_end": "green"}.get(res.action, "red")
        console.print(f"[{colour}]{escape(res.message)}[/]", highlight=False, soft_wrap=True)
    failed = res.action in FAILED_ACTIONS
    sys.exit(int(ExitCode.FAILED if failed else ExitCode.OK))


@app.command()
def init(
    config: Path = CONFIG,
    print_only: bool = typer.Option(False, "--print", help="Print the section instead of adding it."),
) -> None:
    """Add the checklist schedule as the rollout: section of a migration file that has none: shadow over a daily
    peak, 5 % for a day, 20 % to day three and 50 % to day seven with stratified spot checks and per-task-type gates,
    100 % with old kept warm 48 h; any task type worse goes back one stage (docs/rollout.md, stage defaults).

    Example: switchover rollout init -c switchover.yaml
    """
    from switchover.rollout.schedule import SECTION, write_schedule

    if print_only:
        sys.stdout.write(SECTION)
        return
    if not config.is_file():
        raise BadInput(f"{config}: no such file", hint="write old: and new: first, or use --print")
    write_schedule(config)
    console.print(
        f"added the checklist schedule to {escape(str(config))}; set gateway.review.pairs_per_day (e.g. "
        "200) so the 20 % and 50 % stages have spot-check ratings",
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def status(config: Path = CONFIG, json_out: bool = JSON) -> None:
    """Where the rollout stands, and the last audit-log lines.

    Example: switchover rollout status -c switchover.yaml
    """
    view = _rollout(config).view(judge=True)
    print_json(view) if json_out else render.print_view(view)


@app.command()
def gates(config: Path = CONFIG, ledger: Path = LEDGER, json_out: bool = JSON) -> None:
    """Judge the current stage's gates without changing anything. Exit 0 pass, 1 hold or fail.

    Example: switchover rollout gates -c switchover.yaml --json
    """
    report = _rollout(config, ledger=ledger).gate_report()
    if json_out:
        print_json(report)
    else:
        render.print_report(report)
        console.print("[dim](read-only: `rollout advance` or `rollout watch` act on the decision)[/]")
    sys.exit(int(ExitCode.OK if report.decision == "advance" else ExitCode.FAILED))


@app.command()
def advance(
    config: Path = CONFIG,
    ledger: Path = LEDGER,
    reason: str = typer.Option(None, "--reason", "-m", help="Why, for the audit log (required with --waive)."),
    force: bool = typer.Option(
        False,
        "--force",
        help="Advance past a hold (never past a failed hard gate, missing entry evidence or a stage's min_duration_s).",
    ),
    waive: list[str] = typer.Option(
        [],
        "--waive",
        help="Repeatable: enter without this entry item (e.g. "
        "rollout.entry_check, precanary.cache_key); --reason says why; audited.",
    ),
    json_out: bool = JSON,
) -> None:
    """Go to the next stage if the gates pass and its entry evidence is there (a passing check before shadow; the
    pre-canary evidence before the first weighted stage; the cost per request before the large stage). A failed
    hard gate rolls back instead. Exit 1 on hold, refusal or rollback.

    Example: switchover rollout advance -c switchover.yaml -m "shadow clean for 24 h"
    """
    if waive and not (reason or "").strip():
        raise BadInput("--waive needs --reason saying why the evidence is not needed")
    waivers = {item: reason for item in waive}
    _finish(
        _rollout(config, ledger=ledger).advance(why=reason or "gates passed", force=force, waivers=waivers), json_out
    )


@app.command()
def rollback(
    config: Path = CONFIG,
    to: str = typer.Option(
        None,
        "--to",
        help="previous (one stage back) or zero (0 %, all old); default: previous, or "
        "rollout.holding.on_fail (zero) inside the rollback window.",
    ),
    reason: str = REASON,
    force: bool = typer.Option(False, "--force", help="Roll back even when old fails its readiness check."),
    json_out: bool = JSON,
) -> None:
    """Roll back by hand: one stage, or to 0 % (gateway.rollback: true). Inside the rollback window after 100 %
    old's readiness is checked first and an unready old is refused (exit 1) unless --force.

    Example: switchover rollout rollback --to zero -m "wrong answers reported by support"
    """
    if to is not None and to not in ("previous", "zero"):
        raise BadInput(f"--to must be 'previous' or 'zero', got {to!r}")
    rollout = _rollout(config)
    state = rollout.state()
    if state.index < 0:  # already all old: the state a rollback asks for, so an emergency script can run it again
        console.print(
            f"nothing to roll back: the rollout is at 0 % ({state.status.value}); all traffic is on old",
            highlight=False,
        )
        return
    _finish(rollout.rollback(to=to, why=reason, force=force), json_out)  # type: ignore[arg-type]


@app.command()
def holding(
    config: Path = CONFIG,
    ledger: Path = LEDGER,
    check_old: bool = typer.Option(False, "--check-old", help="Check old's readiness now (else when it is due)."),
    json_out: bool = JSON,
) -> None:
    """The rollback window after 100 %: each failure type's window and gates, old's readiness, the rollback
    prerequisites and the last drill. Changes nothing but old's check log. Exit 1 when at risk or failing.

    Example: switchover rollout holding -c switchover.yaml --check-old
    """
    rollout = _rollout(config, ledger=ledger)
    state = rollout.state()
    if state.holding is None or state.status.value != "holding":  # no window yet: a state, not bad input (0)
        line = (
            f"no rollback window yet: the rollout is {state.status.value} at stage {state.stage_name}; it opens "
            "when the last stage (weight 100) is entered (`switchover rollout prerequisites` lists what a "
            "rollback needs now)"
        )
        if json_out:
            print_json({"holding": None, "status": state.status.value, "stage": state.stage_name, "message": line})
        else:
            console.print(escape(line), highlight=False, soft_wrap=True)
        return
    rollout.holding.check_old(force=check_old)
    report = rollout.holding.gate_report(state).holding
    assert report is not None
    print_json(report) if json_out else render.print_holding(report)
    bad = report.at_risk or report.decision in ("rollback", "rollback_blocked")
    sys.exit(int(ExitCode.FAILED if bad else ExitCode.OK))


@app.command()
def prerequisites(config: Path = CONFIG, json_out: bool = JSON) -> None:
    """What a rollback needs, checked now (docs/checklist.md#rollout.rollback): old's launch config, weights, the
    route line, monitoring, the last drill, old's readiness (a fresh 1-token check). Exit 1 when a required one fails
    or is missing.

    Example: switchover rollout prerequisites -c switchover.yaml --json
    """
    rollout = _rollout(config)
    rollout.holding.check_old(force=True)
    pre = rollout.holding.prerequisites(rollout.holding.old_view(rollout.state()))
    if json_out:
        print_json([p.model_dump(mode="json") for p in pre])
    else:
        render.print_prerequisites(pre)
    sys.exit(int(ExitCode.FAILED if any(p.blocks for p in pre) else ExitCode.OK))


_CRITERIA_HELP = "; ".join(f"{c.key}: {c.text}" for c in ABANDON_CRITERIA)


@app.command()
def abandon(
    config: Path = CONFIG,
    criterion: list[str] = typer.Option([], "--criterion", help=f"Repeatable. {_CRITERIA_HELP}"),
    reason: str = REASON,
    force: bool = typer.Option(False, "--force", help="Abandon with fewer than two criteria."),
    json_out: bool = JSON,
) -> None:
    """Call the migration off (docs/rollout.md: when two criteria hold); everything goes back to old.

    Example: switchover rollout abandon --criterion hard_metrics --criterion narrow_gain -m "TTFT x3"
    """
    _finish(_rollout(config).abandon(criteria=criterion, why=reason, force=force), json_out)


@app.command()
def reset(config: Path = CONFIG, reason: str = REASON, json_out: bool = JSON) -> None:
    """Start over at 0 % with the stages now in switchover.yaml (the audit log is kept).

    Example: switchover rollout reset -m "new engine build 2026-11-30"
    """
    _finish(_rollout(config).reset(why=reason), json_out)


def _check_or_hold(
    rollout: Rollout, auto_advance: bool, tick: str, results: list[dict[str, object]] | None
) -> ActionResult | None:
    """One watch tick; None (a hold, said) when its evidence could not be reached."""
    try:
        return rollout.check(auto_advance=auto_advance, why="watch: every gate passed")
    except Unreachable as exc:
        if results is None:
            console.print(f"{tick} hold: {escape(exc.message)}", highlight=False, soft_wrap=True)
        else:
            results.append({"check": tick, "hold": exc.message})
        return None


@app.command()
def watch(
    config: Path = CONFIG,
    ledger: Path = LEDGER,
    interval: float = typer.Option(10.0, "--interval", parser=params.SECONDS, help="Seconds between checks."),
    max_checks: int = typer.Option(
        60, "--max-checks", parser=params.count(hi=1_000_000), help="Stop after this many checks (bounded)."
    ),
    auto_advance: bool = typer.Option(False, "--auto-advance", help="Advance whenever every gate passes."),
    json_out: bool = JSON,
) -> None:
    """Check the gates every --interval seconds; roll back at once on a failed hard gate. Exit 1 if it did.

    Example: switchover rollout watch -c switchover.yaml --interval 5 --max-checks 120 --auto-advance
    """
    if interval <= 0 or max_checks <= 0:
        raise BadInput("--interval and --max-checks must be positive")
    rollout = _rollout(config, ledger=ledger)
    rolled_back = False
    results: list[dict[str, object]] = []  # only for --json: a long watch must not keep every report
    shown: list[str] = []
    unreachable = 0
    for i in range(max_checks):
        res = _check_or_hold(rollout, auto_advance, f"[{i + 1}/{max_checks}]", results if json_out else None)
        if res is None:  # one failed scrape must not end the watch (and its automatic rollback)
            unreachable += 1
            if i + 1 < max_checks:
                time.sleep(interval)
            continue
        if json_out:
            results.append(res.model_dump(mode="json"))
        if not json_out:
            console.print(f"[{i + 1}/{max_checks}] {escape(res.message)}", highlight=False, soft_wrap=True)
            warnings = res.report.stats.warnings if res.report is not None else []
            if warnings != shown:  # say it once, and again when it changes
                for w in warnings:
                    console.print(f"  [yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
                shown = warnings
        if res.action == "auto_rollback":
            rolled_back = True
            break
        if res.action == "rollback_blocked":
            rolled_back = True  # exit 1 at the end; keep checking: old may come back and the rollback go through
        if res.action == "idle" or res.state.status.value == "complete":
            break
        if i + 1 < max_checks:
            time.sleep(interval)
    if json_out:
        print_json(results)
    if unreachable == max_checks:
        raise Unreachable(f"all {max_checks} checks failed to reach their evidence; nothing was judged")
    sys.exit(int(ExitCode.FAILED if rolled_back else ExitCode.OK))


@app.command()
def compare(
    config: Path = CONFIG,
    ledger: Path = LEDGER,
    mode: str = typer.Option("shadow", "--mode", help="shadow (mirrored vs primary) or arms (new vs old)."),
    since: float = typer.Option(
        0.0,
        "--since",
        parser=params.non_negative(inputs.MAX_SECONDS),
        help="Only rows from the last N seconds (0: all).",
    ),
    json_out: bool = JSON,
) -> None:
    """Old against new, metric by metric, with KS / Mann-Whitney / chi-square beyond the A/A noise.

    Example: switchover rollout compare -c switchover.yaml --mode shadow --json
    """
    from switchover.ledger_files import LedgerSkips, stream_ledger_rows
    from switchover.rollout.client_defaults import ClientMixCounter, client_mix
    from switchover.rollout.compare import compare_samples, samples_from_ledger

    if mode not in ("shadow", "arms"):
        raise BadInput(f"--mode must be 'shadow' or 'arms', got {mode!r}")
    rollout = _rollout(config, ledger=ledger)
    th = rollout.settings.gates
    skipped = LedgerSkips()
    rows = stream_ledger_rows(rollout.ledger_path(), time.time() - since if since > 0 else None, skipped)
    kind: Literal["shadow", "arms"] = "shadow" if mode == "shadow" else "arms"
    clients = ClientMixCounter()  # what the clients send, counted in the same pass (docs/rollout.md#client-defaults)
    old, new = samples_from_ledger(clients.watch(rows), kind)  # streamed: the samples are kept, not the rows
    report = compare_samples(
        old, new, mode=kind, alpha=th.alpha, noise_margin=th.noise_margin, min_samples=th.min_samples
    )
    report.ledger_bad_lines = skipped.bad_lines
    note = skipped.note()
    if note:
        report.notes.append(note)
    mig = rollout.migration
    mix = client_mix(clients, _engine(mig.old), _engine(mig.new), mig.old.engine_version, mig.new.engine_version)
    if json_out:
        print_json({**report.model_dump(mode="json"), "clients": mix.model_dump(mode="json")})
        return
    table = Table(title=f"{mode}: old vs new, alpha {th.alpha:g}, A/A noise margin {th.noise_margin:g}")
    for col in ("metric", "verdict", "old", "new", "why"):
        table.add_column(col)
    for m in report.metrics:
        colour = {"same": "green", "differs": "red"}.get(m.verdict, "yellow")
        if m.kind == "continuous":
            o = ", ".join(f"{k} {v:.1f}" for k, v in m.percentiles_old.items())
            n = ", ".join(f"{k} {v:.1f}" for k, v in m.percentiles_new.items())
        else:
            o = ", ".join(f"{k} {v:.0%}" for k, v in m.shares_old.items())
            n = ", ".join(f"{k} {v:.0%}" for k, v in m.shares_new.items())
        table.add_row(m.metric, f"[{colour}]{m.verdict}[/]", o or "-", n or "-", escape(m.reason))
    console.print(table)
    for w in report.notes:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
    render.print_clients(mix)


def _engine(ep: Any) -> str | None:
    return None if ep.engine.value == "openai" else str(ep.engine.value)
