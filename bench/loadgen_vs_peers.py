"""Load generator vs peers: sustained req/s and chunks/s of switchover's generator, AIPerf and vLLM's
`bench serve` against the same zero-work streaming server, each client pinned to the same core.

    python bench/loadgen_vs_peers.py [--concurrency 64] [--requests 2000] [--chunks 64]
                                     [--tools switchover,aiperf,vllm] [--timing]

Setup (separate environments, nothing added to switchover's own):
  - AIPerf:  python3 -m venv ~/.cache/switchover/bench-venvs/aiperf && .../aiperf/bin/pip install aiperf
  - vLLM:    the test bed's venv (`switchover testbed setup`); its `vllm` console script is broken for the CPU wheel,
             so `vllm.benchmarks.serve` is called through a two-line runner (see VLLM_RUNNER).
The server (`python -m switchover.bench.zerowork`) runs on --server-core; every client on --client-core
(taskset; AIPerf's worker processes inherit the affinity). Each tool sends the same number of requests at the
same concurrency; each tool's own duration is used (first send to last response). chunks/s = req/s × chunks
per response (the server always sends exactly max_tokens events). `--timing` also measures switchover's chunk
timestamp error against a server that stamps its own send times (paced events, 256 streams).

Client CPU per request is the robust figure on a shared machine: each tool runs twice (c requests, then N) and the
CPU of the first run (start-up, imports, connection set-up) is subtracted (resource.RUSAGE_CHILDREN: the tool and
the descendants it reaped; AIPerf's worker processes are reaped, so they count).

Measured 2026-11-29 14:00 UTC on the 2-vCPU dev box, quiet (engines stopped; raw HTTP/1.1 transport with kernel
receive timestamps), `python bench/loadgen_vs_peers.py --concurrency 64 --requests 2000 --chunks 64 --timing`:
    tool         wall req/s  chunks/s cpu ms/req core req/s core chunks/s ours÷tool wall ours÷tool core
    switchover         4991    319406      0.184       5424        347104          1.00×          1.00×
    aiperf              196     12527      5.550        180         11531         25.50×         30.10×
    vllm               1459     93360      0.745       1342         85874          3.42×          4.04×
    timing error at 256 streams (paced server, 20 ms between events): p50 5.5 µs, p99 19.0 µs, 249 req/s
Both targets are met: 4.0× vLLM's client per core (3.4× wall), and p99 timing error 19 µs < 100 µs. With stamps
taken in user space (13:30 UTC, same box) the timing error was p50 85 µs, p99 4.2 ms: when many sockets are ready
in one event-loop turn, the last ones are read milliseconds late; the kernel's receive time is not.
On a busy box (load ~10, 12:00 UTC, aiohttp transport) the same command gave 0.70 ms/request and 1.9× vLLM.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    proc = subprocess.Popen(pinned(core, [sys.executable, "-m", "switchover.bench.zerowork", "--port", "0",
                                          "--chunks", str(chunks), "--itl-ms", str(itl_ms)]),
                            stdout=subprocess.PIPE, text=True)
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
    return {"p50_us": cal.timing_error_p50_us or -1, "p99_us": cal.timing_error_p99_us or -1,
            "req_per_s": cal.req_per_s, "chunks_per_s": cal.chunks_per_s}


def children_cpu() -> float:
    """User + system CPU seconds of every finished child (and its reaped descendants)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_switchover(core: int, url: str, a: argparse.Namespace, n: int, work: Path) -> dict[str, float]:
    out = subprocess.run(pinned(core, [sys.executable, __file__, "--_child", url, str(a.concurrency),
                                       str(n), str(a.chunks)]), capture_output=True, text=True,
                         timeout=a.timeout)
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
    cmd = [str(exe), "profile", "--model", "zero", "--url", url, "--endpoint-type", "completions", "--streaming",
           "--tokenizer", a.tokenizer, "--isl", "16", "--isl-stddev", "0", "--osl", str(a.chunks),
           "--concurrency", str(a.concurrency), "--request-count", str(n), "--use-server-token-count",
           "--ui-type", "none", "--artifact-dir", str(art)]
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    out = subprocess.run(pinned(core, cmd), capture_output=True, text=True, timeout=a.timeout, env=env)
    found = sorted(art.rglob("profile_export_aiperf.json"))
    if out.returncode != 0 or not found:
        raise RuntimeError(f"aiperf rc={out.returncode}: {(out.stderr or out.stdout)[-1500:]}")
    data = json.loads(found[0].read_text())
    rt = data.get("request_throughput") or {}
    dur = data.get("benchmark_duration") or {}
    count = data.get("completed_request_count") or data.get("request_count") or {}
    return {"req_per_s": float(rt.get("avg")), "duration_s": float(dur.get("avg", 0) or 0),
            "completed": float(count.get("avg", 0) or 0)}


def run_vllm(core: int, url: str, a: argparse.Namespace, n: int, work: Path) -> dict[str, float]:
    from switchover.testbed.layout import Layout

    py = Layout.default().vllm_python
    if not py.exists():
        raise RuntimeError(f"{py} missing: run `switchover testbed setup`")
    cmd = [str(py), "-c", VLLM_RUNNER, "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
           "--model", "zero", "--tokenizer", a.tokenizer, "--dataset-name", "random", "--random-input-len", "16",
           "--random-output-len", str(a.chunks), "--num-prompts", str(n), "--max-concurrency",
           str(a.concurrency), "--ignore-eos", "--num-warmups", "0", "--disable-tqdm", "--save-result",
           "--result-dir", str(work), "--result-filename", f"vllm-{n}.json"]
    out = subprocess.run(pinned(core, cmd), capture_output=True, text=True, timeout=a.timeout,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    res = work / f"vllm-{n}.json"
    if out.returncode != 0 or not res.exists():
        raise RuntimeError(f"vllm rc={out.returncode}: {(out.stderr or out.stdout)[-1500:]}")
    data = json.loads(res.read_text())
    return {"req_per_s": float(data["request_throughput"]), "duration_s": float(data["duration"]),
            "completed": float(data["completed"])}


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_child":
        import uvloop

        url, c, n, k = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        print(json.dumps(uvloop.run(_switchover(url, c, n, k))))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--chunks", type=int, default=64, help="SSE events per response")
    ap.add_argument("--tools", default="switchover,aiperf,vllm")
    ap.add_argument("--client-core", type=int, default=0)
    ap.add_argument("--server-core", type=int, default=1)
    ap.add_argument("--tokenizer", default=str(Path.home() / ".cache/switchover/testbed/models-r1/tiny-llama-v1"))
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--timing", action="store_true", help="also measure chunk timing error at 256 streams")
    a = ap.parse_args()
    tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    runners = {"switchover": run_switchover, "aiperf": run_aiperf, "vllm": run_vllm}
    base_n = a.concurrency  # one round of requests: start-up, imports and connection set-up
    results: dict[str, dict[str, float] | str] = {}
    server, url = start_server(a.server_core, a.chunks)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for tool in tools:
                t0 = time.monotonic()
                try:
                    if tool not in runners:
                        raise ValueError(f"unknown tool {tool!r}")
                    c0 = children_cpu()
                    runners[tool](a.client_core, url, a, base_n, Path(tmp))
                    c1 = children_cpu()
                    r = runners[tool](a.client_core, url, a, a.requests, Path(tmp))
                    c2 = children_cpu()
                    r["cpu_per_request_ms"] = ((c2 - c1) - (c1 - c0)) / (a.requests - base_n) * 1000
                    results[tool] = r
                except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError, TypeError) as exc:
                    results[tool] = f"failed: {str(exc).strip()[:600]}"
                print(f"[{tool} done in {time.monotonic() - t0:.0f} s]", file=sys.stderr)
    finally:
        server.terminate()
        server.wait()
    print(f"zero-work server on core {a.server_core}, clients on core {a.client_core}; "
          f"c={a.concurrency}, {a.requests} requests, {a.chunks} chunks each")
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
        print(f"{tool:<12}{r['req_per_s']:>11.0f}{r['req_per_s'] * a.chunks:>10.0f}{r['cpu_per_request_ms']:>11.3f}"
              f"{core_rps:>11.0f}{core_rps * a.chunks:>14.0f}{wall:>14.2f}×{cpu:>14.2f}×")
    if a.timing:
        import uvloop

        srv, purl = start_server(a.server_core, 50, itl_ms=20)
        try:
            t = subprocess.run(pinned(a.client_core, [sys.executable, "-c",
                                                      "import json,sys,uvloop;sys.path.insert(0, sys.argv[1]);"
                                                      "import loadgen_vs_peers as m;"
                                                      "print(json.dumps(uvloop.run(m._timing(sys.argv[2], 256, 5.0))))",
                                                      str(Path(__file__).parent), purl]),
                               capture_output=True, text=True, timeout=120)
            print("timing error at 256 streams (paced server, 20 ms between events):",
                  t.stdout.strip() or t.stderr[-800:])
        finally:
            srv.terminate()
            srv.wait()
        del uvloop


if __name__ == "__main__":
    main()
