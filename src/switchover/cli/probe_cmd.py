"""`switchover probe`: does the new API behave like the old one? Old and new side by side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from switchover import inputs
from switchover.cli import params
from switchover.cli.common import console, err_console, run, show_report
from switchover.errors import BadInput, CheckFailed

if TYPE_CHECKING:  # the probes are imported when the command runs, so `probe --help` stays fast
    from switchover.probe.report import Observation, ProbeReport

_VERDICT_STYLE = {"same": "green", "differs": "yellow", "inconclusive": "dim", "observed": "cyan"}


def _cell(obs: Observation | None) -> str:
    if obs is None:
        return ""
    if obs.status == "skipped":
        return "[dim]skipped[/]"
    if obs.status != "observed":
        return f"[dim]{escape(obs.status)}: {escape(obs.summary[:100])}[/]"
    if obs.profile_match is False:
        return f"{escape(obs.summary)} [magenta](profile predicts {escape(str(obs.expected))})[/]"
    return escape(obs.summary)


def _shown(report: ProbeReport) -> ProbeReport:
    """The report as printed: endpoint URLs and reasons without secrets (a key may sit in a URL's path)."""
    from switchover.redaction import redact

    ends = {
        side: e.model_copy(update={"url": redact(e.url), "reason": e.reason and redact(e.reason)})
        for side, e in (("old", report.old), ("new", report.new))
        if e is not None
    }
    return report.model_copy(update={**ends, "partial_reason": report.partial_reason and redact(report.partial_reason)})


def render(report: ProbeReport) -> None:
    """Rich table: one row per probe, old and new side by side; breaking differences explained below."""
    from rich.table import Table

    two = report.new is not None
    table = Table(title="switchover probe", show_lines=False, expand=True)
    table.add_column("probe", no_wrap=True)
    table.add_column(f"old {report.old.url}", overflow="fold")
    if two:
        assert report.new is not None
        table.add_column(f"new {report.new.url}", overflow="fold")
    table.add_column("verdict", no_wrap=True)
    for r in report.results:
        style = "bold red" if r.breaking_difference else _VERDICT_STYLE[r.verdict]
        verdict = "BREAKING" if r.breaking_difference else r.verdict
        row = [r.id, _cell(r.old)] + ([_cell(r.new)] if two else []) + [f"[{style}]{verdict}[/]"]
        table.add_row(*row)
    console.print(table)
    for info in (report.old, report.new):
        if info is not None and not info.reachable:
            console.print(
                f"[bold red]{escape(info.url)}[/]: {escape(info.reason or '')}", soft_wrap=True, highlight=False
            )
    for r in report.results:
        if r.breaking_difference:
            console.print(
                f"[bold red]{r.id}[/]: {r.title}. [bold]What breaks:[/] {r.breaks}", soft_wrap=True, highlight=False
            )
    counts = report.counts
    console.print(
        " ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
        + f"; breaking differences: {len(report.breaking_differences)}"
        + (
            f"; differs from the engine profile: {', '.join(report.profile_mismatches)}"
            if report.profile_mismatches
            else ""
        ),
        highlight=False,
        soft_wrap=True,
    )


def _list_probes() -> None:
    from rich.table import Table

    from switchover.probe import select

    table = Table(title="probes")
    for col in ("id", "category", "breaking", "request", "observes"):
        table.add_column(col, overflow="fold")
    for p in select():
        table.add_row(p.id, p.category, "yes" if p.breaking else "no", p.request, p.observes)
    console.print(table)


def register(app: typer.Typer) -> None:
    @app.command()
    def probe(
        url: str = typer.Argument(None, help="A single endpoint to probe (instead of --old/--new).", parser=params.URL),
        old: str | None = params.endpoint("old"),
        new: str | None = params.endpoint("new"),
        model: str = params.served_model(" for both sides"),
        config: Path | None = params.config_file(
            "switchover.yaml: take old/new url, engine, model and api_key_env from it.", None
        ),
        old_engine: str | None = typer.Option(
            None,
            help="Engine of the old side (vllm, llamacpp, ...): check against its profile.",
            parser=params.Text(120),
        ),
        new_engine: str | None = typer.Option(
            None, help="Engine of the new side (or of the single URL).", parser=params.Text(120)
        ),
        old_model: str | None = typer.Option(None, help="Model name on the old side (overrides --model)."),
        new_model: str | None = typer.Option(None, help="Model name on the new side (overrides --model)."),
        api: str = typer.Option("chat", help="API to probe: chat or completions."),
        context: int = typer.Option(
            None,
            help="Context length, when the server does not report it.",
            parser=params.count(lo=8, hi=inputs.MAX_TOKENS),
        ),
        only: list[str] = typer.Option(None, "--only", help="Run only these probe ids or categories."),
        skip: list[str] = typer.Option(None, "--skip", help="Skip these probe ids or categories."),
        budget_s: float = typer.Option(
            60.0, "--budget-s", help="Time cap for open-ended generations.", parser=params.SECONDS
        ),
        api_key_env: str | None = params.api_key_env(" (both sides)"),
        list_probes: bool = typer.Option(False, "--list", help="List the probes and exit."),
        json_out: bool = params.json_flag("the report"),
    ) -> None:
        """Probe API behaviour (stop, finish_reason, seed, usage, errors, ...) on old and new, side by side.

        Exit 0: no breaking difference; 1: a probe marked breaking differs; 2: bad input; 3: an endpoint is
        unreachable or went away (the partial report is still printed).

        Example: switchover probe --old http://127.0.0.1:8000 --new http://127.0.0.1:8080 --old-engine vllm
        --new-engine llamacpp --json
        """
        from switchover.config import load_migration
        from switchover.engines import load_profile
        from switchover.probe import ProbeOptions, Target, run_probes, select

        if list_probes:
            _list_probes()
            return
        config = params.discovered_config(config, url, old, new)
        if config is not None:
            if url or old or new:
                raise BadInput("give --config or URLs, not both")
            mig = load_migration(config)
            old, new = mig.old.url, mig.new.url
            old_model, new_model = old_model or mig.old.model, new_model or mig.new.model
            old_engine = old_engine or (mig.old.engine.value if mig.old.engine.value != "openai" else None)
            new_engine = new_engine or (mig.new.engine.value if mig.new.engine.value != "openai" else None)
            api_key_env = api_key_env or mig.old.api_key_env
        if url and (old or new):
            raise BadInput("give either one URL or --old/--new, not both")
        if not url and not old:
            raise BadInput("give a URL, or --old URL --new URL", hint="switchover probe --old URL --new URL")
        if api not in ("chat", "completions"):
            raise BadInput(f"--api must be chat or completions, got {api!r}")
        for e in (old_engine, new_engine):
            if e:
                load_profile(e)  # BadInput naming the known engines
        probes = select(only or None, skip or None)
        endpoint = url or old
        assert endpoint is not None  # refused above when neither is given
        first = Target(endpoint, old_model or model, api_key_env, context, new_engine if url else old_engine)
        second = Target(new, new_model or model, api_key_env, context, new_engine) if new else None
        opts = ProbeOptions(api=api, time_budget_s=budget_s)  # type: ignore[arg-type]
        with err_console.status("probing...") as status:
            report = run(run_probes(first, second, probes, opts, on_progress=lambda m: status.update(m)))
        show_report(_shown(report), json_out, render)
        if report.breaking_differences:
            raise CheckFailed(
                f"{len(report.breaking_differences)} breaking difference(s): " + ", ".join(report.breaking_differences)
            )
