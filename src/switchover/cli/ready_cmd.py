"""`switchover ready URL`: a 1-token generation under a time budget (usable as a Kubernetes exec probe)."""

from __future__ import annotations

import sys

import typer
from rich.markup import escape

from switchover.cli import params
from switchover.cli.common import console, print_json, run
from switchover.cli.verbs import literal
from switchover.errors import BadInput

# read from engines/names.py's source (importing it imports the engines package and every profile)
ENGINE_NAMES = ", ".join(literal("switchover.engines.names", "ENGINES"))


def _engine_ref(text: str | None) -> tuple[str | None, str | None]:
    """--engine as (profile name, release or None); BadInput (exit 2) for an unknown engine or a malformed release."""
    if text is None:
        return None, None
    if not text.strip():
        raise BadInput("--engine is empty", hint=f"name one of {ENGINE_NAMES}, or leave --engine out")
    from switchover.engines.profile import load_profile
    from switchover.engines.versions import split_engine_ref

    try:
        name, version = split_engine_ref(text)
    except ValueError as exc:
        raise BadInput(f"--engine: {exc}") from None
    return load_profile(name, version).name, version


def register(app: typer.Typer) -> None:
    @app.command()
    def ready(
        url: str = typer.Argument(..., help="Base URL of the server, e.g. http://127.0.0.1:8000", parser=params.URL),
        model: str = params.served_model(" to request"),
        max_ms: float = typer.Option(
            5000.0, "--max-ms", help="Budget for the 1-token generation, in ms.", parser=params.MILLISECONDS
        ),
        api_key_env: str = params.api_key_env(),
        engine: str | None = typer.Option(
            None,
            "--engine",
            help=f"Its engine ({ENGINE_NAMES}), optionally "
            "ENGINE@VERSION: its profile tells a loading answer apart (default: any "
            "profile's loading answer is named as that engine's).",
        ),
        json_out: bool = params.json_flag(),
    ) -> None:
        """Is this instance able to generate a token right now? Exit 0 ready, 1 not ready, 3 unreachable.

        Example: switchover ready http://127.0.0.1:8000 --max-ms 2000
        """
        from switchover.redaction import redact
        from switchover.wire.readiness import check_ready

        name, version = _engine_ref(engine)
        result = run(
            check_ready(url, model=model, max_ms=max_ms, api_key_env=api_key_env, engine=name, engine_version=version)
        )
        if json_out:
            print_json(result.model_copy(update={"url": redact(result.url)}))  # a key may sit in a URL's path
        else:
            colour = "green" if result.ready else "red"
            console.print(
                f"[{colour}]{result.state.value}[/] {escape(redact(url))}: {escape(result.reason)}",
                highlight=False,
                soft_wrap=True,
            )
        sys.exit(int(result.exit_code))
