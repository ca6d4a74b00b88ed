"""CLI mode of bench/loadgen_vs_peers.py: the whole `switchover bench` command as a user types it (JSONL dataset,
prompt fitting, rows to Parquet, summary) beside the stripped path (scheduler + wire client only, the same chat
bodies) and beside vLLM `bench serve`, AIPerf and guidellm where installed, against one zero-work server, each
client pinned to one core. The CLI and the stripped path run --repeats times (default 3) at each concurrency,
alternating, and each is represented by its median run (every run's req/s is printed): one run of either on a
shared 2-core box varied by up to ±8 %, enough to move their ratio across a target. The peers run once. At
c >= 10,000 the CLI also runs once with 2.5x the requests (the same dataset, cycled), and its memory is called flat
when its peak over idle grew at most 10 % (+ 10 MB).

    python bench/loadgen_vs_peers.py --cli [--concurrency 64,1024] [--requests 40000] [--chunks 64] [--repeats 3]
        [--tools cli,stripped,vllm,aiperf,guidellm] [--peer-requests 3000]

Per tool: its own req/s (first send to last response, as the tool reports it), CPU seconds and peak RSS of the
tool's process tree (os.wait4 of that child: ru_maxrss is the largest one process of the tree reached), and for
the CLI its own idle RSS (before the first step) and client-queueing figures (requests on the wire vs waiting in
the client, send lag; bench/clientload.py). MB = 10^6 bytes throughout. AIPerf and guidellm manage ~100-200 req/s
here, so they send --peer-requests requests (their req/s does not depend on the count once past start-up).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_TEXT = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have "
    "an they you were her she there been one all we their"
)
WORDS = tuple(_TEXT.split(" "))


def write_dataset(path: Path, n: int, words: int = 124, seed: int = 0) -> None:
    """n chat prompts of `words` words each (~128 tokens with the template: the zero server counts words + 4)."""
    rng = random.Random(seed)
    with path.open("w") as f:
        for _ in range(n):
            text = " ".join(rng.choice(WORDS) for _ in range(words))
            f.write(json.dumps({"messages": [{"role": "user", "content": text}]}) + "\n")


def pinned(core: int, cmd: list[str]) -> list[str]:
    return ["taskset", "-c", str(core), *cmd] if shutil.which("taskset") else cmd


def run_child(core: int, cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one tool to its end on `core`: its output, exit status, and its own CPU seconds and peak RSS (os.wait4:
    the child and the descendants it reaped; ru_maxrss is the largest of them, KiB)."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(pinned(core, cmd), stdout=out, stderr=err, stdin=subprocess.DEVNULL, text=True, env=env)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                return {"failed": f"timed out after {timeout:.0f} s"}
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {
            "rc": proc.returncode,
            "out": out.read(),
            "err": err.read(),
            "wall_s": time.monotonic() - t0,
            "cpu_s": ru.ru_utime + ru.ru_stime,
            "peak_rss_mb": ru.ru_maxrss * 1024 / 1e6,
        }


def _measured(r: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
    return {**res, "cpu_s": r["cpu_s"], "peak_rss_mb": r["peak_rss_mb"]}


def tool_cli(a: argparse.Namespace, url: str, c: int, ds: Path, work: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "switchover",
        "bench",
        "--url",
        url,
        "--api",
        "chat",
        "--dataset",
        str(ds),
        "--concurrency",
        str(c),
        "--requests",
        str(a.requests),
        "--output-tokens",
        str(a.chunks),
        "--warmup-requests",
        "0",
        "--scrape-interval",
        "0",
        "--no-calibrate",
        "--runs-dir",
        str(work / "runs"),
        "--name",
        f"cli-c{c}",
        "--json",
    ]
    r = run_child(a.client_core, cmd, a.timeout)
    if r.get("rc") != 0:
        return {"failed": r.get("failed") or (r.get("err") or "")[-600:]}
    rep = json.loads(r["out"][r["out"].index("{") :])
    s, q, m = rep["steps"][0], rep["client"][0], rep["client_memory"]
    parquet = sum(p.stat().st_size for p in (work / "runs").rglob("requests.parquet")) / 1e6
    return _measured(
        r,
        {
            "req_per_s": s["req_per_s"],
            "requests": s["ok"],
            "on_wire": q["on_wire"],
            "in_client": q["in_client"],
            "send_lag_ms": q["send_lag_ms_mean"],
            "idle_rss_mb": m["idle_rss_mb"],
            "self_peak_rss_mb": m["peak_rss_mb"],
            "parquet_mb": parquet,
        },
    )


def tool_stripped(a: argparse.Namespace, url: str, c: int, ds: Path, work: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--_stripped",
        url,
        str(c),
        str(a.requests),
        str(a.chunks),
        str(ds),
    ]
    r = run_child(a.client_core, cmd, a.timeout)
    if r.get("rc") != 0:
        return {"failed": r.get("failed") or (r.get("err") or "")[-600:]}
    return _measured(r, json.loads(r["out"].strip().splitlines()[-1]))


def tool_vllm(a: argparse.Namespace, url: str, c: int, ds: Path, work: Path) -> dict[str, Any]:
    from switchover.testbed.layout import Layout

    sys.path.insert(0, str(HERE))
    from loadgen_vs_peers import vllm_bench_argv

    py = Layout.default().vllm_python
    if not py.exists():
        return {"failed": f"{py} missing: run `switchover testbed setup`"}
    cmd = vllm_bench_argv(
        py,
        url,
        a.tokenizer,
        chat=True,
        input_len=128,
        output_len=a.chunks,
        prompts=a.requests,
        concurrency=c,
        result=work / f"vllm-c{c}.json",
    )
    r = run_child(a.client_core, cmd, a.timeout, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    res = work / f"vllm-c{c}.json"
    if r.get("rc") != 0 or not res.exists():
        return {"failed": r.get("failed") or (r.get("err") or r.get("out") or "")[-600:]}
    d = json.loads(res.read_text())
    return _measured(r, {"req_per_s": float(d["request_throughput"]), "requests": int(d["completed"])})


def _venv_tool(name: str) -> Path:
    venvs = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "switchover" / "bench-venvs"
    return venvs / name / "bin" / name


def tool_aiperf(a: argparse.Namespace, url: str, c: int, ds: Path, work: Path) -> dict[str, Any]:
    exe = _venv_tool("aiperf")
    if not exe.exists():
        return {"failed": f"not installed ({exe}): python3 -m venv {exe.parent.parent} && pip install aiperf"}
    art = work / f"aiperf-c{c}"
    cmd = [
        str(exe),
        "profile",
        "--model",
        "zero",
        "--url",
        url,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--tokenizer",
        a.tokenizer,
        "--isl",
        "128",
        "--isl-stddev",
        "0",
        "--osl",
        str(a.chunks),
        "--concurrency",
        str(c),
        "--request-count",
        str(a.peer_requests),
        "--use-server-token-count",
        "--ui-type",
        "none",
        "--artifact-dir",
        str(art),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    r = run_child(a.client_core, cmd, a.timeout, env=env)
    found = sorted(art.rglob("profile_export_aiperf.json"))
    if r.get("rc") != 0 or not found:
        return {"failed": r.get("failed") or (r.get("err") or r.get("out") or "")[-600:]}
    d = json.loads(found[0].read_text())
    return _measured(
        r,
        {
            "req_per_s": float(d["request_throughput"]["avg"]),
            "requests": int((d.get("request_count") or {}).get("avg", 0) or 0),
        },
    )


def tool_guidellm(a: argparse.Namespace, url: str, c: int, ds: Path, work: Path) -> dict[str, Any]:
    exe = _venv_tool("guidellm")
    if not exe.exists():
        return {"failed": f"not installed ({exe}): python3 -m venv {exe.parent.parent} && pip install guidellm"}
    out = work / f"guidellm-c{c}.json"
    cmd = [
        str(exe),
        "run",
        "--backend",
        f"kind=openai_http,target={url},model=zero,request_format=/v1/chat/completions",
        "--profile",
        f"kind=concurrent,streams={c}",
        "--constraint",
        f"kind=max_requests,count={a.peer_requests}",
        "--data",
        f"kind=synthetic_text,prompt_tokens=128,output_tokens={a.chunks}",
        "--tokenizer",
        f"kind=huggingface_auto,model={a.tokenizer}",
        "--output",
        f"kind=json,path={out}",
        "--disable-console",
    ]
    r = run_child(a.client_core, cmd, a.timeout, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if r.get("rc") != 0 or not out.exists():
        return {"failed": r.get("failed") or (r.get("err") or r.get("out") or "")[-600:]}
    d = json.loads(out.read_text())
    b = d["benchmarks"][0]
    m = b["metrics"]  # guidellm 0.8's own headline figure: successful requests per second
    return _measured(
        r,
        {
            "req_per_s": float(m["requests_per_second"]["successful"]["mean"]),
            "requests": int(m["request_totals"]["successful"]),
        },
    )


STARTUP = ("cli", "stripped", "vllm")  # tools whose start-up CPU --startup measures (AIPerf, guidellm: too slow)
FLAT, FLAT_SLACK_MB = 0.10, 10  # "flat memory": a run FLAT_FACTOR× longer grows at most 10 % (+ 10 MB) more
FLAT_FACTOR = 2.5  # at c >= FLAT_FROM the CLI also runs once with this many times the requests
FLAT_FROM = 10_000
REPEATED = ("cli", "stripped")  # run --repeats times, alternating, compared by their medians (the others once)
TOOLS = {
    "cli": tool_cli,
    "stripped": tool_stripped,
    "vllm": tool_vllm,
    "aiperf": tool_aiperf,
    "guidellm": tool_guidellm,
}


def _version(tool: str) -> str:
    if tool in ("cli", "stripped"):
        return "this tree"
    if tool == "vllm":
        return "0.32.0 (test bed)"
    exe = _venv_tool(tool)
    pip = exe.parent / "pip"
    if not pip.exists():
        return "not installed"
    out = subprocess.run([str(pip), "show", tool], capture_output=True, text=True).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Version:")), "?")


def cli_main(a: argparse.Namespace, start_server: Any, stop: Any) -> int:
    """Every tool at every concurrency against one zero-work server; the table; 1 when a Done-when target fails."""
    tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    levels = [int(x) for x in str(a.concurrency).split(",")]
    results: dict[tuple[str, int], dict[str, Any]] = {}
    loads: dict[tuple[str, int], str] = {}
    rounds = max(a.repeats, 1)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ds = work / "prompts.jsonl"
        write_dataset(ds, a.requests)
        server, url = start_server(a.server_core, a.chunks)
        try:
            for c in levels:
                runs: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
                for r in range(rounds):
                    for tool in tools:
                        if r and tool not in REPEATED:
                            continue
                        res = _one(a, tool, url, c, ds, work, startup=r == 0)
                        runs[tool].append(res)
                        loads[(tool, c)] = " ".join(f"{x:.2f}" for x in os.getloadavg())
                        print(
                            f"[{tool} c={c} round {r + 1}: {res.get('req_per_s', 0) or 0:.0f} req/s, "
                            f"{res['wall_s']:.0f} s]",
                            file=sys.stderr,
                        )
                for tool in tools:
                    results[(tool, c)] = median_run(runs[tool])
                cli = results.get(("cli", c), {})
                if c >= FLAT_FROM and "req_per_s" in cli:  # the same step, FLAT_FACTOR× as many requests
                    more = argparse.Namespace(**{**vars(a), "requests": int(a.requests * FLAT_FACTOR)})
                    longer = _one(more, "cli", url, c, ds, work, startup=False)  # the same dataset, cycled
                    if "req_per_s" in longer:
                        cli["longer"] = longer
                    else:  # said, never a silently skipped check
                        cli["longer_failed"] = str(longer.get("failed", "no result"))[:300]
                    print(
                        f"[cli c={c}, {more.requests} requests: peak {longer.get('self_peak_rss_mb', 0):.0f} MB]",
                        file=sys.stderr,
                    )
        finally:
            stop(server)
    return _print(a, tools, levels, results, loads)


def _one(a: argparse.Namespace, tool: str, url: str, c: int, ds: Path, work: Path, *, startup: bool) -> dict[str, Any]:
    """One run of `tool` at concurrency c (and, with --startup on the first round, its start-up run of c requests)."""
    t0 = time.monotonic()
    res = TOOLS[tool](a, url, c, ds, work) if tool in TOOLS else {"failed": "unknown tool"}
    res["wall_s"] = time.monotonic() - t0
    if startup and a.startup and tool in STARTUP and "cpu_s" in res:  # the same tool sending c requests
        small = TOOLS[tool](argparse.Namespace(**{**vars(a), "requests": c}), url, c, ds, work)
        if "cpu_s" in small:
            res["startup_cpu_s"] = small["cpu_s"]
    shutil.rmtree(work / "runs", ignore_errors=True)
    return res


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median req/s (the lower middle of an even count) standing for the tool, with every run's
    req/s in `rounds`, its largest RSS growth (a memory bound must hold in every run) and its first start-up CPU;
    a failed run fails the tool."""
    failed = [r for r in runs if "failed" in r]
    if failed or not runs:
        return failed[0] if failed else {"failed": "no run"}
    ranked = sorted(runs, key=lambda r: r["req_per_s"])
    out = dict(ranked[(len(ranked) - 1) // 2])
    out["rounds"] = [r["req_per_s"] for r in runs]
    if all("self_peak_rss_mb" in r for r in runs):
        worst = max(runs, key=lambda r: r["self_peak_rss_mb"] - r["idle_rss_mb"])
        out["self_peak_rss_mb"], out["idle_rss_mb"] = worst["self_peak_rss_mb"], worst["idle_rss_mb"]
    out.pop("startup_cpu_s", None)
    if "startup_cpu_s" in runs[0]:
        out["startup_cpu_s"] = runs[0]["startup_cpu_s"]
    return out


def _print(
    a: argparse.Namespace,
    tools: list[str],
    levels: list[int],
    results: dict[tuple[str, int], dict[str, Any]],
    loads: dict[tuple[str, int], str],
) -> int:
    print(
        f"zero-work server (chat, {a.chunks} one-token chunks + usage) on core {a.server_core}; each client on core "
        f"{a.client_core}; {a.requests} chat prompts of ~128 tokens (AIPerf, guidellm: {a.peer_requests})"
    )
    print("versions: " + ", ".join(f"{t} {_version(t)}" for t in tools))
    failed = False
    for c in levels:
        print(f"\nc={c}")
        print(f"{'tool':<10}{'req/s':>8}{'CLI÷tool':>10}{'CPU s':>8}{'peak RSS MB':>13}  load avg    notes")
        cli = results.get(("cli", c), {})
        for tool in tools:
            r = results[(tool, c)]
            if "failed" in r:
                print(f"{tool:<10} failed: {str(r['failed']).strip()[:400]}")
                continue
            ratio = cli.get("req_per_s", 0) / r["req_per_s"] if r.get("req_per_s") and "req_per_s" in cli else 0
            note = ""
            if len(r.get("rounds", ())) > 1:
                note = "median of " + " / ".join(f"{x:.0f}" for x in r["rounds"]) + " req/s; "
            if tool == "cli":
                growth = r["self_peak_rss_mb"] - r["idle_rss_mb"]
                note += (
                    f"idle RSS {r['idle_rss_mb']:.0f} MB (peak − idle {growth:.0f} MB); on the wire "
                    f"{r['on_wire']:.0f} of {c}, waiting in the client {r['in_client']:.0f}; "
                    f"send lag {r['send_lag_ms']:.2f} ms; Parquet {r['parquet_mb']:.1f} MB"
                )
            print(
                f"{tool:<10}{r['req_per_s']:>8.0f}{ratio:>9.2f}×{r['cpu_s']:>8.1f}{r['peak_rss_mb']:>13.0f}  "
                f"{loads[(tool, c)]:<12}{note}"
            )
        _print_per_core(a, tools, c, results)
        failed |= _verdict(c, results)
    return 1 if failed else 0


def per_core(r: dict[str, Any], requests: int, c: int) -> float | None:
    """Requests one core sustains in the measuring phase: the run's requests beyond the start-up run's c, over the
    CPU seconds beyond its start-up run's (imports, dataset, connections); None when not measured or not above
    the start-up run's CPU (the load on a shared box does not slow this figure the way it slows wall req/s)."""
    if "startup_cpu_s" not in r or "cpu_s" not in r:
        return None
    work = r["cpu_s"] - r["startup_cpu_s"]
    return (requests - c) / work if work > 0 else None


def _print_per_core(a: argparse.Namespace, tools: list[str], c: int, results: dict[tuple[str, int], Any]) -> None:
    """--startup: CPU per request with each tool's start-up taken out, and the CLI's ratio on that basis."""
    if not a.startup:
        return
    cli = per_core(results.get(("cli", c), {}), a.requests, c)
    for tool in tools:
        r = results[(tool, c)]
        core = per_core(r, a.requests, c)
        if core is None:
            continue
        ratio = f", CLI {cli / core:.2f}× per core" if cli and tool != "cli" else ""
        print(
            f"  {tool}: {1000 / core:.3f} ms CPU per request once started (start-up run of {c} requests: "
            f"{r['startup_cpu_s']:.1f} s CPU), {core:.0f} req/s per core{ratio}"
        )


def _verdict(c: int, results: dict[tuple[str, int], dict[str, Any]]) -> bool:
    """Print issue 27's targets at this concurrency; True when one measured here is missed."""
    cli = results.get(("cli", c), {})
    if "req_per_s" not in cli:
        return False
    missed = False
    strip, vllm = results.get(("stripped", c), {}), results.get(("vllm", c), {})
    checks: list[tuple[str, bool]] = []
    if c == 64 and "req_per_s" in strip:
        checks.append(
            (
                f"CLI {cli['req_per_s'] / strip['req_per_s']:.0%} of the stripped path (≥ 80%)",
                cli["req_per_s"] >= 0.8 * strip["req_per_s"],
            )
        )
    if "req_per_s" in vllm:
        want = 5 if c == 64 else 6
        checks.append(
            (
                f"CLI {cli['req_per_s'] / vllm['req_per_s']:.2f}× vLLM bench serve (≥ {want}×)",
                cli["req_per_s"] >= want * vllm["req_per_s"],
            )
        )
    growth = cli["self_peak_rss_mb"] - cli["idle_rss_mb"]
    if c == 1024:
        checks.append((f"CLI peak RSS {growth:.0f} MB above idle (≤ 150 MB)", growth <= 150))
    longer = cli.get("longer")
    if c >= FLAT_FROM and not longer:
        why = cli.get("longer_failed", "the longer run did not run")
        checks.append((f"CLI memory flat in the request count: not measured ({why})", False))
    if longer:  # flat: the growth over idle does not grow with the number of requests
        more = longer["self_peak_rss_mb"] - longer["idle_rss_mb"]
        checks.append(
            (
                f"CLI memory flat in the request count: {growth:.0f} MB above idle at {cli['requests']:,} requests, "
                f"{more:.0f} MB at {longer['requests']:,} (≤ {FLAT:.0%} more, + {FLAT_SLACK_MB} MB)",
                more <= growth * (1 + FLAT) + FLAT_SLACK_MB,
            )
        )
    for text, ok in checks:
        print(f"  {'met' if ok else 'MISSED'}: {text}")
        missed |= not ok
    return missed


def _stripped_child() -> None:
    """`--_stripped url c n chunks dataset`: the scheduler and wire client alone, sending the dataset's chat bodies."""
    import uvloop

    from switchover.gctune import quiet_gc

    url, c, n, k, ds = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
    bodies = [
        {"model": "zero", "messages": json.loads(line)["messages"], "max_tokens": k, "stream": True}
        for line in Path(ds).read_text().splitlines()
    ]
    quiet_gc()

    async def go() -> dict[str, Any]:
        from switchover.bench.scheduler import StepBounds, StopFlag, run_concurrency
        from switchover.wire import EngineClient, Timeouts

        async with EngineClient(url, timeouts=Timeouts(5, 60, 60, 120), max_connections=c) as cl:

            async def send(i: int):  # type: ignore[no-untyped-def]
                return await cl.generate("chat", bodies[i % len(bodies)])

            sent = await run_concurrency(send, c, StepBounds(requests=n), StopFlag())
        recs = [s.record for s in sent]
        ok = [r for r in recs if r.ok and len(r.chunk_ns) == k]
        dur = (max(r.end_ns or 0 for r in recs) - min(r.send_ns for r in recs)) / 1e9
        return {"req_per_s": len(ok) / dur, "requests": len(ok)}

    print(json.dumps(uvloop.run(go())))


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--_stripped":
    _stripped_child()
