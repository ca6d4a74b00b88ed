"""The rollback drill (docs/checklist.md#rollout.rollback): stop the new engine, start the old one, and time the
first good response. That figure, not a hope, is the recovery time a rollout may rely on; if it is longer than the
acceptable outage, run both side by side behind the gateway instead of swapping in place.

The stop command must exit. The start command may exit (`systemctl start`, `docker start`) or keep running
as the server itself (`llama-server ...`); then it is left running, detached, and its pid is reported.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from switchover.atomicfile import write_atomic
from switchover.errors import BadInput
from switchover.evidence.drill import DrillResult
from switchover.inputs import base_url
from switchover.redaction import redact
from switchover.termtext import printable
from switchover.warmup import WarmupSettings, measure, ttft_probe
from switchover.wire.readiness import check_ready

Progress = Callable[[str], None]


async def run_drill(
    *,
    stop_cmd: str,
    start_cmd: str,
    url: str,
    model: str | None = None,
    stop_timeout_s: float = 120.0,
    ready_timeout_s: float = 600.0,
    poll_s: float = 0.25,
    max_ms: float = 5000.0,
    log: Path | None = None,
    max_recovery_s: float | None = None,
    warmup: WarmupSettings | None = None,
    progress: Progress | None = None,
) -> DrillResult:
    """Run the drill; every wait is bounded by the given timeouts. The start command's output goes to `log`,
    which is then rewritten with secrets masked, unless the command still runs as the server (its open log cannot
    be replaced under it; that is said in docs). With `warmup`, probing goes on after the first good response until
    the TTFT is steady (the warm-up tail); `progress` gets a line about once a second while it waits."""
    if not stop_cmd.strip() or not start_cmd.strip():
        raise BadInput("--stop-new and --start-old must be commands, e.g. --stop-new 'systemctl stop engine-new'")
    try:
        base_url(url)
    except ValueError as exc:
        raise BadInput(f"--url {exc}") from None
    try:  # before anything is stopped: a log that cannot be written must not leave new stopped and old not started
        out = open(log, "ab") if log is not None else None  # noqa: SIM115 - handed to the child, closed below
    except OSError as exc:
        raise BadInput(f"drill log {log}: cannot be written: {exc.strerror}") from None
    try:
        result = await _drill(
            stop_cmd,
            start_cmd,
            url,
            model,
            stop_timeout_s,
            ready_timeout_s,
            poll_s,
            max_ms,
            out,
            max_recovery_s,
            progress,
        )
        if result.ok and warmup is not None and result.model is not None:
            result.warmup = await measure(
                ttft_probe(url, result.model, timeout_s=max(max_ms / 1000.0 * 4, 5.0)), warmup, progress
            )
            if result.warmup.steady and result.recovery_s is not None and result.warmup.tail_s is not None:
                result.switch_s = round(result.recovery_s + result.warmup.tail_s, 3)
    finally:
        if out is not None:
            out.close()
    if log is not None and result.foreground_pid is None:
        redact_file(log)
    return result


def redact_file(path: Path, max_bytes: int = 64 << 20) -> None:
    """Rewrite a log whole with secrets masked (bytes that are not UTF-8 are kept as they are)."""
    try:
        if not path.is_file() or path.stat().st_size > max_bytes:
            return
        text = path.read_bytes().decode("utf-8", "surrogateescape")
    except OSError:
        return
    clean = redact(text)
    if clean != text:
        write_atomic(path, clean.encode("utf-8", "surrogateescape"))


async def _drill(
    stop_cmd: str,
    start_cmd: str,
    url: str,
    model: str | None,
    stop_timeout_s: float,
    ready_timeout_s: float,
    poll_s: float,
    max_ms: float,
    out: BinaryIO | None,
    max_recovery_s: float | None,
    progress: Progress | None = None,
) -> DrillResult:
    """Stop, start (output to `out`), poll old until the first good response: the timings. Every wait, each
    readiness check included, ends by its deadline."""
    res = DrillResult(
        url=redact(url),
        stop_command=redact(stop_cmd),
        start_command=redact(start_cmd),
        started_wall=time.time(),
        max_recovery_s=max_recovery_s,
    )
    t0 = time.perf_counter()
    stop = subprocess.Popen(
        stop_cmd,
        shell=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    while stop.poll() is None and time.perf_counter() - t0 < stop_timeout_s:
        await asyncio.sleep(0.02)
    if stop.poll() is None:
        stop.kill()
        stop.wait()
        res.reason = f"the stop command did not exit within {stop_timeout_s:g} s"
        return res
    res.stop_s = round(time.perf_counter() - t0, 3)
    res.stop_exit_code = stop.returncode

    t1 = time.perf_counter()
    start = subprocess.Popen(
        start_cmd,
        shell=True,
        stdin=subprocess.DEVNULL,
        stdout=out if out is not None else subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = t1 + ready_timeout_s
    last_line = t1
    while time.perf_counter() < deadline:
        code = start.poll()
        if code is not None and res.start_s is None:
            res.start_s = round(time.perf_counter() - t1, 3)
            res.start_exit_code = code
            if code != 0:
                res.reason = f"the start command exited with {code}"
                return res
        left = deadline - time.perf_counter()
        try:  # the deadline bounds each check too: one against a server that never answers took 4 x max_ms
            r = await asyncio.wait_for(
                check_ready(url, model=model, max_ms=max_ms, connect_timeout_s=min(1.0, max(left, 0.001))), timeout=left
            )
        except TimeoutError:
            res.checks += 1
            res.last_state = "slow"
            res.last_reason = f"a readiness check was still waiting at the {ready_timeout_s:g} s deadline"
            break
        res.checks += 1
        res.last_state, res.last_reason = r.state.value, printable(r.reason)
        if r.ready:
            now = time.perf_counter()
            res.ready_after_start_s = round(now - t1, 3)
            res.recovery_s = round(now - t0, 3)
            res.ok = True
            res.model = r.model
            if start.poll() is None:
                res.foreground_pid = start.pid
            res.within_budget = None if max_recovery_s is None else res.recovery_s <= max_recovery_s
            res.reason = (
                f"first good response {res.recovery_s:.2f} s after the stop was issued "
                f"(stop {res.stop_s:.2f} s, then {res.ready_after_start_s:.2f} s to ready)"
            )
            return res
        if progress is not None and time.perf_counter() - last_line >= 1.0:
            last_line = time.perf_counter()
            progress(f"waiting for old: {res.last_state} {last_line - t1:.1f} s after the start ({res.checks} checks)")
        await asyncio.sleep(max(0.0, min(poll_s, deadline - time.perf_counter())))
    if start.poll() is None:
        res.foreground_pid = start.pid
    res.reason = f"no good response within {ready_timeout_s:g} s of the start command (last: {res.last_reason})"
    return res
