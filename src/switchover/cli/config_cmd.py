"""`switchover validate` and `switchover schema`."""

from __future__ import annotations

from pathlib import Path

import typer

from switchover.cli import params
from switchover.cli.common import console, print_json
from switchover.config import load_migration, migration_schema


def register(app: typer.Typer) -> None:
    @app.command()
    def validate(
        file: Path = typer.Argument(..., help="The migration file, e.g. switchover.yaml"),
        json_out: bool = params.json_flag("the resolved configuration"),
    ) -> None:
        """Check a migration file; exit 2 naming the field and line when it is wrong.

        Example: switchover validate switchover.yaml
        """
        migration = load_migration(file)
        if json_out:
            print_json(migration)
            return
        console.print(f"[green]ok[/] {file}: old={migration.old.engine.value} {migration.old.url}  "
                      f"new={migration.new.engine.value} {migration.new.url}", highlight=False)

    @app.command()
    def schema() -> None:
        """Print the JSON Schema of switchover.yaml (for editors and CI linters).

        Example: switchover schema > switchover.schema.json
        """
        print_json(migration_schema())
