"""`switchover doctor [SYMPTOM]`: symptom → likely cause → the switchover command that confirms it."""

from __future__ import annotations

import typer

from switchover.cli import params
from switchover.cli.common import console, print_json
from switchover.doctor import SYMPTOMS, Diagnosis, diagnose
from switchover.errors import BadInput


def _print(d: Diagnosis, first: bool) -> None:
    s = d.symptom
    console.print(f"[bold]{s.symptom}[/] [dim]({s.key}, match {d.score:.2f})[/]", highlight=False)
    for i, c in enumerate(s.causes, 1):
        console.print(f"  {i}. likely cause: {c.cause}", highlight=False, soft_wrap=True)
        for cmd in c.confirm:
            console.print(f"     confirm: [cyan]{cmd}[/]", highlight=False, soft_wrap=True)
        console.print(f"     fix: {c.fix}", highlight=False, soft_wrap=True)
        console.print(f"     [dim]source: {c.source}[/]", highlight=False)
    if first:
        console.print()


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(
        symptom: str = typer.Argument(None, help="What you see, in your words; omit to list known symptoms."),
        limit: int = typer.Option(1, "--limit", "-n", help="How many matching symptoms to show.",
                                  parser=params.count(hi=100)),
        json_out: bool = params.json_flag("the matches"),
    ) -> None:
        """Symptom → likely cause → the switchover command that confirms it (seeds 000 and 001).

        Example: switchover doctor "p99 went up but qps is flat"
        """
        if not symptom:
            if json_out:
                print_json([s.model_dump() for s in SYMPTOMS])
            else:
                for s in SYMPTOMS:
                    console.print(f"[bold]{s.key}[/]: {s.symptom}", highlight=False)
            return
        found = diagnose(symptom, limit=limit)
        if not found:
            raise BadInput(
                f"no known symptom matches {symptom!r}",
                hint="`switchover doctor` lists them: " + ", ".join(s.key for s in SYMPTOMS),
            )
        if json_out:
            print_json([d.model_dump() for d in found])
            return
        for i, d in enumerate(found):
            _print(d, i < len(found) - 1)
