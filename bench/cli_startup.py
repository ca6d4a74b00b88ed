"""How long `switchover` takes to start: median wall time of `--help`, `--version` and every verb's `--help` (each
command and group of the root: `plan --help`, `rollout --help`, ...) over N fresh processes, against the 0.3 s goal
of issue 26, and the ten imports that cost most (`python -X importtime`) when the CLI module loads.

Wall and CPU (user + system) seconds, in two columns: with bytecode cached (as a user's install runs: .pyc files
kept, here in a temporary PYTHONPYCACHEPREFIX written by one warm-up run) and as this environment runs it
(PYTHONDONTWRITEBYTECODE=1 here makes every start compile switchover's own sources again). Beside it, the peers the
test bed holds, when set up: vLLM's OpenAI server (`python -m vllm.entrypoints.openai.api_server --help`, as the
test bed starts it; its `vllm` console script has no package metadata there) and `llama-server`. Figures depend on
the machine's load, printed with them.

    python bench/cli_startup.py [--runs 5] [--peer-runs 3] [--no-peers] [--only VERB ...]

To compare with another tree (e.g. before a change): `git archive REV src | tar -x -C /tmp/old` and run with
PYTHONPATH=/tmp/old/src.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 0.3  # issue 26: `--help` and `--version` of every verb within this, bytecode cached
TESTBED = Path(os.environ.get("SWITCHOVER_TESTBED_DIR", Path.home() / ".cache" / "switchover" / "testbed"))
_IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (.*)$")


def _medians(jobs: list[tuple[list[str], dict[str, str]]], runs: int) -> list[tuple[float, float, int]]:
    """Median wall and CPU (user + system) seconds of each (argv, env) job over `runs` fresh processes (output
    discarded), and its last exit code; the jobs take turns, so a burst of load falls on all of them alike."""
    times: list[list[float]] = [[] for _ in jobs]
    cpu: list[list[float]] = [[] for _ in jobs]
    codes = [0] * len(jobs)
    for _ in range(runs):
        for i, (argv, env) in enumerate(jobs):
            c0, t0 = _children_cpu(), time.perf_counter()
            codes[i] = subprocess.run(
                argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
            ).returncode
            times[i].append(time.perf_counter() - t0)
            cpu[i].append(_children_cpu() - c0)
    return [(statistics.median(t), statistics.median(c), code) for t, c, code in zip(times, cpu, codes, strict=True)]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cell(median: float, cpu: float, code: int) -> str:
    """Wall seconds / CPU seconds (the CPU figure moves less with the machine's load)."""
    return f"{median:.3f} / {cpu:.3f}" + ("" if code == 0 else f" (exit {code})")


def _top_imports(python: str, module: str, env: dict[str, str], n: int = 10) -> list[tuple[float, float, str]]:
    """The `n` modules with the largest cumulative import time (ms) when `module` is imported: (cumulative, self,
    name), from one `-X importtime` run."""
    done = subprocess.run(
        [python, "-X", "importtime", "-c", f"import {module}"], env=env, capture_output=True, text=True, check=False
    )
    rows = []
    for line in done.stderr.splitlines():
        m = _IMPORT_LINE.match(line)
        if m:
            rows.append((int(m.group(2)) / 1000, int(m.group(1)) / 1000, m.group(3).strip()))
    return sorted(rows, reverse=True)[:n]


def _ours() -> list[str]:
    """switchover's console script beside this interpreter (no shell shim in between), else `python -m`."""
    script = Path(sys.executable).parent / "switchover"
    return [str(script)] if script.exists() else [sys.executable, "-m", "switchover"]


def _envs(cache: str) -> dict[str, dict[str, str]]:
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = cache
    return {"bytecode cached": cached, "as this env runs": dict(os.environ)}


def _commands(only: list[str] | None) -> list[list[str]]:
    """`--help`, `--version`, then `VERB --help` for every verb the root lists (or those of --only)."""
    from switchover.cli.app import VERBS

    names = [v.name for v in VERBS if not only or v.name in only]
    return [["--help"], ["--version"], *([name, "--help"] for name in names)]


def _print_ours(runs: int, only: list[str] | None) -> None:
    base = _ours()
    ours = _commands(only)
    load = os.getloadavg()
    print(f"switchover start: median wall / CPU seconds of {runs} runs of `{' '.join(base)} ...`")
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}"
    )
    with tempfile.TemporaryDirectory(prefix="cli-startup-pyc-") as cache:
        envs = _envs(cache)
        for argv in ours:  # one warm-up run writes the bytecode the cached column reads
            subprocess.run(
                [*base, *argv],
                env=envs["bytecode cached"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
        print(f"  {'command':<36}" + "".join(f"{name:>24}" for name in envs) + f"  < {GOAL_S} s: wall / CPU (cached)")
        jobs = [([*base, *argv], env) for argv in ours for env in envs.values()]
        results = iter(_medians(jobs, runs))
        over: dict[str, list[str]] = {"wall": [], "CPU": []}
        for argv in ours:
            measured = [next(results) for _ in envs]
            marks = []
            for i, kind in enumerate(over):  # wall moves with the machine's load; CPU seconds much less
                ok = measured[0][i] < GOAL_S
                marks.append("ok" if ok else "OVER")
                if not ok:
                    over[kind].append(" ".join(argv))
            print(
                f"  {'switchover ' + ' '.join(argv):<36}"
                + "".join(f"{_cell(*m):>24}" for m in measured)
                + f"  {' / '.join(marks)}"
            )
        for kind, names in over.items():
            print(f"over {GOAL_S} s {kind} with bytecode cached: {', '.join(names) if names else 'none'}")
        print("top 10 cumulative imports of `import switchover.cli.app` (bytecode cached, ms cumulative / self):")
        for cumulative, own, name in _top_imports(sys.executable, "switchover.cli.app", envs["bytecode cached"]):
            print(f"  {cumulative:9.1f} {own:9.1f}  {name}")


def _print_peers(runs: int) -> None:
    vllm_python = next(iter(sorted(TESTBED.glob("vllm-*/venv/bin/python"))), None)
    llama = next(iter(sorted(TESTBED.glob("llama-cpp-*/bin/llama-server"))), None)
    if vllm_python is None and llama is None:
        print(
            f"peers: none installed here (no test bed under {TESTBED}; vllm, guidellm, aiperf: "
            f"{', '.join(n for n in ('vllm', 'guidellm', 'aiperf') if shutil.which(n)) or 'not on PATH'})"
        )
        return
    print(f"peers (test bed {TESTBED}): median wall / CPU seconds of {runs} runs")
    module = "vllm.entrypoints.openai.api_server"
    jobs = [([str(llama), *argv], dict(os.environ)) for argv in (["--help"], ["--version"])] if llama else []
    if vllm_python is not None:
        jobs.append(([str(vllm_python), "-m", module, "--help"], dict(os.environ)))
    for (argv, _), result in zip(jobs, _medians(jobs, runs), strict=True):
        path = Path(argv[0])
        label = (
            f"{path.parents[1].name}/{path.name} {' '.join(argv[1:])}"
            if path.name == "llama-server"
            else f"{path.parents[2].name} python {' '.join(argv[1:])}"
        )
        print(f"  {label:<72}{_cell(*result):>18}")
    if vllm_python is not None:
        print(f"  top 10 cumulative imports of `import {module}` (ms cumulative / self):")
        for cumulative, own, name in _top_imports(str(vllm_python), module, dict(os.environ)):
            print(f"  {cumulative:9.1f} {own:9.1f}  {name}")


def main() -> None:
    """Print our start-up figures, then the peers'."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per switchover command")
    ap.add_argument("--peer-runs", type=int, default=3, help="fresh processes per peer command (vLLM's takes ~10 s)")
    ap.add_argument("--no-peers", action="store_true", help="only switchover")
    ap.add_argument("--only", nargs="+", metavar="VERB", help="time only these verbs' --help (and the root's)")
    args = ap.parse_args()
    if args.runs < 1 or args.peer_runs < 1:
        ap.error("--runs and --peer-runs must be at least 1")
    _print_ours(args.runs, args.only)
    if not args.no_peers:
        _print_peers(args.peer_runs)


if __name__ == "__main__":
    main()
