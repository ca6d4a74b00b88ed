"""`switchover bench sweep`: relaunch an engine per parameter value, run the ladder on each, plot the metric
against the parameter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from switchover import inputs
from switchover.cli import params
from switchover.cli.common import console, print_json, run
from switchover.errors import CheckFailed

RUNS_DIR = typer.Option(Path("runs"), help="Where run directories go.", parser=params.OUT_DIR)


def _fail_unless_measured(res: Any) -> None:
    """Exit 1 when no point of the sweep was measured (every launch failed): nothing was found out."""
    if res.points and all(p.error for p in res.points):
        raise CheckFailed(
            f"no point of the sweep was measured: {res.points[0].error}", hint=f"see {res.run_dir}/sweep.html"
        )


def sweep_cmd(
    launch: str = typer.Option(..., help='Engine command with placeholders, e.g. "vllm serve M --block-size {bs}".'),
    param: list[str] = typer.Option(..., "--param", help="name=v1,v2 (repeatable: every combination runs)."),
    url: str = typer.Option(..., help="Where the launched engine listens.", parser=params.URL),
    engine: str = typer.Option(None, help="Engine profile of the launched engine."),
    model: str = params.served_model(),
    buckets: str = typer.Option("128", help="Input-length buckets."),
    output_tokens: int = typer.Option(64, help="Output tokens per request.", parser=params.TOKENS),
    concurrency: str = typer.Option("1,2,4,8", help="Concurrency ladder."),
    requests: int = typer.Option(20, help="Measured requests per step.", parser=params.count()),
    ready_timeout: float = typer.Option(
        600.0, help="Seconds to wait for each launch to generate.", parser=params.SECONDS
    ),
    runs_dir: Path = RUNS_DIR,
    json_out: bool = params.json_flag("the sweep (sweep.json)"),
) -> None:
    """Relaunch an engine per parameter value, run the ladder on each, plot the metric against the parameter.

    Example: switchover bench sweep --launch "vllm serve M --port 8000 --block-size {bs}" --param bs=16,32
    --url http://127.0.0.1:8000 --engine vllm
    """
    from switchover.bench.sweep import parse_params, run_sweep
    from switchover.cli.bench_cmd import MAX_CONCURRENCY, _plan
    from switchover.engines import load_profile
    from switchover.evidence.bench import EndpointSpec
    from switchover.runs import prepare_folder

    if engine is not None:
        engine = load_profile(engine).name  # an unknown engine is refused before anything is launched
    grid = parse_params(param)
    prepare_folder(runs_dir)
    plan = _plan(
        name="sweep",
        endpoints=[EndpointSpec(label="target", url=url, engine=engine, model=model)],
        buckets=params.number_list("--buckets", buckets, inputs.MAX_TOKENS, integer=True),
        output_tokens=output_tokens,
        concurrency=params.number_list("--concurrency", concurrency, MAX_CONCURRENCY, integer=True),
        requests=requests,
        calibrate=False,
    )
    res = run(run_sweep(launch, grid, plan, url, runs_dir, ready_timeout_s=ready_timeout), hot=True)
    if json_out:
        print_json(res)
        _fail_unless_measured(res)
        return
    for p in res.points:
        line = ", ".join(f"{k}={v}" for k, v in p.params.items())
        if p.error:
            console.print(f"{escape(line)}: [red]{escape(p.error)}[/]", highlight=False)
        else:
            tp = ", ".join(f"c={k}: {v:.2f}" for k, v in p.tpot_p99_ms.items())
            console.print(f"{line}: TPOT p99 {tp}; {p.knee_message}", highlight=False, markup=False)
        if p.line():
            console.print(f"  {p.line()}", highlight=False, markup=False)
        for a in p.advice:
            console.print(f"  {a}", highlight=False, markup=False)
    console.print(f"sweep directory: {res.run_dir} (sweep.html)", highlight=False, markup=False)
    _fail_unless_measured(res)
