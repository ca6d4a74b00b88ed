"""A bench run end to end: check the endpoints, fit the prompts, run every step on every endpoint (ABAB),
keep raw rows as they finish, summarise, find knees, compare, judge, and write the run directory.
Interrupted runs (Ctrl-C) and runs stopped by the error-rate limit still write everything they measured."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from switchover.bench.ab import regression_checks, slo_checks
from switchover.bench.accumulate import StepAccumulator
from switchover.bench.batch import StepRows
from switchover.bench.checkpoint import check_checkpoint, restore, resumed_step, write_checkpoint
from switchover.bench.clientload import open_files_for, peak_rss_mb, rss_mb
from switchover.bench.conclude import KNEE_LIMIT, StepValues, ab_steps, knees
from switchover.bench.endpoints import Endpoint, load_tokenizer, open_endpoint
from switchover.bench.reporter import NullReporter, Reporter
from switchover.bench.rows import DICT_COLUMNS, ROW_SCHEMA, STAT_COLUMNS, RowSink, row_from_record
from switchover.bench.samples import Samples
from switchover.bench.scheduler import Sent, StepBounds, StopFlag, run_concurrency, run_schedule
from switchover.bench.scrape import SCRAPE_SCHEMA, Scraper
from switchover.bench.soak import PartWriter, Windows, drift_table
from switchover.bench.stats import Slo
from switchover.bench.workload import (
    Prompt,
    PromptMaker,
    bucket_prompt,
    fit_bucket,
    iter_arrival_offsets,
    load_dataset,
    request_body,
    unit_words,
)
from switchover.errors import BadInput
from switchover.evidence.bench import BenchPlan, BenchReport, Calibration, StepTime
from switchover.evidence.bench_findings import BucketFit, Soak
from switchover.evidence.bench_step import ClientMemory, ClientQueue, StepSummary
from switchover.runs import RecordWriter, RunDir
from switchover.wire import FailureKind, RequestRecord

MIN_FOR_ERROR_RATE = 10
FAIL_BACKOFF_S = 0.05  # a failure faster than this waits, so a dead endpoint is not hammered in a tight loop


@dataclass
class _Load:
    step: int
    concurrency: int | None
    rate: float | None


@dataclass
class _State:
    keys: dict[tuple[str, str, int], StepValues] = field(default_factory=dict)
    steps: list[StepSummary] = field(default_factory=list)
    client: list[ClientQueue] = field(default_factory=list)
    times: list[StepTime] = field(default_factory=list)


def _loads(plan: BenchPlan, trace: bool) -> list[_Load]:
    if trace:
        return [_Load(0, None, None)]
    if plan.rates:
        return [_Load(i, None, r) for i, r in enumerate(plan.rates)]
    return [_Load(i, c, None) for i, c in enumerate(plan.concurrency or [1])]


class BenchRun:
    """One run; `await BenchRun(plan, runs_dir).run()` returns the report and leaves the run directory."""

    def __init__(
        self,
        plan: BenchPlan,
        runs_dir: str | Path,
        reporter: Reporter | None = None,
        calibration: Calibration | None = None,
        calibrate_fn: Callable[[], Any] | None = None,
    ) -> None:
        self.plan = plan
        self.runs_dir = Path(runs_dir)
        self.rep = reporter or NullReporter()
        self.calibration = calibration
        self.calibrate_fn = calibrate_fn
        self.stop = StopFlag()
        self.state = _State()
        self.eps: list[Endpoint] = []
        self.fits: dict[str, BucketFit] = {}
        self.dataset: list[Prompt] | None = None
        self.retok: Any = None
        self.run_dir: Path | None = None
        self.resume: dict[str, Any] | None = None  # checkpoint.json of the run being resumed
        self.windows: Windows | None = None
        self.current: dict[str, Any] | None = None  # the running step, for checkpoints
        self.done = 0  # steps finished, in loop order
        self.parts: Path | None = None  # requests/ when rows go to Parquet parts (soak, workers)
        self.worker_loads: list[Any] = []
        self.worker_stamps: set[str] = set()
        self.current_issued = 0  # requests sent so far in the running step (a resumed step numbers on from here)
        self.metrics_writer: Any = None

    @classmethod
    def resumed(cls, run_dir: str | Path, reporter: Reporter | None = None) -> BenchRun:
        """A runner that carries on the soak run in `run_dir` from its last checkpoint."""
        rd = RunDir.open(run_dir)
        if not rd.has("checkpoint.json"):
            raise BadInput(f"{rd.path}: no checkpoint.json (only runs with --checkpoint-every can be resumed)")
        plan = rd.read_json("config", BenchPlan)
        if plan.checkpoint_s is None:
            raise BadInput(f"{rd.path}: its config.json has no checkpoint interval: not a soak run to resume")
        runner = cls(plan, rd.path.parent, reporter, calibrate_fn=None)
        runner.resume = check_checkpoint(rd.read_json("checkpoint"), str(rd.file("checkpoint.json")), plan.seed)
        runner.run_dir = rd.path
        return runner

    # ------------------------------------------------------------------ preparation

    async def _prepare(self) -> None:
        plan = self.plan
        labels = [e.label for e in plan.endpoints]
        if len(set(labels)) != len(labels):
            raise BadInput(f"endpoint labels must be unique, got {labels}")
        for spec in plan.endpoints:
            ep = await open_endpoint(spec, plan)
            self.eps.append(ep)
            if ep.info.engine_version_note:  # which release's metric and flag spellings were assumed
                self.rep.note(f"{spec.label}: {ep.info.engine_version_note}")
        if plan.tokenizer:
            self.retok = load_tokenizer(plan.tokenizer)
        if plan.dataset:
            self.dataset = load_dataset(plan.dataset, plan.output_tokens)
            return
        if self.resume is not None:  # the prompts of the interrupted run, not new fits
            self.fits = {b: BucketFit(**f) for b, f in self.resume["fits"].items()}
            for ep in self.eps:
                ep.info.length_fits = [BucketFit(**f) for f in self.resume["length_fits"].get(ep.spec.label, [])]
            return
        for ep in self.eps:
            await ep.counter.calibrate()
        vocab = await unit_words(self.eps[0].counter)
        for target in plan.buckets:
            bucket = str(target)
            for i, ep in enumerate(self.eps):
                if i == 0:
                    fit = await fit_bucket(ep.counter, target, plan.seed, bucket, method=ep.counter.method, vocab=vocab)
                    self.fits[bucket] = fit
                else:
                    base = self.fits[bucket]
                    text = bucket_prompt(plan.api, base, plan.seed, ("fit", bucket), plan.output_tokens)
                    text_s = text.payload if isinstance(text.payload, str) else text.payload[0]["content"]
                    got = await ep.counter(str(text_s))
                    fit = base.model_copy(
                        update={"achieved": got, "deviation": got - target, "method": ep.counter.method, "probes": 1}
                    )
                ep.info.length_fits.append(fit)
                ep.info.token_count_method = ep.counter.method
                if fit.deviation:
                    self.rep.note(
                        f"{ep.spec.label}: bucket {bucket} prompts are {fit.achieved} tokens "
                        f"({fit.deviation:+d}) on this server"
                    )

    def _prompts(self, bucket: str, head: tuple[object, ...]) -> PromptMaker:
        return PromptMaker(self.plan, self.fits.get(bucket), self.dataset, head)

    # ------------------------------------------------------------------ one step

    async def _step(
        self,
        ep: Endpoint,
        bucket: str,
        load: _Load,
        repeat: int,
        acc: StepAccumulator,
        sink: RowSink,
        cont: dict[str, Any] | None = None,
        position: int = 0,
    ) -> None:
        """Run one step on one endpoint; each finished request's row goes to `acc` and `sink` at once (nothing is
        held per request), also when the step is interrupted. `cont` carries on a checkpointed step: request
        numbers after those already sent, the measuring time left, no second warm-up."""
        plan = self.plan
        trace = self.dataset is not None and self.dataset[0].at_s is not None
        n_trace = len(self.dataset) if trace and self.dataset else None
        if plan.workers > 1 and self.parts is not None:
            await self._step_workers(ep, bucket, load, repeat, acc, position)
            return
        first = int(cont["issued"]) if cont else 0
        duration = plan.duration_s
        if cont and duration is not None:
            duration = max(duration - float(cont["measured_s"]), 1e-3)
        requests = n_trace or plan.requests
        if cont and requests is not None:
            requests = max(requests - int(cont["measured"]), 1)
        bounds = StepBounds(
            requests=requests,
            duration_s=None if trace else duration,
            warmup_requests=0 if trace or cont else plan.warmup_requests,
            warmup_s=0.0 if trace or cont else plan.warmup_s,
        )
        prompts: dict[int, Prompt] = {}  # requests in flight only
        label = ep.spec.label
        windows = self.windows

        make = self._prompts(bucket, (bucket, load.step, repeat))

        async def send(j: int) -> RequestRecord:
            i = j + first
            self.current_issued = i + 1
            p = make(i)
            prompts[j] = p
            rec = await ep.client.generate(p.api, request_body(plan, p, ep.info.model, ep.extra, ep.min_field))
            if rec.failure is not None and rec.failure.kind != FailureKind.CANCELLED:
                took = ((rec.end_ns or rec.send_ns) - rec.send_ns) / 1e9
                if took < FAIL_BACKOFF_S:
                    await asyncio.sleep(FAIL_BACKOFF_S - took)
            return rec

        rows = StepRows(acc, sink, first, prompts, self._retok, lambda ok: self._counted(ep, ok))

        def on_done(s: Sent) -> None:  # a soak's windows take each row as it ends
            row = self._row(ep, bucket, load, repeat, s, prompts.pop(s.index, None))
            row["index"] = s.index + first
            acc.add(row)
            sink.add(row)
            if windows is not None:
                windows.add(label, row, time.perf_counter_ns())
            self._counted(ep, s.record.ok)

        what = f"c={load.concurrency}" if load.concurrency else (f"{load.rate:g} req/s" if load.rate else "trace")
        self.rep.step_started(
            f"{ep.spec.label} bucket {bucket} {what}" + (f" #{repeat + 1}" if repeat else ""), bounds.max_requests
        )
        t0, wall = time.perf_counter_ns(), time.time()
        # measuring time already spent (a resumed step) counts as if the step had started that much earlier
        t_start = t0 - (int(float(cont["elapsed_s"]) * 1e9) if cont else 0)
        self.current = {
            "acc": acc,
            "t0": t_start,
            "warm_s": 0.0 if cont else bounds.warmup_s,
            "measured0": float(cont["measured_s"]) if cont else 0.0,
            "t_resume": t0,
        }
        self.current_issued = first
        if windows is not None:
            w = cont.get("window") if cont else None
            windows.start(
                label,
                t_start,
                wall - (t0 - t_start) / 1e9,
                acc.labels,
                first_index=int(w["index"]) if w else 0,
                acc=StepAccumulator.from_dict(w["acc"], plan.seed) if w else None,
            )
        done = on_done if windows is not None else rows.done
        try:
            if load.concurrency:
                await run_concurrency(send, load.concurrency, bounds, self.stop, done, keep=False)
            else:
                offsets: Iterable[float]
                if trace and self.dataset:
                    offsets = [(p.at_s or 0.0) / plan.trace_speed for p in self.dataset]
                else:
                    assert load.rate is not None
                    # a bounded step draws what it needs; a timed one draws as it goes (memory flat in its length)
                    offsets = iter_arrival_offsets(
                        plan.arrival, load.rate, plan.seed, plan.burstiness, bounds.max_requests
                    )
                await run_schedule(send, offsets, bounds, self.stop, done, plan.max_inflight, keep=False)
        finally:
            rows.flush()
            self.current = None
            if windows is not None:
                windows.finish(label, time.perf_counter_ns())
            self._timed(ep, bucket, load, repeat, t0, wall)

    def _counted(self, ep: Endpoint, ok: bool) -> None:
        """One more finished request of `ep`: progress, and the run stopped past --max-error-rate."""
        ep.finished += 1
        ep.failed += not ok
        self.rep.request_done(ok)
        limit = self.plan.max_error_rate
        if limit is not None and ep.finished >= MIN_FOR_ERROR_RATE and ep.failed / ep.finished > limit:
            self.stop.set(
                f"{ep.spec.label}: error rate {ep.failed / ep.finished:.0%} over --max-error-rate "
                f"{limit:.0%} after {ep.finished} requests"
            )

    def _timed(self, ep: Endpoint, bucket: str, load: _Load, repeat: int, t0: int, wall: float) -> None:
        """A step's start and end, kept for the report (and to line scrapes up with steps)."""
        self.state.times.append(
            StepTime(
                endpoint=ep.spec.label,
                bucket=bucket,
                step=load.step,
                repeat=repeat,
                start_ns=t0,
                end_ns=time.perf_counter_ns(),
                start_wall=wall,
            )
        )

    def _row(self, ep: Endpoint, bucket: str, load: _Load, repeat: int, s: Sent, p: Prompt | None) -> dict[str, Any]:
        row = row_from_record(
            s.record,
            endpoint=ep.spec.label,
            step=load.step,
            repeat=repeat,
            concurrency=load.concurrency,
            rate=load.rate,
            bucket=bucket,
            isl_target=p.isl_target if p else None,
            osl_target=p.max_tokens if p else None,
            index=s.index,
            warmup=s.warmup,
            sched_ns=s.sched_ns,
        )
        row["retok_tokens"] = self._retok(s.record)
        return row

    def _retok(self, rec: RequestRecord) -> int | None:
        """The output re-tokenized by the client (--tokenizer), a cross-check of N; None without one."""
        if self.retok is None or not rec.ok:
            return None
        return len(self.retok.encode(rec.text, add_special_tokens=False).ids)

    # ------------------------------------------------------------------ the run

    async def run(self) -> tuple[BenchReport, RunDir]:
        plan = self.plan
        report = BenchReport(name=plan.name, created_wall=time.time(), plan=plan, endpoints=[])
        nofile = open_files_for(max([*(plan.concurrency or [1]), plan.max_inflight or 1]) * len(plan.endpoints))
        try:
            await self._prepare()
        except BaseException:
            for ep in self.eps:
                await ep.client.close()
            raise
        report.endpoints = [ep.info for ep in self.eps]
        report.client_memory = ClientMemory(idle_rss_mb=rss_mb(), open_files_limit=nofile)
        if self.calibration is None and self.calibrate_fn is not None:
            self.rep.note("calibrating the client against a zero-work server ...")
            self.calibration = await self.calibrate_fn()
        report.calibration = self.calibration
        ck = self.resume
        rd = RunDir.open(self.run_dir) if ck is not None and self.run_dir else RunDir.create(self.runs_dir, plan.name)
        self.run_dir = rd.path
        report.run_dir = str(rd.path)
        writer = self._writer(rd, report, ck)
        sink = RowSink(writer)
        if ck is None:
            rd.write_json("config", plan)
        rd.write_json("endpoints", {"endpoints": [e.info.model_dump() for e in self.eps]})
        for ep in self.eps:
            ep.scraper = Scraper(
                ep.client,
                ep.spec.label,
                ep.spec.engine,
                plan.scrape_interval_s,
                on_rows=self.metrics_writer.append,
                version=ep.info.engine_version,
            )
            ep.scraper.start()
        trace = self.dataset is not None and self.dataset[0].at_s is not None
        buckets = ["dataset"] if self.dataset is not None else [str(b) for b in plan.buckets]
        cal = self.calibration
        ceiling = {"req_per_s": cal.req_per_s * 1.0, "chunks_per_s": cal.chunks_per_s} if cal else None
        slo = Slo(ttft_ms=plan.slos.ttft_p99_ms, tpot_ms=plan.slos.tpot_p99_ms, e2e_ms=plan.slos.e2e_p99_ms)
        ticker = asyncio.create_task(self._checkpoints(rd, report, sink, writer)) if plan.checkpoint_s else None
        position = -1
        try:
            for bucket in buckets:
                for load in _loads(plan, trace):
                    for repeat in range(plan.repeats):
                        for ep in self.eps:  # A B A B: every endpoint at this step before the next step
                            position += 1
                            if self.stop.is_set or position < self.done:
                                continue
                            cont = ck["current"] if ck and ck.get("current") and position == ck["done"] else None
                            acc = (
                                resumed_step(self, cont, report)
                                if cont
                                else self._accumulator(ep, bucket, load, repeat, slo, ceiling)
                            )
                            try:
                                await self._step(ep, bucket, load, repeat, acc, sink, cont, position)
                            finally:
                                self._keep(sink, ep, bucket, load, acc)
                                self.done = position + 1
        except (asyncio.CancelledError, KeyboardInterrupt):
            report.interrupted = True
            self.stop.set("interrupted (Ctrl-C)")
            raise
        finally:
            await self._close(report, rd, sink, writer, ticker)
        return report, rd

    def _writer(self, rd: RunDir, report: BenchReport, ck: dict[str, Any] | None) -> Any:
        """Where request rows go: Parquet parts (workers, soak: resumed from the checkpoint `ck`) or one file."""
        plan = self.plan
        if plan.workers > 1:  # each worker writes its own part; the parent writes none
            self.parts = rd.path / "requests"
            self.metrics_writer = rd.record_writer("metrics", SCRAPE_SCHEMA, redacted=False)  # the scraper masks
            return PartWriter(self.parts, ROW_SCHEMA)
        if not plan.checkpoint_s:
            # RowSink masks failure messages; statistics for scalar columns only (writer memory per row group)
            self.metrics_writer = rd.record_writer("metrics", SCRAPE_SCHEMA, redacted=False)  # the scraper masks
            return RecordWriter(
                rd.file("requests.parquet"),
                ROW_SCHEMA,
                redacted=False,
                statistics=STAT_COLUMNS,
                dictionary=DICT_COLUMNS,
            )
        report.soak = Soak(**ck["soak"]) if ck else Soak(window_s=plan.window_s, checkpoint_s=plan.checkpoint_s)
        if ck:
            report.soak.resumed.append(time.time())
            report.created_wall = float(ck["created_wall"])
            report.calibration = None if ck["calibration"] is None else Calibration(**ck["calibration"])
            restore(self, ck)
        self.windows = Windows(
            report.soak,
            plan.seed,
            lambda label: next(  # the engine's memory, last scrape
                (ep.scraper.process_rss for ep in self.eps if ep.spec.label == label and ep.scraper), None
            ),
        )
        self.metrics_writer = PartWriter(
            rd.path / "metrics", SCRAPE_SCHEMA, first_part=int(ck["metrics_parts"]) if ck else 0
        )
        return PartWriter(
            rd.path / "requests",
            ROW_SCHEMA,
            first_part=int(ck["parts"]) if ck else 0,
            statistics=STAT_COLUMNS,
            dictionary=DICT_COLUMNS,
        )

    async def _close(
        self, report: BenchReport, rd: RunDir, sink: RowSink, writer: Any, ticker: asyncio.Task[None] | None
    ) -> None:
        """Stop the checkpoints and scrapers, close the clients and writers, and conclude the report."""
        if ticker is not None:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
        for ep in self.eps:
            if ep.scraper is not None:
                await ep.scraper.stop()
                report.notes.append(ep.scraper.note())
            ep.info.chunk_stamps = ep.client.chunk_stamps() or "; ".join(sorted(self.worker_stamps)) or None
            await ep.client.close()
        rd.write_json("endpoints", {"endpoints": [e.info.model_dump() for e in self.eps]})  # now with stamps
        sink.flush()
        writer.close()
        self._scraped()
        self.metrics_writer.close()
        self._finish(report, rd)

    async def _step_workers(
        self, ep: Endpoint, bucket: str, load: _Load, repeat: int, acc: StepAccumulator, position: int
    ) -> None:
        """The step from `--workers` processes (bench/workers.py); their rows are parts in requests/."""
        from switchover.bench.workers import run_step_workers

        assert self.parts is not None
        self.rep.step_started(
            f"{ep.spec.label} bucket {bucket} "
            + (f"c={load.concurrency}" if load.concurrency else f"{load.rate:g} req/s")
            + f" ({self.plan.workers} workers)",
            None,
        )
        t0, wall = time.perf_counter_ns(), time.time()
        try:
            self.worker_loads = await run_step_workers(
                self, ep, bucket, load.step, repeat, load.concurrency, load.rate, acc, self.parts, position
            )
        finally:
            self._timed(ep, bucket, load, repeat, t0, wall)

    async def _checkpoints(self, rd: RunDir, report: BenchReport, sink: RowSink, writer: Any) -> None:
        """Every --checkpoint-every seconds: parts closed, checkpoint.json, summary.json and report.html."""
        assert self.plan.checkpoint_s is not None
        while True:
            await asyncio.sleep(self.plan.checkpoint_s)
            write_checkpoint(self, rd, report, sink, writer)

    def _accumulator(
        self, ep: Endpoint, bucket: str, load: _Load, repeat: int, slo: Slo, ceiling: dict[str, float] | None
    ) -> StepAccumulator:
        labels = {
            "endpoint": ep.spec.label,
            "step": load.step,
            "repeat": repeat,
            "concurrency": load.concurrency,
            "rate": load.rate,
            "bucket": bucket,
        }
        return StepAccumulator(slo=slo, client_ceiling=ceiling, labels=labels, seed=self.plan.seed)

    def _keep(self, sink: RowSink, ep: Endpoint, bucket: str, load: _Load, acc: StepAccumulator) -> None:
        """A finished (or interrupted) step: its rows written, its summary kept, its samples kept for the knee."""
        sink.flush()
        self._scraped()
        if not acc.rows:
            return
        s = acc.summary()
        s.workers, self.worker_loads = self.worker_loads, []
        self.state.steps.append(s)
        self.state.client.append(acc.client_queue(s))
        key = (ep.spec.label, bucket, load.step)
        vals = self.state.keys.get(key)
        if vals is None:
            vals = self.state.keys[key] = StepValues(x=float(load.concurrency or load.rate or 0))
        for metric in {"ttft", "tpot", "e2e", self.plan.knee_metric}:
            vals.samples.setdefault(metric, Samples(KNEE_LIMIT, self.plan.seed)).merge(acc.samples[metric])
        self.rep.step_done(s)

    def _scraped(self) -> None:
        """Move what the scrapers read so far to metrics.parquet (a row group), so a long run holds none of it."""
        rows: list[Mapping[str, Any]] = []
        for ep in self.eps:
            if ep.scraper is not None:
                rows += ep.scraper.take()
        if rows:
            self.metrics_writer.append(rows)

    def _finish(self, report: BenchReport, rd: RunDir) -> None:
        plan = self.plan
        report.steps = self.state.steps
        report.client = self.state.client
        if report.client_memory is not None:
            # the kernel's high-water mark lags per-thread counters by a few pages: never below what was read
            report.client_memory.peak_rss_mb = max(peak_rss_mb(), report.client_memory.idle_rss_mb or 0.0)
        report.step_times = self.state.times
        report.stopped_reason = self.stop.reason
        report.knees = knees(self.state.keys, plan)
        report.ab = ab_steps(self.state.keys, self.state.steps, [ep.spec.label for ep in self.eps], plan.seed)
        report.checks = slo_checks(report.steps, plan.slos)
        report.checks += regression_checks([(a.step, a.concurrency, d) for a in report.ab for d in a.deltas], plan.slos)
        report.passed = all(c.passed for c in report.checks) if report.checks else None
        if any(s.client_flag for s in report.steps):
            report.notes.append(
                "some steps used more than 70% of the client's calibrated ceiling: their latencies "
                "measure the client as well as the engine"
            )
        if report.soak is not None:
            report.soak.drift = drift_table(report.soak.windows, report.soak.window_s)
            if rd.has("checkpoint.json"):
                rd.write_json("checkpoint", {**rd.read_json("checkpoint"), "finished": True})
        rd.write_json("summary", report)
        from switchover.bench.report import write_report

        write_report(rd, report)


__all__ = ["BenchRun", "NullReporter", "Reporter"]
