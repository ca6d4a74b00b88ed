"""`switchover validate` and `switchover schema [NAME]`."""

from __future__ import annotations

from pathlib import Path

import typer

from switchover.cli import params
from switchover.cli.common import console, print_json
from switchover.errors import BadInput


def register(app: typer.Typer) -> None:
    @app.command()
    def validate(
        file: Path = typer.Argument(params.MIGRATION_FILE, help="The migration file (default: ./switchover.yaml)."),
        json_out: bool = params.json_flag("the resolved configuration"),
    ) -> None:
        """Check a migration file; exit 2 naming the field and line when it is wrong.

        Example: switchover validate switchover.yaml
        """
        from switchover.config import load_migration

        migration = load_migration(file)
        if json_out:
            print_json(migration)
            return
        console.print(
            f"[green]ok[/] {file}: old={migration.old.engine.value} {migration.old.url}  "
            f"new={migration.new.engine.value} {migration.new.url}",
            highlight=False,
        )

    @app.command()
    def schema(
        name: str | None = typer.Argument(
            None,
            show_default="migration",
            help="migration (switchover.yaml), or a command whose --json output to "
            "describe, its words joined by '-': probe, plan-capacity, rollout-gates, ...",
        ),
        list_names: bool = typer.Option(False, "--list", help="List the names, each with what it is, and exit."),
        json_out: bool = params.json_flag("the list", "with --list"),
    ) -> None:
        """Print the JSON Schema of switchover.yaml (for editors and CI linters), or of what a command prints with
        --json (for the programs that read it). `--list` names them all.

        Example: switchover schema > switchover.schema.json; switchover schema plan-capacity
        """
        from switchover import outputs

        if list_names and name is not None:
            raise BadInput(f"--list takes no NAME (got {name[:60]!r})", hint="switchover schema --list")
        if json_out and not list_names:
            raise BadInput("--json goes with --list (a schema is printed as JSON anyway)")
        if list_names:
            if json_out:
                print_json([{"name": n, "what": o.what} for n, o in outputs.OUTPUTS.items()])
            else:
                console.print(
                    "\n".join(f"{n:<22} {o.what}" for n, o in outputs.OUTPUTS.items()),
                    highlight=False,
                    markup=False,
                    soft_wrap=True,
                )
            return
        print_json(outputs.schema("migration" if name is None else name))
