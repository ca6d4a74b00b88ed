"""`switchover gateway`: serve the canary + shadow gateway; `gateway reset` / `gateway state` talk to a running
one over loopback; `switchover metrics-adapter` re-serves the new engine's metrics under the old one's names."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import typer

from switchover.cli.common import console, print_json, run
from switchover.errors import BadInput, Unreachable

app = typer.Typer(
    help="Canary + shadow gateway in front of the old and new engines (hot-reloaded weight, one-line rollback).",
    invoke_without_command=True,
    no_args_is_help=False,
)

_CONFIG = typer.Option(Path("switchover.yaml"), "--config", "-c", help="The migration file with a `gateway:` section.")


@app.callback()
def gateway(
    ctx: typer.Context,
    config: Path = _CONFIG,
    log_prompts: bool = typer.Option(False, "--log-prompts", help="Store prompt text in the ledger (off: never)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging."),
) -> None:
    """Serve until SIGTERM (then drain). Edit `gateway.weight` / `gateway.rollback` in the file (or send SIGHUP)
    to change routing without a restart; an invalid file is rejected and the running config kept.

    Example: switchover gateway --config switchover.yaml
    """
    ctx.obj = {"config": config}
    if ctx.invoked_subcommand is not None:
        return
    from switchover.gateway.server import serve

    left = run(serve(config, log_prompts=log_prompts, verbose=verbose))
    sys.exit(1 if left else 0)


def _admin(config: Path, method: str, path: str) -> dict[str, Any]:
    from switchover.config import load_migration

    m = load_migration(config)
    if m.gateway is None:
        raise BadInput(f"{config}: no `gateway:` section")
    run_dir = m.gateway.resolved_run_dir(config)
    try:
        import orjson

        url = orjson.loads((run_dir / "gateway.json").read_bytes())["url"]
        token = (run_dir / "admin.token").read_text().strip()
    except (OSError, ValueError, KeyError):
        raise Unreachable(f"no running gateway found for {config} (looked in {run_dir})",
                          hint="start one with `switchover gateway --config ...`") from None

    async def call() -> dict[str, Any]:
        import aiohttp

        try:
            async with aiohttp.ClientSession() as s, s.request(
                    method, url + path, headers={"X-Switchover-Admin": token},
                    timeout=aiohttp.ClientTimeout(total=10)) as r:
                body = await r.json(content_type=None)
                if r.status != 200:
                    raise Unreachable(f"{url}{path}: HTTP {r.status}: {body}")
                return dict(body)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise Unreachable(f"{url}{path}: {type(exc).__name__}: {exc}") from None

    return run(call())


@app.command()
def reset(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Clear the kill-switch latch of the running gateway (loopback admin endpoint + token in its run dir).

    Example: switchover gateway --config switchover.yaml reset
    """
    result = _admin(ctx.obj["config"], "POST", "/admin/reset")
    if json_out:
        print_json(result)
    else:
        console.print("kill switch reset" + (" (it was latched)" if result.get("was_latched") else
                                             " (it was not latched)"))


@app.command()
def state(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Weight, rollback, kill switch, in-flight requests and ledger path of the running gateway.

    Example: switchover gateway --config switchover.yaml state --json
    """
    result = _admin(ctx.obj["config"], "GET", "/admin/state")
    if json_out:
        print_json(result)
        return
    ks = result["kill_switch"]
    console.print(f"weight {result['weight']:g}%  rollback {result['rollback']}  in flight {result['in_flight']}"
                  f"  kill switch {'LATCHED: ' + str(ks['reason']) if ks['latched'] else 'armed'}"
                  f"  ledger {result['ledger']} ({result['ledger_rows']} rows)", highlight=False, soft_wrap=True)


def register(root: typer.Typer) -> None:
    """Add `gateway` (and its sub-commands) to the root app."""
    root.add_typer(app, name="gateway")
