"""Load generator vs peers: sustained req/s and chunks/s of switchover's generator, AIPerf and vLLM's
`bench serve` against the same zero-work streaming server, each client pinned to the same core.

    python bench/loadgen_vs_peers.py [--concurrency 64] [--requests 6000] [--chunks 64] [--repeats 3]
                                     [--tools switchover,aiperf,vllm] [--timing]
    python bench/loadgen_vs_peers.py --cli [--concurrency 64,1024,10000]   # the whole CLI (bench/loadgen_cli.py)

Setup (separate environments, nothing added to switchover's own):
  - AIPerf:  python3 -m venv ~/.cache/switchover/bench-venvs/aiperf && .../aiperf/bin/pip install aiperf
  - vLLM:    the test bed's venv (`switchover testbed setup`); its `vllm` console script is broken for the CPU wheel,
             so `vllm.benchmarks.serve` is called through a two-line runner (see VLLM_RUNNER).
The server (`python -m switchover.testing zero`) runs on --server-core; every client on --client-core
(taskset; AIPerf's worker processes inherit the affinity). Each tool sends the same number of requests at the
same concurrency; each tool's own duration is used (first send to last response). chunks/s = req/s × chunks
per response (the server always sends exactly max_tokens events). `--timing` also measures switchover's chunk
timestamp error against a server that stamps its own send times (paced events, 256 streams).

Client CPU per request is the robust figure on a shared machine: each tool runs c requests --baseline-runs times
(default 3), then N requests --repeats times (default 3, the tools alternating; medians reported), and the
median CPU of the small runs (start-up, imports, connection set-up) is
subtracted (resource.RUSAGE_CHILDREN: the tool and the descendants it reaped; AIPerf's worker processes are
reaped, so they count). When the N requests cost less than twice the small runs' spread, the figure is reported
as not measurable (vLLM's start-up, importing torch, varies by seconds) instead of a number.

Measured 2026-11-29 14:37 UTC on the 2-vCPU dev box, quiet (engines stopped; raw HTTP/1.1 transport with kernel
receive timestamps), `python bench/loadgen_vs_peers.py --concurrency 64 --requests 6000 --chunks 64 --timing`:
    tool         wall req/s  chunks/s cpu ms/req core req/s core chunks/s ours÷tool wall ours÷tool core
    switchover         4618    295553      0.206       4855        310736          1.00×          1.00×
    aiperf              198     12704      5.476        183         11688         23.27×         26.59×
    vllm               1431     91559      0.866       1154         73884          3.23×          4.21×
      (per round: switchover 0.229 / 0.178 / 0.206, aiperf 5.476 / 5.168 / 5.763, vllm 0.822 / 0.866 / 1.116 ms)
    timing error at 256 streams (paced server, 20 ms between events): p50 5.8 µs, p99 21.9 µs, 248 req/s
Both targets are met: 4.2× vLLM's client per core (3.2× wall), and p99 timing error 22 µs < 100 µs. With stamps
taken in user space (13:30 UTC, same box) the timing error was p50 85 µs, p99 4.2 ms: when many sockets are ready
in one event-loop turn, the last ones are read milliseconds later; the kernel's receive time is not. With 2000
requests vLLM's figure is often "not measurable": its start-up (importing torch) varies by up to 0.8 s of CPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from switchover.gctune import quiet_gc
from switchover.subproc import stop

VENVS = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "switchover" / "bench-venvs"
VLLM_RUNNER = (
    "import sys\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))\n"
)


def pinned(core: int, cmd: list[str]) -> list[str]:
    return ["taskset", "-c", str(core), *cmd] if shutil.which("taskset") else cmd


def start_server(core: int, chunks: int, itl_ms: float = 0.0) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        pinned(
            core,
            [
                sys.executable,
                "-m",
                "switchover.testing",
                "zero",
                "--port",
                "0",
                "--chunks",
                str(chunks),
                "--itl-ms",
                str(itl_ms),
            ],
        ),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{int(proc.stdout.readline())}"


# ------------------------------------------------------------------------------------------ switchover


async def _switchover(url: str, concurrency: int, requests: int, chunks: int) -> dict[str, float]:
    from switchover.bench.scheduler import StepBounds, StopFlag, run_concurrency
    from switchover.wire import EngineClient, Timeouts

    async with EngineClient(url, timeouts=Timeouts(5, 60, 60, 120), max_connections=concurrency) as c:
        body = {"model": "zero", "prompt": "x", "max_tokens": chunks, "stream": True}

        async def send(_: int):  # type: ignore[no-untyped-def]
            return await c.generate("completions", body)

        sent = await run_concurrency(send, concurrency, StepBounds(requests=requests), StopFlag())
    recs = [s.record for s in sent]
    ok = [r for r in recs if r.ok and len(r.chunk_ns) == chunks]
    dur = (max(r.end_ns or 0 for r in recs) - min(r.send_ns for r in recs)) / 1e9
    return {"req_per_s": len(ok) / dur, "duration_s": dur, "completed": len(ok)}


async def _timing(url: str, concurrency: int, duration: float) -> dict[str, float]:
    from switchover.bench.calibrate import measure

    cal = await measure(url, concurrency=concurrency, chunks=50, duration_s=duration, warmup_s=1.0)
    return {
        "p50_us": cal.timing_error_p50_us or -1,
        "p99_us": cal.timing_error_p99_us or -1,
        "req_per_s": cal.req_per_s,
        "chunks_per_s": cal.chunks_per_s,
    }


async def _bench_run(url: str, concurrency: int, requests: int, chunks: int, runs_dir: str) -> dict[str, float]:
    """The whole `switchover bench` pipeline on one endpoint: prompts fitted, rows streamed to Parquet, summary."""
    from switchover.bench.runner import BenchRun
    from switchover.evidence.bench import BenchPlan, EndpointSpec

    plan = BenchPlan(
        name="memory",
        endpoints=[EndpointSpec(label="zero", url=url)],
        buckets=[16],
        output_tokens=chunks,
        concurrency=[concurrency],
        requests=requests,
        warmup_requests=0,
        scrape_interval_s=0,
        calibrate=False,
        use_tokenize=False,
        timeout_s=120,
    )
    t0 = time.perf_counter()
    report, rd = await BenchRun(plan, runs_dir).run()
    s = report.steps[0]
    # req/s nan, not 0, when the step had no measurable duration
    return {
        "req_per_s": math.nan if s.req_per_s is None else s.req_per_s,
        "ok": s.ok,
        "wall_s": time.perf_counter() - t0,
        "parquet_mb": rd.file("requests.parquet").stat().st_size / 1e6,
    }


def run_memory(core: int, url: str, a: argparse.Namespace, n: int, work: Path) -> dict[str, float]:
    """One full bench run of n requests in a child process: its peak RSS (ru_maxrss of that child alone)."""
    runs = work / f"runs-{n}"
    proc = subprocess.Popen(
        pinned(
            core,
            [sys.executable, __file__, "--_bench_child", url, str(a.concurrency), str(n), str(a.chunks), str(runs)],
        ),
        stdout=subprocess.PIPE,
        text=True,
    )
    t0 = time.monotonic()
    out = proc.stdout.read() if proc.stdout else ""
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"bench child exited {proc.returncode}")
    res = json.loads(out.strip().splitlines()[-1])
    shutil.rmtree(runs, ignore_errors=True)
    return {
        **res,
        "peak_rss_mb": ru.ru_maxrss / 1024,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "elapsed_s": time.monotonic() - t0,
    }


def memory_main(a: argparse.Namespace) -> None:
    """Peak RSS of `switchover bench` (the whole pipeline) at each of --memory's request counts, and the ratios."""
    counts = [int(x) for x in a.memory.split(",")]
    server, url = start_server(a.server_core, a.chunks)
    res: dict[int, dict[str, float]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in counts:
                res[n] = run_memory(a.client_core, url, a, n, Path(tmp))
                print(f"[{n} requests: {res[n]['elapsed_s']:.0f} s]", file=sys.stderr)
    finally:
        stop(server)
    load = os.getloadavg()
    print(
        f"switchover bench (rows to Parquet, streaming summary) against the zero-work server on core "
        f"{a.server_core}, client on core {a.client_core}; c={a.concurrency}, {a.chunks} chunks per response; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(
        f"{'requests':>10}{'peak RSS MB':>13}{'wall s':>9}{'req/s':>9}{'CPU s':>8}{'parquet MB':>12}{'RSS ÷ first':>13}"
    )
    base = res[counts[0]]["peak_rss_mb"]
    for n in counts:
        r = res[n]
        print(
            f"{n:>10}{r['peak_rss_mb']:>13.1f}{r['elapsed_s']:>9.0f}{r['req_per_s']:>9.0f}{r['cpu_s']:>8.1f}"
            f"{r['parquet_mb']:>12.1f}{r['peak_rss_mb'] / base:>12.2f}×"
        )


def children_cpu() -> float:
    """User + system CPU seconds of every finished child (and its reaped descendants)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_switchover(core: int, url: str, a: argparse.Namespace, n: int, work: Path) -> dict[str, float]:
    out = subprocess.run(
        pinned(core, [sys.executable, __file__, "--_child", url, str(a.concurrency), str(n), str(a.chunks)]),
        capture_output=True,
        text=True,
        timeout=a.timeout,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------ peers


def run_aiperf(core: int, url: str, a: argparse.Namespace, n: int, work: Path) -> dict[str, float]:
    exe = VENVS / "aiperf" / "bin" / "aiperf"
    if not exe.exists():
        venv = VENVS / "aiperf"
        raise RuntimeError(f"{exe} missing: python3 -m venv {venv} && {venv}/bin/pip install aiperf")
    art = work / f"aiperf-{n}"
    cmd = [
        str(exe),
        "profile",
        "--model",
        "zero",
        "--url",
        url,
        "--endpoint-type",
        "completions",
        "--streaming",
        "--tokenizer",
        a.tokenizer,
        "--isl",
        "16",
        "--isl-stddev",
        "0",
        "--osl",
        str(a.chunks),
        "--concurrency",
        str(a.concurrency),
        "--request-count",
        str(n),
        "--use-server-token-count",
        "--ui-type",
        "none",
        "--artifact-dir",
        str(art),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    out = subprocess.run(pinned(core, cmd), capture_output=True, text=True, timeout=a.timeout, env=env)
    found = sorted(art.rglob("profile_export_aiperf.json"))
    if out.returncode != 0 or not found:
        raise RuntimeError(f"aiperf rc={out.returncode}: {(out.stderr or out.stdout)[-1500:]}")
    data = json.loads(found[0].read_text())
    rt = data.get("request_throughput") or {}
    dur = data.get("benchmark_duration") or {}
    count = data.get("completed_request_count") or data.get("request_count") or {}
    return {
        "req_per_s": float(rt.get("avg")),
        "duration_s": float(dur.get("avg", 0) or 0),
        "completed": float(count.get("avg", 0) or 0),
    }


def vllm_bench_argv(
    py: Path,
    url: str,
    tokenizer: str,
    *,
    chat: bool,
    input_len: int,
    output_len: int,
    prompts: int,
    concurrency: int,
    result: Path,
) -> list[str]:
    """vLLM `bench serve` (through VLLM_RUNNER) with random prompts, EOS ignored, no warm-ups, its result as JSON."""
    api = (
        ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions"]
        if chat
        else ["--backend", "openai", "--endpoint", "/v1/completions"]
    )
    return [
        str(py),
        "-c",
        VLLM_RUNNER,
        *api,
        "--base-url",
        url,
        "--model",
        "zero",
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--num-prompts",
        str(prompts),
        "--max-concurrency",
        str(concurrency),
        "--ignore-eos",
        "--num-warmups",
        "0",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        str(result.parent),
        "--result-filename",
        result.name,
    ]


def run_vllm(core: int, url: str, a: argparse.Namespace, n: int, work: Path) -> dict[str, float]:
    from switchover.testbed.layout import Layout

    py = Layout.default().vllm_python
    if not py.exists():
        raise RuntimeError(f"{py} missing: run `switchover testbed setup`")
    cmd = vllm_bench_argv(
        py,
        url,
        a.tokenizer,
        chat=False,
        input_len=16,
        output_len=a.chunks,
        prompts=n,
        concurrency=a.concurrency,
        result=work / f"vllm-{n}.json",
    )
    out = subprocess.run(
        pinned(core, cmd), capture_output=True, text=True, timeout=a.timeout, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    res = work / f"vllm-{n}.json"
    if out.returncode != 0 or not res.exists():
        raise RuntimeError(f"vllm rc={out.returncode}: {(out.stderr or out.stdout)[-1500:]}")
    data = json.loads(res.read_text())
    return {
        "req_per_s": float(data["request_throughput"]),
        "duration_s": float(data["duration"]),
        "completed": float(data["completed"]),
    }


# ------------------------------------------------------------------------------------------ main


def _print_results(a: argparse.Namespace, results: dict[str, dict[str, float] | str], base_n: int) -> None:
    """The comparison table and each tool's baseline line."""
    print(
        f"zero-work server on core {a.server_core}, clients on core {a.client_core}; "
        f"c={a.concurrency}, {a.requests} requests, {a.chunks} chunks each"
    )
    print("wall: the tool's own req/s.  cpu: client CPU per request (run of N minus a run of c requests, so start-up")
    print("and imports cancel), and the req/s one dedicated core would sustain at that cost (1 / cpu per request).")
    head = f"{'tool':<12}{'wall req/s':>11}{'chunks/s':>10}{'cpu ms/req':>11}{'core req/s':>11}{'core chunks/s':>14}"
    print(head + f"{'ours÷tool wall':>15}{'ours÷tool core':>15}")
    ours = results.get("switchover")
    for tool, r in results.items():
        if isinstance(r, str):
            print(f"{tool:<12}{r}")
            continue
        core_rps = 1000 / r["cpu_per_request_ms"] if r["cpu_per_request_ms"] > 0 else float("nan")
        wall = ours["req_per_s"] / r["req_per_s"] if isinstance(ours, dict) and r["req_per_s"] else float("nan")
        cpu = r["cpu_per_request_ms"] / ours["cpu_per_request_ms"] if isinstance(ours, dict) else float("nan")
        print(
            f"{tool:<12}{r['req_per_s']:>11.0f}{r['req_per_s'] * a.chunks:>10.0f}{r['cpu_per_request_ms']:>11.3f}"
            f"{core_rps:>11.0f}{core_rps * a.chunks:>14.0f}{wall:>14.2f}×{cpu:>14.2f}×"
        )
    for tool, r in results.items():
        if isinstance(r, dict) and "baseline_cpu_s" in r:
            per_round = ", ".join(f"{x:.3f}" for x in r["cpu_per_request_ms_rounds"])
            print(
                f"  {tool}: start-up + {base_n} requests {r['baseline_cpu_s']:.2f} s CPU (median of "
                f"{a.baseline_runs}, spread {r['baseline_spread_s']:.2f} s), subtracted; cpu ms/req per round: "
                f"{per_round} (median shown)"
            )


def _child() -> bool:
    """Run as one of this script's own measuring children (`--_child`, `--_bench_child`); False when not one."""
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    if role not in ("--_child", "--_bench_child"):
        return False
    import uvloop

    url, c, n, k = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    quiet_gc()  # as `switchover bench` runs (gctune.py)
    work = _switchover(url, c, n, k) if role == "--_child" else _bench_run(url, c, n, k, sys.argv[6])
    print(json.dumps(uvloop.run(work)))
    return True


def _cli(a: argparse.Namespace) -> None:
    """--cli: the whole command beside the stripped path and the peers (bench/loadgen_cli.py); exits 1 on a missed
    target."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from loadgen_cli import cli_main

    a.requests = a.requests or 40_000
    if a.tools == "switchover,aiperf,vllm":
        a.tools = "cli,stripped,vllm,aiperf,guidellm"
    sys.exit(cli_main(a, start_server, stop))


def main() -> None:
    if _child():
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default="64", help="streams in flight (--cli: a list, e.g. 64,1024,10000)")
    ap.add_argument("--requests", type=int, default=None, help="requests per run (default 2000; --cli: 40000)")
    ap.add_argument("--chunks", type=int, default=64, help="SSE events per response")
    ap.add_argument("--tools", default="switchover,aiperf,vllm")
    ap.add_argument("--client-core", type=int, default=0)
    ap.add_argument("--server-core", type=int, default=1)
    ap.add_argument("--tokenizer", default=str(Path.home() / ".cache/switchover/testbed/models-r1/tiny-llama-v1"))
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--timing", action="store_true", help="also measure chunk timing error at 256 streams")
    ap.add_argument("--repeats", type=int, default=3, help="measured runs per tool, alternating tools; medians")
    ap.add_argument(
        "--baseline-runs",
        type=int,
        default=3,
        help="runs of c requests whose median CPU (start-up) is subtracted; their spread bounds the noise",
    )
    ap.add_argument(
        "--memory",
        metavar="N1,N2",
        help="instead: peak RSS of the whole `switchover bench` pipeline "
        "at these request counts (e.g. 10000,1000000) and the ratio to the first",
    )
    ap.add_argument(
        "--cli",
        action="store_true",
        help="instead: the whole `switchover bench` command (JSONL "
        "dataset, Parquet, summary) beside the stripped path, vLLM, AIPerf and guidellm (loadgen_cli.py)",
    )
    ap.add_argument("--peer-requests", type=int, default=3000, help="--cli: requests for AIPerf and guidellm")
    ap.add_argument(
        "--startup",
        action="store_true",
        help="--cli: also run the CLI, the stripped path and vLLM with c requests, and give CPU per request with "
        "start-up taken out (req/s per core: steady where the wall clock is shared)",
    )
    a = ap.parse_args()
    if a.cli:
        _cli(a)
    a.concurrency = int(a.concurrency)
    a.requests = a.requests or 2000
    if a.memory:
        memory_main(a)
        return
    tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    runners = {"switchover": run_switchover, "aiperf": run_aiperf, "vllm": run_vllm}
    base_n = a.concurrency  # one round of requests: start-up, imports and connection set-up
    results: dict[str, dict[str, float] | str] = {}
    server, url = start_server(a.server_core, a.chunks)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            base: dict[str, list[float]] = {}
            rounds: dict[str, list[dict[str, float]]] = {}
            for tool in tools:  # start-up + one round of requests, several times: its spread is the noise floor
                try:
                    if tool not in runners:
                        raise ValueError(f"unknown tool {tool!r}")
                    base[tool] = []
                    for _ in range(a.baseline_runs):
                        c0 = children_cpu()
                        runners[tool](a.client_core, url, a, base_n, Path(tmp))
                        base[tool].append(children_cpu() - c0)
                    rounds[tool] = []
                except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError, TypeError) as exc:
                    results[tool] = f"failed: {str(exc).strip()[:600]}"
            for k in range(a.repeats):  # the measured runs, tools alternating, so drift hits all alike
                for tool in rounds:
                    t0 = time.monotonic()
                    try:
                        c1 = children_cpu()
                        r = runners[tool](a.client_core, url, a, a.requests, Path(tmp))
                        r["work_cpu_s"] = children_cpu() - c1 - statistics.median(base[tool])
                        rounds[tool].append(r)
                    except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError, TypeError) as exc:
                        results[tool] = f"failed: {str(exc).strip()[:600]}"
                    print(f"[{tool} round {k + 1} done in {time.monotonic() - t0:.0f} s]", file=sys.stderr)
            for tool, rs in rounds.items():
                if tool in results:
                    continue
                spread = max(base[tool]) - min(base[tool])
                work = statistics.median(r["work_cpu_s"] for r in rs)
                if work <= 2 * spread:  # the requests cost less than start-up varies: no figure
                    results[tool] = (
                        f"CPU per request not measurable: the {a.requests} requests cost {work:.2f} s "
                        f"over start-up, which itself varies by {spread:.2f} s; raise --requests"
                    )
                    continue
                results[tool] = {
                    "req_per_s": statistics.median(r["req_per_s"] for r in rs),
                    "cpu_per_request_ms": work / (a.requests - base_n) * 1000,
                    "cpu_per_request_ms_rounds": [r["work_cpu_s"] / (a.requests - base_n) * 1000 for r in rs],
                    "baseline_cpu_s": statistics.median(base[tool]),
                    "baseline_spread_s": spread,
                }
    finally:
        stop(server)
    _print_results(a, results, base_n)
    if a.timing:
        import uvloop

        srv, purl = start_server(a.server_core, 50, itl_ms=20)
        try:
            t = subprocess.run(
                pinned(
                    a.client_core,
                    [
                        sys.executable,
                        "-c",
                        "import json,sys,uvloop;sys.path.insert(0, sys.argv[1]);"
                        "import loadgen_vs_peers as m;m.quiet_gc();"
                        "print(json.dumps(uvloop.run(m._timing(sys.argv[2], 256, 5.0))))",
                        str(Path(__file__).parent),
                        purl,
                    ],
                ),
                capture_output=True,
                text=True,
                timeout=120,
            )
            print(
                "timing error at 256 streams (paced server, 20 ms between events):", t.stdout.strip() or t.stderr[-800:]
            )
        finally:
            stop(srv)
        del uvloop


if __name__ == "__main__":
    main()
