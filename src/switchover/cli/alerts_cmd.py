"""`switchover alerts translate`: Prometheus rules from the old engine's metrics to the new engine's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from switchover.cli import params
from switchover.cli.common import console, err_console, print_json
from switchover.errors import BadInput, ExitCode

if TYPE_CHECKING:  # the translation machinery is imported when the command runs, so `alerts --help` stays fast
    from rich.console import Console

    from switchover.alerts.report import TranslationReport

app = typer.Typer(
    help="Alert rules across engines and releases: translate Prometheus rules to the new engine's "
    "metrics.\n\nExample: switchover alerts translate rules.yaml --from vllm@0.6.3 "
    "--to sglang@0.5.5 -o new-rules.yaml",
    no_args_is_help=True,
)
SEVERITY = {"error": "red", "warning": "yellow", "info": "dim"}
STATUSES = ("translated", "unchanged", "partial", "untranslated", "unverified")


def _side(engine: str, version: str | None) -> str:
    return f"{engine} {version}" if version else engine


def _print(report: TranslationReport, out: Console) -> None:
    from rich.table import Table

    counts = {s: sum(1 for r in report.rules if r.status == s) for s in STATUSES}
    mode = " (names kept for the metrics adapter)" if report.mode == "adapter" else ""
    out.print(
        f"{_side(report.source_engine, report.source_version)} → "
        f"{_side(report.target_engine, report.target_version)}{mode}: "
        + ", ".join(f"{v} {k}" for k, v in counts.items() if v or k in ("translated", "untranslated")),
        highlight=False,
    )
    left = [r for r in report.rules if r.series_left]
    for r in left:
        out.print(
            f"  {r.group}/{r.rule} ({r.status}) still reads: {', '.join(r.series_left)}",
            highlight=False,
            soft_wrap=True,
        )
    if report.findings:
        table = Table(title="findings")
        for col in ("rule", "severity", "what"):
            table.add_column(col)
        for f in report.findings:
            table.add_row(f"{f.group}/{f.rule}", f"[{SEVERITY[f.severity]}]{f.severity}[/]", f.detail)
        out.print(table)
    if report.thresholds:
        table = Table(title="thresholds tuned to the old engine (re-baseline them)")
        for col in ("rule", "metric", "threshold", "measured shift", "suggested"):
            table.add_column(col)
        for t in report.thresholds:
            q = f" q{t.quantile:g}" if t.quantile is not None else ""
            sug = f"{t.suggested:.4g}" if t.suggested is not None else "-"
            if t.suggested_range is not None:
                sug += f" ({t.suggested_range[0]:.4g}–{t.suggested_range[1]:.4g})"
            table.add_row(f"{t.group}/{t.rule}", f"{t.intent}{q}", f"{t.comparison} {t.value:g}", t.note, sug)
        out.print(table)
    for n in report.notes:
        out.print(f"note: {n}", highlight=False, soft_wrap=True)


@app.command()
def translate(
    rules: Path = typer.Argument(..., help="Prometheus rule file (groups: [{name, rules: [...]}])."),
    from_engine: str = typer.Option(
        ...,
        "--from",
        help="Engine the rules were written for (the old one), with its "
        "release: vllm@0.6.3 or vllm==0.6.3 (unstated: the newest release read, said).",
    ),
    to_engine: str = typer.Option(
        ...,
        "--to",
        help="Engine and release whose metrics the rules should read (the new "
        "one): sglang@0.5.5; the same engine at another release is a migration too.",
    ),
    adapter: bool = typer.Option(
        False,
        "--adapter",
        help="Keep the old names: check the rules against what "
        "`switchover metrics-adapter --from NEW --to OLD` serves instead of renaming.",
    ),
    bench: Path = typer.Option(
        None,
        "--bench",
        help="A/B bench run directory: list each distribution-dependent threshold with the measured new/old shift.",
    ),
    keep_unknown: bool = typer.Option(
        False,
        "--keep-unknown",
        help="Keep rules that would watch a series the "
        "target release does not serve (annotated, reported as warnings) instead of "
        "failing (exit 1).",
    ),
    output: Path = typer.Option(None, "--output", "-o", help="Write the translated rules here (default: stdout)."),
    json_out: bool = params.json_flag("the report", "with the rules when no -o"),
) -> None:
    """Rewrite alerting/recording rules from one engine release's metric names, units and buckets to another's
    (another engine, or the same engine at another release); every series a rule reads afterwards must be served by
    the target release, else the rule is an error (exit 1; --keep-unknown: a warning); list thresholds tuned to the
    old engine.

    Example: switchover alerts translate rules.yaml --from vllm@0.6.3 --to sglang@0.5.5 -o sglang-rules.yaml
    """
    from switchover.alerts.release import engine_release
    from switchover.alerts.shift import BenchShifts
    from switchover.alerts.translate import dump_rules, translate_rules
    from switchover.atomicfile import write_atomic

    if not rules.is_file():
        raise BadInput(f"RULES: {rules}: no such file", hint="give the Prometheus rule file to translate")
    src, dst = engine_release(from_engine, "--from"), engine_release(to_engine, "--to")
    if src.engine == dst.engine and src.version == dst.version:
        raise BadInput(
            f"--from and --to are both {src.label}: nothing to translate",
            hint="give the releases, e.g. --from vllm@0.6.3 --to vllm@0.11.0",
        )
    shifts = BenchShifts(bench, src.engine, dst.engine) if bench is not None else None
    data, report = translate_rules(
        rules, src, dst, mode="adapter" if adapter else "rename", shifts=shifts, keep_unknown=keep_unknown
    )
    text = dump_rules(data)
    if output is not None:
        write_atomic(output, text)
    if json_out:
        payload = report.model_dump(mode="json")
        payload["output_file"] = str(output) if output is not None else None
        payload["rules_yaml"] = None if output is not None else text
        print_json(payload)
    elif output is None:
        sys.stdout.write(text)
        _print(report, err_console)
    else:
        _print(report, console)
        console.print(f"written: {output}", highlight=False)
    sys.exit(int(ExitCode.FAILED if report.errors else ExitCode.OK))
