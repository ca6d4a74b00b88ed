"""`switchover gateway`: serve the canary + shadow gateway; `gateway reset` / `gateway state` talk to a running
one over loopback; `switchover metrics-adapter` re-serves the new engine's metrics under the old one's names."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import typer
from rich.markup import escape

from switchover.cli import params
from switchover.cli.common import console, print_json, run
from switchover.errors import BadInput, Unreachable

app = typer.Typer(invoke_without_command=True, no_args_is_help=False)

_CONFIG = params.config_file("The migration file with a `gateway:` section.")
MAX_ADMIN_ANSWER = 1 << 20  # /admin/state is a few hundred bytes


@app.callback()
def gateway(
    ctx: typer.Context,
    config: Path = _CONFIG,
    log_prompts: bool = typer.Option(False, "--log-prompts", help="Store prompt text in the ledger (off: never)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging."),
) -> None:
    """Canary + shadow gateway in front of the old and new engines; serves until SIGTERM, then drains.

    Edit `gateway.weight` or `gateway.rollback` in the file (or send SIGHUP) to change routing without a
    restart; an invalid file is rejected and the running config kept. See docs/gateway.md.

    Example: switchover gateway --config switchover.yaml
    """
    ctx.obj = {"config": config}
    if ctx.invoked_subcommand is not None:
        return
    from switchover.config import load_migration
    from switchover.gateway.server import serve

    migration = load_migration(config)
    if migration.gateway is not None and migration.gateway.data_plane == "envoy":
        from switchover.gateway.envoy.plane import serve as serve_envoy
        from switchover.gateway.server import setup_logging

        run_dir = migration.gateway.resolved_run_dir(config)
        run_dir.mkdir(parents=True, exist_ok=True)
        setup_logging(run_dir, verbose)
        sys.exit(run(serve_envoy(migration, config)))
    left = run(serve(migration, config, log_prompts=log_prompts, verbose=verbose))
    sys.exit(1 if left else 0)


def _admin(config: Path, method: str, path: str) -> dict[str, Any]:
    """Call an admin endpoint of the gateway this config runs: its address from gateway.listen, never from a file
    alone (gateway.state.find_gateway), the token in the header; an answer that is not a JSON object is exit 3."""
    from switchover.config import load_migration
    from switchover.gateway.state import find_gateway

    m = load_migration(config)
    if m.gateway is None:
        raise BadInput(f"{config}: no `gateway:` section")
    listen = m.gateway.listen
    url, token = find_gateway(m.gateway.resolved_run_dir(config), listen.host, listen.port)

    async def call() -> dict[str, Any]:
        import aiohttp

        try:
            async with (
                aiohttp.ClientSession() as s,
                s.request(
                    method,
                    url + path,
                    headers={"X-Switchover-Admin": token},
                    allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=10),
                ) as r,
            ):
                raw = await r.content.read(MAX_ADMIN_ANSWER + 1)
                status = r.status
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise Unreachable(f"{url}{path}: {type(exc).__name__}: {exc}") from None
        try:
            body = orjson.loads(raw) if len(raw) <= MAX_ADMIN_ANSWER else None
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            raise Unreachable(
                f"{url}{path} answered HTTP {status} with something that is not the gateway's JSON: "
                "another program may be listening there",
                hint="check that the gateway runs with this config (`switchover gateway --config ...`)",
            )
        if status != 200:
            error = body.get("error")
            said = error.get("message") if isinstance(error, dict) else None
            raise Unreachable(f"{url}{path}: HTTP {status}: {str(said or body)[:300]}")
        return body

    return run(call())


@app.command()
def reset(
    ctx: typer.Context,
    config: Path = params.config_file("The migration file (also accepted before `reset`).", None),
    json_out: bool = params.json_flag(),
) -> None:
    """Clear the kill-switch latch of the running gateway (loopback admin endpoint + token in its run dir).

    Example: switchover gateway reset --config switchover.yaml
    """
    result = _admin(config or ctx.obj["config"], "POST", "/admin/reset")
    if json_out:
        print_json(result)
    else:
        console.print(
            "kill switch reset" + (" (it was latched)" if result.get("was_latched") else " (it was not latched)")
        )


@app.command()
def state(
    ctx: typer.Context,
    config: Path = params.config_file("The migration file (also accepted before `state`).", None),
    json_out: bool = params.json_flag(),
) -> None:
    """Weight, rollback, kill switch, in-flight requests and ledger path of the running gateway.

    Example: switchover gateway state --config switchover.yaml --json
    """
    result = _admin(config or ctx.obj["config"], "GET", "/admin/state")
    if json_out:
        print_json(result)
        return
    ks = result["kill_switch"]
    console.print(
        f"weight {result['weight']:g}%  rollback {result['rollback']}  in flight {result['in_flight']}"
        f"  kill switch {'LATCHED: ' + escape(str(ks['reason'])) if ks['latched'] else 'armed'}"
        f"  ledger {escape(str(result['ledger']))} ({result['ledger_rows']} rows)",
        highlight=False,
        soft_wrap=True,
    )
    clients = result.get("clients") or {}
    conns = result.get("connections") or {}
    mode = clients.get("mode", "?")
    note = {
        "open": "OPEN: anyone who reaches it gets the engines' keys attached",
        "keys": f"keys ({clients.get('keys', 0)} client keys; the engines' own keys are sent)",
        "passthrough": "passthrough (clients' own credentials go to the engines)",
    }.get(mode, mode)
    console.print(
        f"clients {note}  connections {conns.get('open', '?')}/{conns.get('max', '?')}"
        f" from {conns.get('addresses', '?')} addresses",
        highlight=False,
        soft_wrap=True,
    )
    if result.get("data_plane") == "envoy":
        envoy = result.get("envoy") or {}
        console.print(
            f"data plane envoy (pid {envoy.get('pid')}, routes {escape(str(envoy.get('routing')))}, "
            f"files {escape(str(envoy.get('config_dir')))}); what it cannot do as the built-in gateway:",
            highlight=False,
            soft_wrap=True,
        )
        for line in result.get("limits") or []:
            console.print(f"  - {escape(str(line))}", highlight=False, soft_wrap=True)


@app.command("hash-key")
def hash_key(
    name: str = typer.Argument(..., help="A name for the client (letters, digits, . _ : @ -); it becomes its tenant."),
    generate: bool = typer.Option(False, "--generate", help="Make a new random key and print it once on stderr."),
) -> None:
    """Print one key-file line (`NAME sha256:<hex>`) for `gateway.clients.key_file`, from a key read on stdin.

    Only the digest goes in the file; the key itself is never stored by switchover. With --generate a new key is
    made and shown once (on stderr), so `>> keys.txt` captures only the line.

    Example: switchover gateway hash-key team-a --generate >> keys.txt
    """
    import secrets

    from switchover.gateway.clients import check_key_name, key_file_line

    check_key_name(name)
    if generate:
        key = "sk-gw-" + secrets.token_urlsafe(32)
        sys.stderr.write(f"client key for {name} (shown once, give it to the client): {key}\n")
    else:
        if sys.stdin.isatty():
            raise BadInput(
                'give the key on stdin (e.g. `printf %s "$KEY" | switchover gateway hash-key NAME`)',
                hint="or use --generate to make one",
            )
        key = sys.stdin.read().strip()
        if not key:
            raise BadInput("no key on stdin")
    sys.stdout.write(key_file_line(name, key) + "\n")


def metrics_adapter(
    from_engine: str = typer.Option(
        ...,
        "--from",
        help="Engine whose metrics are scraped (the new one): ENGINE or "
        "ENGINE@VERSION (the series that release serves; newest known when left out).",
    ),
    to_engine: str = typer.Option(
        ...,
        "--to",
        help="Engine whose names, units and buckets to serve (the old one): "
        "ENGINE or ENGINE@VERSION, e.g. vllm@0.6.3 for dashboards of that release.",
    ),
    upstream: str = typer.Option(
        ..., "--upstream", parser=params.URL, help="Base URL (or full metrics URL) of the new engine."
    ),
    listen: str = typer.Option(
        "127.0.0.1:9400", "--listen", parser=params.HOST_PORT, help="host:port to serve /metrics on."
    ),
    model: str = typer.Option(None, "--model", help="model_name label value when the source lacks one."),
    once: bool = typer.Option(False, "--once", help="Scrape once, print the converted metrics, exit."),
    json_out: bool = params.json_flag("the mapping report", "with --once"),
) -> None:
    """Re-serve the new engine's metrics under the old engine's names, units and histogram buckets.

    Example: switchover metrics-adapter --from sglang --to vllm@0.6.3 --upstream http://127.0.0.1:30000
    """
    from switchover.engines.compat import parse_pin
    from switchover.engines.profile import load_profile
    from switchover.gateway import metrics_adapter as ma

    host, _, port_s = listen.rpartition(":")
    if not host or not port_s.isdigit() or not 1 <= int(port_s) <= 65535:
        raise BadInput(f"--listen must be host:port with a port in 1-65535, got {listen!r}")
    src_pin, dst_pin = parse_pin(from_engine, "--from"), parse_pin(to_engine, "--to")
    src, dst = load_profile(src_pin.engine, src_pin.version), load_profile(dst_pin.engine, dst_pin.version)
    plan = ma.plan(src, dst)
    url = ma.scrape_url(upstream, src)
    if once:
        text, report = ma.convert(run(ma.scrape(url)), plan, model)
        if json_out:
            print_json(report)
        else:
            sys.stdout.write(text)
        return
    from aiohttp import web

    console.print(
        f"serving {dst.name} metrics from {url} at http://{host}:{port_s}/metrics "
        f"({len(plan.mappings)} intents; not available: {', '.join(plan.skipped) or 'none'})",
        highlight=False,
        soft_wrap=True,
    )
    try:
        web.run_app(ma.adapter_app(url, plan, model), host=host, port=int(port_s), print=None, access_log=None)
    except OSError as exc:
        raise BadInput(f"--listen: cannot bind {host}:{port_s}: {exc.strerror or exc}") from None


def register(root: typer.Typer) -> None:
    """Add `gateway` (and its sub-commands) and `metrics-adapter` to the root app."""
    root.add_typer(app, name="gateway")
    root.command("metrics-adapter")(metrics_adapter)
