"""CPU per request of the whole `switchover bench` command, this tree against another checkout of switchover (an
older commit), run alternately against one zero-work server, each pinned to one core.

    git worktree add /tmp/before <commit>
    python bench/cli_ab.py /tmp/before [--rounds 5] [--requests 40000] [--concurrency 64]

Per round and tree: the CLI sends --requests streamed chat requests (the same 40,000-prompt JSONL dataset as
bench/loadgen_cli.py, 64 one-token chunks + usage), then --concurrency requests; CPU per request is the difference
of the two runs' CPU seconds (os.wait4) over the difference of their request counts, so start-up (imports, the
dataset) and the end (summary, report) cancel out. Wall req/s is the CLI's own figure for the long run. The other
tree runs with PYTHONPATH=<its src>; this tree as installed. Prints each round and the means.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from loadgen_cli import pinned, write_dataset  # noqa: E402
from loadgen_vs_peers import start_server  # noqa: E402

from switchover.subproc import stop  # noqa: E402


def run(src: Path | None, url: str, ds: Path, n: int, c: int, core: int, runs: Path) -> tuple[float, float]:
    """One CLI run: (CPU seconds of its process tree, its wall req/s)."""
    cmd = [sys.executable, "-m", "switchover", "bench", "--url", url, "--api", "chat", "--dataset", str(ds)]
    cmd += ["--concurrency", str(c), "--requests", str(n), "--output-tokens", "64", "--warmup-requests", "0"]
    cmd += ["--scrape-interval", "0", "--no-calibrate", "--runs-dir", str(runs), "--name", "ab", "--json"]
    env = {**os.environ, "PYTHONPATH": str(src)} if src else dict(os.environ)
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(pinned(core, cmd), stdout=out, stderr=subprocess.DEVNULL, env=env, text=True)
        _, status, ru = os.wait4(proc.pid, 0)
        out.seek(0)
        text = out.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(
            f"the CLI failed ({'other' if src else 'this'} tree): exit {os.waitstatus_to_exitcode(status)}"
        )
    rep = json.loads(text[text.index("{") :])
    return ru.ru_utime + ru.ru_stime, float(rep["steps"][0]["req_per_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("other", type=Path, help="another checkout of switchover (its src/ goes on PYTHONPATH)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=40_000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--client-core", type=int, default=0)
    ap.add_argument("--server-core", type=int, default=1)
    a = ap.parse_args()
    other = a.other.resolve() / "src"
    if not (other / "switchover").is_dir():
        raise SystemExit(f"{a.other}: not a checkout of switchover (no src/switchover)")
    got: dict[str, list[tuple[float, float]]] = {"other": [], "this": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ds = work / "prompts.jsonl"
        write_dataset(ds, a.requests)
        server, url = start_server(a.server_core, 64)
        try:
            for r in range(a.rounds):
                for name, src in (("other", other), ("this", None)):
                    big = run(src, url, ds, a.requests, a.concurrency, a.client_core, work / "runs")
                    small = run(src, url, ds, a.concurrency, a.concurrency, a.client_core, work / "runs")
                    us = (big[0] - small[0]) / (a.requests - a.concurrency) * 1e6
                    got[name].append((us, big[1]))
                    print(f"round {r + 1} {name:5s}: {us:6.1f} µs CPU a request, {big[1]:7.0f} req/s", flush=True)
        finally:
            stop(server)
    for name, rows in got.items():
        cpu, rps = statistics.mean(x for x, _ in rows), statistics.mean(y for _, y in rows)
        print(f"{name:5s} tree: mean {cpu:.1f} µs CPU a request, {rps:.0f} req/s ({len(rows)} rounds)")
    ratio = statistics.mean(x for x, _ in got["this"]) / statistics.mean(x for x, _ in got["other"])
    print(f"this tree's CPU a request is {ratio:.2f}× the other's")


if __name__ == "__main__":
    main()
