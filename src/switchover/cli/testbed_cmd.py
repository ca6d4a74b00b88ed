"""`switchover testbed setup|up|status|down`: the real-engine test bed."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from switchover.cli import params
from switchover.cli.common import console, err_console, print_json, run
from switchover.cli.verbs import literal
from switchover.testbed.layout import Layout, default_root

if TYPE_CHECKING:  # the installer and process control are imported when a command runs (`testbed --help` is fast)
    from switchover.testbed.install import Step

# read from testbed/processes.py's source for the help (importing it imports readiness, pydantic models, ...)
DEFAULT_OLD_PORT: int = literal("switchover.testbed.processes", "DEFAULT_OLD_PORT")
DEFAULT_NEW_PORT: int = literal("switchover.testbed.processes", "DEFAULT_NEW_PORT")

app = typer.Typer(
    help="Install, start and stop the real-engine test bed (vLLM CPU + llama-server).\n\n"
    "Example: switchover testbed setup && switchover testbed up --model smollm2",
    no_args_is_help=True,
)

DirOpt = typer.Option(
    None,
    "--dir",
    help=f"Test-bed folder (default: $SWITCHOVER_TESTBED_DIR or {default_root()}).",
    parser=params.OUT_DIR,
)
NameOpt = typer.Option("default", "--name", help="Instance name, so several beds can run side by side.")


@app.command()
def setup(
    root: Path = DirOpt,
    smollm2: bool = typer.Option(True, "--smollm2/--no-smollm2", help="Also fetch and convert SmolLM2-135M."),
) -> None:
    """Install vLLM CPU and llama-server and build the models into the cache (idempotent).

    Example: switchover testbed setup        # ~9 min cold on 2 cores, ~1 s when cached
    """
    from switchover.runs import prepare_folder
    from switchover.testbed.install import Installer

    layout = Layout.default(root)
    prepare_folder(layout.root)
    t0 = time.monotonic()

    def on_event(kind: str, step: Step, detail: str) -> None:
        stamp = f"[dim]{time.monotonic() - t0:6.0f}s[/]"
        if kind == "cached":
            err_console.print(f"{stamp} [green]✓[/] {step.title} [dim](cached)[/]", highlight=False)
        elif kind == "start":
            err_console.print(f"{stamp} [yellow]…[/] {step.title}", highlight=False)
        elif kind == "progress":
            err_console.print(f"{stamp}   {step.key}: {escape(detail)}", highlight=False)
        else:
            err_console.print(f"{stamp} [green]✓[/] {step.title} [dim]({escape(detail)})[/]", highlight=False)

    Installer(layout, with_smollm2=smollm2, on_event=on_event).run()
    console.print(f"test bed ready in {layout.root} ({time.monotonic() - t0:.0f} s)", highlight=False, markup=False)


@app.command()
def up(
    model: str = typer.Option("tiny", help="tiny | tiny-v2 | smollm2"),
    old_port: int = typer.Option(DEFAULT_OLD_PORT, help="Port for old = vLLM CPU.", parser=params.PORT),
    new_port: int = typer.Option(DEFAULT_NEW_PORT, help="Port for new = llama-server.", parser=params.PORT),
    timeout: float = typer.Option(
        300.0, help="Seconds to wait for both engines to generate a token.", parser=params.SECONDS
    ),
    root: Path = DirOpt,
    name: str = NameOpt,
    json_out: bool = params.json_flag("the started engines"),
) -> None:
    """Start old = vLLM CPU and new = llama-server on 127.0.0.1 with the same model; wait until ready.

    Example: switchover testbed up --model smollm2
    """
    from switchover.runs import prepare_folder
    from switchover.testbed import processes

    layout = Layout.default(root)
    prepare_folder(layout.root)
    state, results = processes.up(
        layout,
        model=model,
        name=name,
        old_port=old_port,
        new_port=new_port,
        timeout_s=timeout,
        on_event=lambda m: err_console.print(m, highlight=False, markup=False),
    )
    if json_out:
        print_json(state)
        return
    for proc, res in zip(state.engines, results, strict=True):
        console.print(
            f"{proc.role}: {proc.url}  ({proc.engine}, model {proc.served_name!r}; {res.reason})",
            highlight=False,
            markup=False,
        )
    console.print(f"stop with: switchover testbed down{'' if name == 'default' else ' --name ' + name}")


@app.command()
def status(
    root: Path = DirOpt, name: str = NameOpt, json_out: bool = params.json_flag("the engines and their states")
) -> None:
    """Show the engines this bed started and whether each can generate now. Exit 1 when one is not ready.

    Example: switchover testbed status --json
    """
    from switchover.testbed import processes

    rows = run(processes.status(Layout.default(root), name))
    if json_out:
        print_json(rows)
        return
    if not rows:
        console.print(f"test bed {name!r} is not running")
        return
    table = Table("role", "engine", "url", "pid", "state", "reason")
    for r in rows:
        table.add_row(*(escape(str(r[k])) for k in ("role", "engine", "url", "pid", "state", "reason")))
    console.print(table)
    if any(r["state"] != "ready" for r in rows):
        sys.exit(1)


@app.command()
def down(root: Path = DirOpt, name: str = NameOpt) -> None:
    """Stop exactly the processes `up` started (matched by pid and command line), nothing else.

    Example: switchover testbed down --name ci
    """
    from switchover.testbed import processes

    stopped = processes.down(Layout.default(root), name=name)
    console.print("stopped " + ", ".join(stopped) if stopped else f"test bed {name!r} was not running")
