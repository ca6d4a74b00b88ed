"""`bench sweep`: relaunch an engine for each parameter value, wait until it generates, run the ladder, stop
it, and plot a metric against the parameter (e.g. a block-size sweep)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shlex
import signal
import subprocess
import time
from html import escape
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from pydantic import BaseModel, Field

from switchover.atomicfile import write_atomic
from switchover.bench.capbind import engine_version, launch_cap, step_limits
from switchover.bench.oom import process_end
from switchover.bench.runner import BenchRun, Reporter
from switchover.errors import BadInput, SwitchoverError
from switchover.evidence.bench import BenchPlan, BenchReport, EndpointSpec
from switchover.evidence.bench_caps import advice
from switchover.runs import RunDir
from switchover.wire.readiness import check_ready


def parse_params(specs: list[str]) -> dict[str, list[str]]:
    """`k=v1,v2` strings to {k: [v1, v2]}; BadInput naming the bad one."""
    out: dict[str, list[str]] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key.strip().isidentifier() or not vals:
            raise BadInput(f"--param must look like name=v1,v2 (got {spec!r})")
        out[key.strip()] = vals
    if not out:
        raise BadInput("give at least one --param name=v1,v2")
    return out


def commands(launch: str, params: dict[str, list[str]]) -> list[tuple[dict[str, str], list[str]]]:
    """Every combination of parameter values and the launch command it produces."""
    for key in params:
        if "{" + key + "}" not in launch:
            raise BadInput(f"--launch does not contain {{{key}}}")
    out = []
    for combo in itertools.product(*params.values()):
        values = dict(zip(params, combo, strict=True))
        try:
            cmd = launch.format(**values)
        except (KeyError, IndexError) as exc:
            raise BadInput(f"--launch has a placeholder with no --param: {exc}") from None
        out.append((values, shlex.split(cmd)))
    return out


class SweepPoint(BaseModel):
    params: dict[str, str]
    run_dir: str | None
    ready_s: float | None = None
    error: str | None = None
    tpot_p99_ms: dict[str, float] = Field(default_factory=dict, description="load -> p99 TPOT")
    ttft_p99_ms: dict[str, float] = Field(default_factory=dict)
    out_tok_per_s: dict[str, float] = Field(default_factory=dict)
    knee: float | None = None
    knee_message: str | None = None
    caps: dict[str, str] = Field(
        default_factory=dict,
        description="load (bucket@load when the run has several prompt buckets) -> the cap that bound",
    )
    oom: dict[str, int] = Field(default_factory=dict, description="load -> out-of-memory answers (bench/oom.py)")
    oom_rate: dict[str, float] = Field(default_factory=dict, description="load -> OOM answers / measured requests")
    engine_end: str | None = Field(default=None, description="The engine process ended during its bench: how")
    engine_oom: bool = Field(default=False, description="It ended for memory (an OOM text in its log)")
    advice: list[str] = Field(default_factory=list, description="'on <engine> at <load> the <cap> bound: raise ...'")

    def line(self) -> str:
        """The point's caps and OOM answers in one line for the console ('' when it has neither)."""
        parts = [f"{load}: {cap}" for load, cap in self.caps.items() if cap not in ("none", "unknown")]
        ooms = [f"{load}: {n}" for load, n in self.oom.items() if n]
        out = ("cap bound at " + ", ".join(parts) if parts else "") + ("; " if parts and ooms else "")
        out += ("OOM answers at " + ", ".join(ooms)) if ooms else ""
        return out + (f"; engine gone: {self.engine_end}" if self.engine_end else "")


class SweepReport(BaseModel):
    launch: str
    url: str
    points: list[SweepPoint]
    run_dir: str


def _stop(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


async def _wait_ready(proc: subprocess.Popen[bytes], url: str, model: str | None, timeout_s: float, log: Path) -> float:
    t0 = time.monotonic()
    last = "not checked"
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise SwitchoverError(f"the engine exited with {proc.returncode} during start-up: " + " | ".join(tail))
        r = await check_ready(url, model=model, max_ms=30000, connect_timeout_s=1)
        if r.ready:
            return time.monotonic() - t0
        last = r.reason
        await asyncio.sleep(0.5)
    raise SwitchoverError(f"not ready after {timeout_s:g} s: {last}")


def _load(concurrency: int | None, rate: float | None) -> str:
    return f"{concurrency if concurrency is not None else rate:g}"


def _limits(p: SweepPoint, report: BenchReport, cmd: list[str]) -> None:
    """The point's binding caps (the request cap read from its launch where the release data knows the flag) and
    OOM answers per load."""
    ep = report.endpoints[0] if report.endpoints else None
    if report.run_dir is None or ep is None:
        return
    cap = launch_cap(ep.engine, engine_version(ep.engine, ep.info), cmd)
    if cap is not None:  # the cap the launch set, instead of one inferred from the running peak: kept in summary.json
        report.limits = step_limits(Path(report.run_dir), report, caps={ep.label: cap})
        RunDir.open(report.run_dir).write_json("summary", report)
    loads = {(s.endpoint, s.bucket or "", s.step, s.repeat): _load(s.concurrency, s.rate) for s in report.steps}
    requests: dict[str, int] = {}
    several = len({lim.bucket for lim in report.limits}) > 1  # then each bucket at a load keeps its own verdict
    for lim in report.limits:
        load = loads.get((lim.endpoint, lim.bucket, lim.step, lim.repeat))
        if load is None:
            continue
        p.caps[f"{lim.bucket}@{load}" if several else load] = lim.binding
        p.oom[load] = p.oom.get(load, 0) + lim.oom
        requests[load] = requests.get(load, 0) + lim.requests
    p.oom_rate = {load: round(p.oom[load] / n, 4) for load, n in requests.items() if n}
    p.advice = advice(report.limits, {ep.label: ep.engine})


def _point(values: dict[str, str], report: BenchReport) -> SweepPoint:
    p = SweepPoint(params=values, run_dir=report.run_dir)
    for s in report.steps:
        load = _load(s.concurrency, s.rate)
        if s.tpot_ms is not None:
            p.tpot_p99_ms[load] = s.tpot_ms.p99
        if s.ttft_ms is not None:
            p.ttft_p99_ms[load] = s.ttft_ms.p99
        if s.out_tok_per_s is not None:
            p.out_tok_per_s[load] = s.out_tok_per_s
    knee = next(iter(report.knees.values()), None)
    if knee is not None:
        p.knee, p.knee_message = knee.concurrency, knee.message
    return p


async def run_sweep(
    launch: str,
    params: dict[str, list[str]],
    plan: BenchPlan,
    url: str,
    runs_dir: str | Path,
    *,
    ready_timeout_s: float = 600.0,
    reporter: Reporter | None = None,
) -> SweepReport:
    """Launch, wait, bench, stop — once per parameter combination; the engine is always stopped."""
    combos = commands(launch, params)
    rd = RunDir.create(runs_dir, f"{plan.name}-sweep")
    points: list[SweepPoint] = []
    spec = plan.endpoints[0]
    try:
        for values, cmd in combos:
            label = ",".join(f"{k}={v}" for k, v in values.items())
            log = rd.file("engine-" + "-".join(f"{k}{v}" for k, v in values.items()) + ".log")
            with log.open("ab") as fh:
                try:
                    proc = subprocess.Popen(
                        cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
                    )
                except OSError as exc:
                    raise BadInput(f"--launch: cannot start {cmd[0]!r}: {exc.strerror or exc}") from None
            try:
                ready_s = await _wait_ready(proc, url, spec.model, ready_timeout_s, log)
                sub = plan.model_copy(
                    update={"name": label, "endpoints": [spec.model_copy(update={"label": label, "url": url})]}
                )
                report, _ = await BenchRun(sub, rd.path, reporter).run()
                pt = _point(values, report)
                _limits(pt, report, cmd)
                pt.ready_s = ready_s
            except SwitchoverError as exc:
                pt = SweepPoint(params=values, run_dir=None, error=exc.message)
            finally:
                gone = proc.poll()
                _stop(proc)
            if gone is not None:  # the engine ended during its bench: for memory, if its log says so
                end = process_end(gone, _tail(log))
                pt.engine_end, pt.engine_oom = end.reason, end.oom
            points.append(pt)
            rd.write_json("sweep", SweepReport(launch=launch, url=url, points=points, run_dir=str(rd.path)))
    finally:
        result = SweepReport(launch=launch, url=url, points=points, run_dir=str(rd.path))
        rd.write_json("sweep", result)
        write_atomic(rd.file("sweep.html"), sweep_html(result))
    return result


def _tail(log: Path, limit: int = 1 << 20) -> str:
    """The last `limit` bytes of an engine log (where an OOM traceback is)."""
    try:
        with log.open("rb") as fh:
            fh.seek(max(0, log.stat().st_size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def sweep_html(rep: SweepReport) -> str:
    """p99 TPOT (one line per load) and the knee against the parameter combination."""
    xs = [",".join(f"{k}={v}" for k, v in p.params.items()) for p in rep.points]
    fig = go.Figure()
    loads = sorted({k for p in rep.points for k in p.tpot_p99_ms}, key=lambda s: float(s))
    for load in loads:
        fig.add_trace(
            go.Scatter(
                x=xs, y=[p.tpot_p99_ms.get(load) for p in rep.points], mode="lines+markers", name=f"TPOT p99 @ {load}"
            )
        )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[p.knee for p in rep.points],
            mode="markers",
            name="knee (concurrency)",
            yaxis="y2",
            marker={"symbol": "x", "size": 12},
        )
    )
    fig.update_layout(
        title=f"sweep: {rep.launch}",
        xaxis_title="parameter",
        yaxis_title="TPOT p99 (ms)",
        yaxis2={"title": "knee", "overlaying": "y", "side": "right"},
        height=480,
    )
    errors = "".join(f"<li>{escape(str(p.params))}: {escape(p.error)}</li>" for p in rep.points if p.error)
    errors += "".join(
        f"<li>{escape(str(p.params))}: engine gone{' (out of memory)' if p.engine_oom else ''}: "
        f"{escape(p.engine_end)}</li>"
        for p in rep.points
        if p.engine_end
    )
    body: Any = fig.to_html(full_html=False, include_plotlyjs=True) + _oom_html(rep, xs)
    advice_items = "".join(f"<li>{escape(a)}</li>" for p in rep.points for a in p.advice)
    body += f"<h2>Binding caps</h2><ul>{advice_items}</ul>" if advice_items else ""
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>switchover sweep</title></head><body>{body}"
        + (f"<h2>Errors</h2><ul>{errors}</ul>" if errors else "")
        + "</body></html>"
    )


def _oom_html(rep: SweepReport, xs: list[str]) -> str:
    """OOM rate (OOM answers / measured requests) against the parameter, one line per load; an engine that died
    for memory during its bench is marked at 100 %."""
    loads = sorted({k for p in rep.points for k in p.oom_rate}, key=lambda s: float(s))
    if not loads and not any(p.engine_oom for p in rep.points):
        return ""
    fig = go.Figure()
    for load in loads:
        fig.add_trace(
            go.Scatter(
                x=xs, y=[p.oom_rate.get(load) for p in rep.points], mode="lines+markers", name=f"OOM rate @ {load}"
            )
        )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[1.0 if p.engine_oom else None for p in rep.points],
            mode="markers",
            name="engine killed for memory",
            marker={"symbol": "x", "size": 12},
        )
    )
    fig.update_layout(
        title="OOM rate against the parameter",
        xaxis_title="parameter",
        yaxis_title="OOM answers / requests",
        yaxis={"range": [0, 1.05]},
        height=360,
    )
    return str(fig.to_html(full_html=False, include_plotlyjs=False))


__all__ = ["EndpointSpec", "SweepReport", "commands", "parse_params", "run_sweep"]
