"""`switchover bench`: where does each engine's latency tail bend, side by side, on my input shapes?"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from switchover import inputs
from switchover.cli import params
from switchover.cli.common import console, err_console, print_json, run
from switchover.cli.sweep_cmd import sweep_cmd
from switchover.errors import BadInput, CheckFailed

app = typer.Typer(
    help="Load old and new engines side by side: latency vs load, the knee, A/B deltas, raw rows kept.\n\n"
    "Example: switchover bench --old http://127.0.0.1:8000 --old-engine vllm --new http://127.0.0.1:8080 "
    "--new-engine llamacpp --buckets 128,512 --concurrency 1,2,4,8 --requests 50",
    invoke_without_command=True,
    no_args_is_help=True,
)


class _Duration(params.Number):
    """Seconds, or a number with a unit s, m, h or d (90s, 20m, 2h, 1d): positive, at most a week."""

    name = "duration"
    UNITS: ClassVar[dict[str, float]] = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

    def __init__(self) -> None:
        super().__init__(lo=0, hi=inputs.MAX_SECONDS, lo_open=True)

    def convert(self, value: Any, param: object = None, ctx: object = None) -> int | float:
        text = str(value).strip().lower() if isinstance(value, str) else ""
        if text[-1:] in self.UNITS:
            try:
                value = float(text[:-1]) * self.UNITS[text[-1]]
            except ValueError:
                self.fail(f"expected seconds or a number with s/m/h/d, got {text[:40]!r}", param, ctx)
        return super().convert(value, param, ctx)


DURATION = _Duration()


MAX_CONCURRENCY = 100_000  # streams one client process can hold open
MAX_RATE = 1e6  # requests per second
RUNS_DIR = typer.Option(Path("runs"), help="Where run directories go.", parser=params.OUT_DIR)

# `bench` options that go into the plan as given (option -> BenchPlan field); the plan's other fields are worked
# out from several options or fall back to switchover.yaml's `bench:` section, and are set where the plan is built
PLAN_AS_GIVEN = {
    "name": "name",
    "api": "api",
    "arrival": "arrival",
    "burstiness": "burstiness",
    "max_inflight": "max_inflight",
    "warmup_requests": "warmup_requests",
    "warmup_s": "warmup_s",
    "repeats": "repeats",
    "allow_prefix_cache": "allow_prefix_cache",
    "trace_speed": "trace_speed",
    "max_error_rate": "max_error_rate",
    "knee_metric": "knee_metric",
    "scrape_interval": "scrape_interval_s",
    "timeout": "timeout_s",
    "calibrate": "calibrate",
    "checkpoint_every": "checkpoint_s",
    "window": "window_s",
    "workers": "workers",
}


def _slos(specs: list[str] | None) -> dict[str, float]:
    from pydantic import ValidationError

    from switchover.config.bench import BenchSlos

    out: dict[str, float] = {}
    for spec in specs or []:
        key, sep, value = spec.partition("=")
        if not sep or key not in BenchSlos.model_fields:
            raise BadInput(f"--slo must be one of {', '.join(BenchSlos.model_fields)}=<number>, got {spec!r}")
        try:
            out[key] = float(value)
        except ValueError:
            raise BadInput(f"--slo {key}: not a number: {value!r}") from None
    try:
        BenchSlos(**out)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise BadInput(f"--slo {err['loc'][0]}: {err['msg']}") from None
    return out


class _Progress:
    """Rich progress: one bar per step, one line per finished step."""

    EVERY = 128  # requests per bar update: advancing the bar per request cost ~1% of a fast run's CPU

    def __init__(self, progress: Progress) -> None:
        self.p = progress
        self.task: Any = None
        self.pending = 0

    def note(self, msg: str) -> None:
        self.p.console.print(f"[dim]{escape(msg)}[/]", highlight=False)

    def step_started(self, label: str, total: int | None) -> None:
        if self.task is not None:
            self.p.remove_task(self.task)
        self.task = self.p.add_task(label, total=total)
        self.pending = 0

    def request_done(self, ok: bool) -> None:
        self.pending += 1
        if self.pending >= self.EVERY:
            self._advance()

    def _advance(self) -> None:
        if self.task is not None and self.pending:
            self.p.advance(self.task, self.pending)
        self.pending = 0

    def step_done(self, s: Any) -> None:
        self._advance()
        load = f"c={s.concurrency}" if s.concurrency else (f"{s.rate:g} req/s" if s.rate else "trace")
        tpot = f"{s.tpot_ms.p99:.2f}" if s.tpot_ms else "—"
        ttft = f"{s.ttft_ms.p99:.1f}" if s.ttft_ms else "—"
        self.p.console.print(
            f"{s.endpoint:>6} {s.bucket:>7} {load:>8}: {s.ok}/{s.requests} ok, TTFT p99 {ttft} ms, "
            f"TPOT p99 {tpot} ms, "
            + (f"{s.out_tok_per_s:.1f} tok/s" if s.out_tok_per_s is not None else "tok/s not measured")
            + (" [yellow]client-bound[/]" if s.client_flag else ""),
            highlight=False,
        )


def _steady(s: Any) -> str:
    return "—" if s.steady is None or s.steady.reached is None else ("yes" if s.steady.reached else "no")


def _client(report: Any) -> None:
    """The client's own queueing (steps where it held back load) and its memory (bench/clientload.py)."""
    for q in report.client:
        if not q.client_bound:
            continue
        load = f"c={q.concurrency}" if q.concurrency else f"{q.rate:g} req/s"
        wire = "" if q.on_wire is None else f"{q.on_wire:.0f} requests on the wire on average (req/s × mean E2E)"
        held = "" if q.in_client is None else f", {q.in_client:.0f} waiting in the client"
        lag = (
            ""
            if q.send_lag_ms_mean is None
            else (f"; send lag mean {q.send_lag_ms_mean:.2f} ms, max {q.send_lag_ms_max:.1f} ms")
        )
        console.print(
            f"[yellow]client-bound[/] {escape(q.endpoint)} {load}: {wire}{held}{lag}: the client, not the "
            "server, limited this step's load",
            highlight=False,
            soft_wrap=True,
        )
    m = report.client_memory
    if m is not None and m.idle_rss_mb is not None and m.peak_rss_mb is not None:
        console.print(
            f"[dim]client memory: {m.idle_rss_mb:.0f} MB before the first step, peak {m.peak_rss_mb:.0f} MB "
            f"(+{m.growth_mb:.0f} MB); open-file limit {m.open_files_limit}[/]",
            highlight=False,
        )


def render(report: Any) -> None:
    """Console summary: the step table, knees, A/B deltas, checks, where the run directory is."""
    from switchover.bench.steptable import limit_columns, step_table
    from switchover.evidence.bench_caps import advice

    head, rows = step_table(report.steps, (*limit_columns(report.limits), ("steady", _steady)))
    table = Table(title=f"switchover bench {report.name}")
    for col in head:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*(escape(c) for c in row))
    console.print(table)
    cal = report.calibration
    if cal is not None:
        loads = [s.client_load for s in report.steps if s.client_load is not None]
        busiest = f"; the busiest step used {max(loads):.0%} of it" if loads else ""
        console.print(
            f"client ceiling {cal.req_per_s:.0f} req/s, {cal.chunks_per_s:.0f} chunks/s{busiest} "
            "(steps above 70% are flagged)",
            highlight=False,
        )
    else:
        console.print("[dim]no client calibration (--no-calibrate): headroom unknown[/]", highlight=False)
    stamps = {e.chunk_stamps for e in report.endpoints if e.chunk_stamps}
    if stamps:
        console.print(f"chunk timestamps: {'; '.join(sorted(stamps))}", highlight=False)
    for s in report.steps:
        if s.workers:
            parts = ", ".join(
                f"w{w.worker} {'—' if w.achieved is None else f'{w.achieved:.1f}'}/{w.target:g}"
                for w in s.workers
                if w.target is not None
            )
            console.print(
                f"{s.endpoint} {s.bucket} step {s.step}: achieved/target per worker: {parts}", highlight=False
            )
    _client(report)
    for key, k in report.knees.items():
        console.print(f"[bold]{escape(key)}[/]: {escape(k.message)}", highlight=False, soft_wrap=True)
    for line in advice(report.limits, {e.label: e.engine for e in report.endpoints}):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    for a in report.ab:
        sig = [d for d in a.deltas if d.significant]
        if sig:
            console.print(
                f"new vs old @ {a.concurrency} ({a.bucket}): "
                + ", ".join(f"{d.metric} {d.stat} {d.delta_pct:+.0f}%" for d in sig if d.delta_pct is not None),
                highlight=False,
            )
    for c in report.checks:
        if not c.passed:
            console.print(
                f"[red]FAIL[/] {c.name} {c.endpoint} @ {c.concurrency}: {c.value} > {c.limit}", highlight=False
            )
    for n in report.notes:
        console.print(f"[dim]{escape(n)}[/]", highlight=False, soft_wrap=True)
    if report.stopped_reason:
        console.print(f"[yellow]stopped early:[/] {escape(report.stopped_reason)}", highlight=False)
    console.print(
        f"run directory: {report.run_dir}  (report.html, summary.json, requests.parquet)", highlight=False, markup=False
    )


def _plan(**kw: Any):
    from pydantic import ValidationError

    from switchover.evidence.bench import BenchPlan

    try:
        return BenchPlan(**{k: v for k, v in kw.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "options"
        raise BadInput(f"{field}: {err['msg']}") from None


@app.callback()
def bench(
    ctx: typer.Context,
    url: str = typer.Option(None, "--url", help="One endpoint to bench (instead of --old/--new).", parser=params.URL),
    old: str = params.endpoint("old", " (A)"),
    new: str = params.endpoint("new", " (B)"),
    config: Path = params.config_file("switchover.yaml: endpoints, engines, bench section.", None),
    old_engine: str = typer.Option(None, help="Engine of --old (vllm, sglang, trtllm, tgi, llamacpp)."),
    new_engine: str = typer.Option(None, help="Engine of --new."),
    engine: str = typer.Option(None, help="Engine of the single URL."),
    model: str = params.served_model(),
    api: str = typer.Option("completions", help="completions or chat (chat counts the template's tokens)."),
    buckets: str = typer.Option(None, help="Input-length buckets in tokens, e.g. 128,512,2048."),
    output_tokens: int = typer.Option(
        None, "--output-tokens", help="Output tokens per request (default 128).", parser=params.TOKENS
    ),
    concurrency: str = typer.Option(None, help="Concurrency ladder, e.g. 1,2,4,8,16,32,64 (the default)."),
    rate: str = typer.Option(None, help="Request rates (req/s) instead of a concurrency ladder, e.g. 1,2,4."),
    arrival: str = typer.Option("constant", help="Rate mode arrivals: constant, poisson or gamma."),
    burstiness: float = typer.Option(
        1.0, help="Gamma shape (1 = Poisson, lower = burstier).", parser=params.positive(1000)
    ),
    max_inflight: int = typer.Option(
        None, help="Cap on requests in flight in rate mode.", parser=params.count(hi=MAX_CONCURRENCY)
    ),
    requests: int = typer.Option(
        None, help="Measured requests per step (default 50 unless --duration).", parser=params.count()
    ),
    duration: float = typer.Option(
        None,
        "--duration",
        parser=DURATION,
        help="Measuring time per step: seconds or 90s, 20m, 2h, 1d (a soak: one step).",
    ),
    checkpoint_every: float = typer.Option(
        None,
        "--checkpoint-every",
        parser=DURATION,
        help="Soak: checkpoint this often (rows in closed Parquet parts, "
        "checkpoint.json, summary and report so far); resumable with --resume.",
    ),
    window: float = typer.Option(
        None,
        "--window",
        parser=DURATION,
        help="Soak: drift window (default 1h): TTFT/TPOT, req/s, errors, memory per window.",
    ),
    resume: Path = typer.Option(
        None, "--resume", help="Carry on a checkpointed run directory (other options come from its config.json)."
    ),
    workers: int = typer.Option(
        1,
        "--workers",
        parser=params.count(hi=64),
        help="Load-generating processes per step, sharing one schedule (rates one core "
        "cannot drive); results merge exactly.",
    ),
    warmup_requests: int = typer.Option(1, help="Requests per step discarded as warm-up.", parser=params.count(lo=0)),
    warmup_s: float = typer.Option(
        0.0, "--warmup-s", help="Seconds per step discarded as warm-up.", parser=params.non_negative(inputs.MAX_SECONDS)
    ),
    repeats: int = typer.Option(1, help="ABAB repetitions of every step.", parser=params.count(hi=100)),
    seed: int = typer.Option(None, help="Seed for prompts and arrivals (default 0).", parser=params.SEED),
    allow_prefix_cache: bool = typer.Option(False, help="Drop the per-request cache-buster prefix."),
    dataset: Path = typer.Option(
        None, help="JSONL of {prompt|messages, max_tokens?, timestamp?} (timestamps: replay)."
    ),
    trace_speed: float = typer.Option(1.0, help="Trace replay speed-up factor.", parser=params.positive(1e6)),
    max_error_rate: float = typer.Option(
        None, help="Stop the run when an endpoint's error rate exceeds this (0-1).", parser=params.SHARE
    ),
    slo: list[str] = typer.Option(None, "--slo", help="e.g. tpot_p99_ms=50 (repeatable; adds to switchover.yaml)."),
    knee_metric: str = typer.Option("tpot", help="Metric whose tail defines the knee: tpot, ttft, e2e, itl."),
    tokenizer: Path = typer.Option(None, help="HF folder with tokenizer.json, to cross-check N by re-tokenizing."),
    scrape_interval: float = typer.Option(
        1.0, help="Seconds between /metrics scrapes (0 = off).", parser=params.non_negative(3600)
    ),
    timeout: float = typer.Option(300.0, help="Per-request time limit, seconds.", parser=params.SECONDS),
    calibrate: bool = typer.Option(True, "--calibrate/--no-calibrate", help="Measure the client ceiling first."),
    runs_dir: Path = RUNS_DIR,
    name: str = typer.Option("bench", help="Run name (suffix of the run directory).", parser=params.TEXT),
    json_out: bool = params.json_flag("the summary (summary.json)"),
) -> None:
    """Run the same seeded workload on every endpoint, step by step (ABAB), and write a run directory.

    Example: switchover bench --old http://127.0.0.1:8000 --old-engine vllm --new http://127.0.0.1:8080
    --new-engine llamacpp --buckets 128,512 --concurrency 1,2,4,8 --requests 50
    """
    if ctx.invoked_subcommand is not None:
        return
    from switchover.bench.calibrate import calibrate as calibrate_fn
    from switchover.bench.endpoints import endpoints_from, load_tokenizer
    from switchover.bench.runner import BenchRun
    from switchover.config import load_migration
    from switchover.engines import load_profile
    from switchover.runs import prepare_folder

    if resume is not None:
        _go(lambda progress: BenchRun.resumed(resume, _Progress(progress)), json_out)
        return

    config = params.discovered_config(config, old, new, url)
    migration = load_migration(config) if config is not None else None
    eps, section = endpoints_from(migration, old, new, url, old_engine, new_engine, engine, model)
    for ep in eps:  # an unknown engine is refused before any engine is contacted (BadInput names the known ones)
        if ep.engine is not None:
            load_profile(ep.engine)
    if tokenizer is not None:
        load_tokenizer(str(tokenizer))  # a bad --tokenizer is refused before any engine is contacted
    if dataset is not None:  # so is a bad --dataset: a regular UTF-8 file of bounded size that parses
        from switchover.bench.workload import load_dataset

        load_dataset(dataset, 1)
    prepare_folder(runs_dir)
    sec: dict[str, Any] = section.model_dump(exclude_none=True) if section is not None else {}
    slos = {**sec.pop("slos", {}), **_slos(slo)}
    rates = params.number_list("--rate", rate, MAX_RATE)
    plan = _plan(
        **{field: ctx.params[flag] for flag, field in PLAN_AS_GIVEN.items()},
        endpoints=eps,
        buckets=params.number_list("--buckets", buckets, inputs.MAX_TOKENS, integer=True) or sec.get("buckets"),
        output_tokens=output_tokens or sec.get("output_tokens"),
        concurrency=None
        if rates
        else (
            params.number_list("--concurrency", concurrency, MAX_CONCURRENCY, integer=True) or sec.get("concurrency")
        ),
        rates=rates,
        requests=requests or sec.get("requests") or (None if duration or sec.get("duration_s") else 50),
        duration_s=duration or sec.get("duration_s"),
        seed=seed if seed is not None else sec.get("seed"),
        dataset=str(dataset) if dataset else None,
        slos=slos,
        tokenizer=str(tokenizer) if tokenizer else None,
    )
    chunks = plan.output_tokens

    async def cal() -> Any:
        return await calibrate_fn(concurrency=max(plan.concurrency or [64]), chunks=chunks, duration_s=1.5)

    _go(
        lambda progress: BenchRun(plan, runs_dir, _Progress(progress), calibrate_fn=cal if plan.calibrate else None),
        json_out,
    )


def _go(make: Any, json_out: bool) -> None:
    """Run a BenchRun under a progress display; render, and exit as the checks say."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=json_out,
    )
    runner = make(progress)
    try:
        with progress:
            report, _ = run(runner.run(), hot=True)
    except KeyboardInterrupt:
        where = runner.run_dir or "(no run directory yet)"
        err_console.print(f"interrupted: partial results kept in {where}", highlight=False, markup=False)
        sys.exit(130)
    if json_out:
        print_json(report)
    else:
        render(report)
    if report.passed is False:
        raise CheckFailed("SLO or regression checks failed", hint=f"see {report.run_dir}/report.html")
    if report.stopped_reason:
        raise CheckFailed(f"stopped early: {report.stopped_reason}", hint=f"partial results in {report.run_dir}")


@app.command("calibrate")
def calibrate_cmd(
    concurrency: int = typer.Option(64, help="Streams in flight.", parser=params.count(hi=MAX_CONCURRENCY)),
    chunks: int = typer.Option(128, help="SSE events per response.", parser=params.count(hi=100_000)),
    duration: float = typer.Option(3.0, help="Measuring seconds.", parser=params.positive(3600)),
    itl_ms: float = typer.Option(
        0.0,
        help="Pause between events (0 = all at once); >0 also measures timing error.",
        parser=params.non_negative(60_000),
    ),
    in_process: bool = typer.Option(False, help="Serve from this process (default: a child process)."),
    json_out: bool = params.json_flag(),
) -> None:
    """Measure this client's own ceiling (req/s, chunks/s, µs per chunk) against a zero-work SSE server.

    Example: switchover bench calibrate --concurrency 256 --chunks 64 --duration 5
    """
    from switchover.bench.calibrate import calibrate

    cal = run(
        calibrate(concurrency=concurrency, chunks=chunks, duration_s=duration, in_process=in_process, itl_ms=itl_ms),
        hot=True,
    )
    if json_out:
        print_json(cal)
        return
    what = "client ceiling" if not itl_ms else f"paced by the server ({itl_ms:g} ms between events), not a ceiling"
    console.print(
        f"{what}: {cal.req_per_s:.0f} req/s, {cal.chunks_per_s:.0f} chunks/s"
        f"{'' if itl_ms else f', {cal.us_per_chunk:.2f} µs/chunk'} "
        f"(c={cal.concurrency}, {cal.chunks_per_request} chunks/request, {cal.requests} requests, {cal.errors} errors)",
        highlight=False,
    )
    if cal.timing_error_p99_us is not None:
        console.print(
            f"chunk timing error vs server stamps: p50 {cal.timing_error_p50_us:.0f} µs, "
            f"p99 {cal.timing_error_p99_us:.0f} µs",
            highlight=False,
        )
    if cal.chunk_stamps:
        console.print(f"chunk timestamps: {cal.chunk_stamps}", highlight=False)
    console.print(f"[dim]{cal.note}[/]", highlight=False)


@app.command("recompute")
def recompute_cmd(
    run_dir: Path = typer.Argument(..., help="A bench run directory."),
    as_tool: str = typer.Option(..., "--as", help="vllm, sglang, guidellm or aiperf."),
    use_server_token_count: bool = typer.Option(False, help="aiperf: count N from usage, as its flag of that name."),
    json_out: bool = params.json_flag(),
) -> None:
    """Show a run's raw rows in another tool's metric vocabulary (its names, its formulas).

    Example: switchover bench recompute runs/20261129T120000Z-bench --as vllm
    """
    from switchover.bench.recompute import recompute
    from switchover.runs import RunDir

    res = recompute(RunDir.open(run_dir), as_tool, use_server_count=use_server_token_count)
    if json_out:
        print_json(res)
        return
    for st in res.steps:
        table = Table(title=f"{as_tool}: {st.endpoint} bucket {st.bucket} load {st.load}")
        for col in ("metric", "mean", "median", "p99", "n", "in switchover terms"):
            table.add_column(col)
        for m in st.metrics:
            table.add_row(
                m.name, *("—" if v is None else f"{v:.3f}" for v in (m.mean, m.median, m.p99)), str(m.count), m.same_as
            )
        console.print(table)
        for n in st.notes:
            console.print(f"[yellow]{escape(n)}[/]", highlight=False)


@app.command("report")
def report_cmd(run_dir: Path = typer.Argument(..., help="A bench run directory.")) -> None:
    """Rebuild report.html of a run from its summary.json.

    Example: switchover bench report runs/20261129T120000Z-bench
    """
    from switchover.bench.report import write_report
    from switchover.evidence.bench import BenchReport
    from switchover.runs import RunDir

    rd = RunDir.open(run_dir)
    console.print(write_report(rd, rd.read_json("summary", BenchReport)), highlight=False, markup=False)


app.command("sweep")(sweep_cmd)  # `bench sweep` lives in cli/sweep_cmd.py


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="bench")
