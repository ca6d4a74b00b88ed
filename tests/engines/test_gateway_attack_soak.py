"""Soak under attack: a `switchover gateway` process in front of the test bed's llama-server serves ordinary traffic
at 20 requests a second while, beside it, clients send bodies of a million empty objects, bodies in 1-byte chunks,
prompts built to be slow to redact (sampled for review) and slow-loris heads. The gateway's peak RSS stays under
SOAK_RSS_BUDGET, its /health (polled from another process, so the test's own loop does not colour the figure)
answers with p99 under 100 ms, and every ordinary request has its ledger row.

Only llama-server is started (one of our own, like test_gateway_engines.py's new arm); it is both arms (weight 0,
old), so the soak does not need vLLM's start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml

from switchover.testbed.install import installed
from switchover.testbed.layout import Layout
from switchover.testing import await_until
from switchover.testing import missing as absent
from tests.engines.test_gateway_engines import OwnLlama
from tests.gateway.conftest import connect, http_request, read_all

pytestmark = pytest.mark.engines

MIB = 1 << 20
SOAK_S = 30  # ordinary traffic runs this long (600 requests at 20/s)
RATE = 20
SOAK_RSS_BUDGET = 512 * MIB  # the gateway's peak resident size over the whole soak, start-up included
MEMORY_BUDGET = 256 * MIB  # limits.memory_budget_bytes of the gateway under test

HEALTH_POLLER = r"""
import socket, sys, time, json
port, seconds = int(sys.argv[1]), float(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
req = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
lat, late = [], []
end = time.monotonic() + seconds
while time.monotonic() < end:
    t0 = time.perf_counter()
    s.sendall(req)
    buf = b""
    while b"\r\n\r\n" not in buf:
        got = s.recv(65536)
        assert got, "the gateway closed the health connection"
        buf += got
    head, _, body = buf.partition(b"\r\n\r\n")
    n = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(body) < n:
        got = s.recv(65536)
        assert got, "the gateway closed the health connection"
        body += got
    assert head.startswith(b"HTTP/1.1 200"), head
    lat.append(time.perf_counter() - t0)
    if b"connection: close" in head.lower():  # the keep-alive request budget is spent: a new connection
        s.close()
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
    t1 = time.perf_counter()
    time.sleep(0.02)
    late.append(time.perf_counter() - t1 - 0.02)  # this process's own scheduling delay, for comparison
print(json.dumps({"lat": lat, "late": late}))
"""


class Bed:
    """Just enough of the test bed for OwnLlama: its layout and the tiny model."""

    def __init__(self) -> None:
        self.layout = Layout.default()
        self.key = "tiny"


@pytest.fixture(scope="module")
def llama() -> Any:
    bed = Bed()
    missing = installed(bed.layout)
    if missing:
        absent(f"real-engine tier cannot run: test bed in {bed.layout.root} is missing: {'; '.join(missing)}")
    own = OwnLlama(bed)
    own.start()
    try:
        yield own
    finally:
        own.stop()


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


async def ordinary(http: aiohttp.ClientSession, url: str, model: str, i: int, statuses: dict[str, int]) -> None:
    rid = f"soak-{i:05d}"
    body = {"model": model, "prompt": f"Count to {i % 7}:", "max_tokens": 2, "temperature": 0}
    try:
        async with http.post(
            url + "/v1/completions",
            data=orjson.dumps(body),
            headers={"x-request-id": rid, "x-tenant-id": f"t{i % 13}"},
            timeout=aiohttp.ClientTimeout(total=60),
        ) as r:
            await r.read()
            statuses[rid] = r.status
    except (aiohttp.ClientError, TimeoutError):
        statuses[rid] = -1


async def post_raw(port: int, wire: bytes, write: int = 256 << 10) -> bytes:
    reader, writer = await connect(port)
    try:
        for i in range(0, len(wire), write):
            writer.write(wire[i : i + write])
            await writer.drain()
        got, _ = await read_all(reader, 30)
        return got
    except ConnectionError:
        return b""
    finally:
        writer.close()


def _attack_pairs(run_dir: Path) -> int:
    """Review pairs stored for the redaction attack's requests (their prompt redacted in the gateway)."""
    db = run_dir / "review.sqlite"
    if not db.exists():
        return 0
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as con:
        return int(con.execute("SELECT count(*) FROM pairs WHERE request_id LIKE 'redact-%'").fetchone()[0])


async def body_attack(port: int, stop: asyncio.Event, counts: dict[str, int]) -> None:
    """Bodies of 16 MiB of `{}` (5.6 million empty objects), two a second."""
    head = b'{"model": "m", "prompt": "x", "x": ['
    flood = head + b",".join([b"{}"] * ((16 * MIB) // 3)) + b"]}"
    wire = http_request(body=flood)
    while not stop.is_set():
        t0 = time.monotonic()
        got = await post_raw(port, wire)
        counts[got[9:12].decode() or "none"] = counts.get(got[9:12].decode() or "none", 0) + 1
        await asyncio.sleep(max(0.0, t0 + 0.5 - time.monotonic()))  # the scenario: at most two a second


async def chunk_attack(port: int, stop: asyncio.Event, counts: dict[str, int]) -> None:
    """A 1 MiB completion body (a short prompt and a 1 MiB field the engine ignores) sent in 1-byte chunks, over
    and over."""
    body = b'{"model": "m", "max_tokens": 1, "prompt": "x", "pad": "' + b"a" * MIB + b'"}'
    wire = (
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        + b"".join(b"1\r\n%c\r\n" % c for c in body)
        + b"0\r\n\r\n"
    )
    while not stop.is_set():
        got = await post_raw(port, wire)
        counts[got[9:12].decode() or "none"] = counts.get(got[9:12].decode() or "none", 0) + 1


async def redaction_attack(port: int, stop: asyncio.Event, counts: dict[str, int]) -> None:
    """Completions whose prompt is 99,000 characters of "(1." (the input that held the event loop 18 s in the former
    review redactor's phone pattern), two a second: the sampler takes them for review pairs, whose redaction must
    not hold the gateway."""
    prompt = "(1." * 33_000
    i = 0
    while not stop.is_set():
        t0 = time.monotonic()
        body = orjson.dumps({"model": "m", "prompt": prompt, "max_tokens": 1})
        got = await post_raw(
            port, http_request(target="/v1/completions", body=body, headers=[("X-Request-Id", f"redact-{i:04d}")])
        )
        counts[got[9:12].decode() or "none"] = counts.get(got[9:12].decode() or "none", 0) + 1
        i += 1
        await asyncio.sleep(max(0.0, t0 + 0.5 - time.monotonic()))  # the scenario: at most two a second


async def slow_loris(port: int, stop: asyncio.Event, cut: list[int], n: int = 200) -> None:
    """`n` connections each sending a request head a byte every 0.5 s (the head timeout cuts them; they reconnect);
    `cut` counts the connections the gateway ended."""

    async def one() -> None:
        while not stop.is_set():
            try:
                _, writer = await connect(port)
            except OSError:
                await asyncio.sleep(0.5)  # the scenario: retry a refused connection
                continue
            try:
                for byte in b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000:
                    if stop.is_set():
                        break
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(0.5)  # the scenario: one byte every half second
            except ConnectionError:
                cut[0] += 1
            finally:
                writer.close()

    await asyncio.gather(*(one() for _ in range(n)))


@pytest.mark.timeout(300)
async def test_the_gateway_serves_20_requests_a_second_under_body_chunk_redaction_and_slow_loris_attacks(
    llama, tmp_path
):
    run_dir = tmp_path / "run"
    config = {
        "old": {"url": llama.url, "engine": "llamacpp"},
        "new": {"url": llama.url, "engine": "llamacpp"},
        "gateway": {
            "weight": 0,
            "run_dir": str(run_dir),
            "listen": {"port": 0},
            "reload_poll_s": 60,
            "limits": {"memory_budget_bytes": MEMORY_BUDGET, "header_timeout_s": 5},
            # every generation request is offered to the review sampler, the redaction attack's too
            "review": {
                "pairs_per_day": 100_000,
                "per_type_per_day": 100_000,
                "sample_percent": 100,
                "max_chars": 100_000,
                "max_concurrency": 4,
            },
        },
    }
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(yaml.safe_dump(config))
    proc = subprocess.Popen(
        [sys.executable, "-m", "switchover", "gateway", "--config", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stop = asyncio.Event()
    attacks: list[asyncio.Task[Any]] = []
    poller: asyncio.subprocess.Process | None = None
    try:
        state = run_dir / "gateway.json"
        await await_until(lambda: state.exists() and state.stat().st_size, 30, "the gateway's address")
        url = orjson.loads(state.read_bytes())["url"]
        port = int(url.rsplit(":", 1)[1])
        poller = await asyncio.create_subprocess_exec(
            sys.executable, "-c", HEALTH_POLLER, str(port), str(SOAK_S + 5), stdout=subprocess.PIPE
        )
        bodies: dict[str, int] = {}
        chunks: dict[str, int] = {}
        cut = [0]
        redacted: dict[str, int] = {}
        attacks = [
            asyncio.ensure_future(body_attack(port, stop, bodies)),
            asyncio.ensure_future(chunk_attack(port, stop, chunks)),
            asyncio.ensure_future(redaction_attack(port, stop, redacted)),
            asyncio.ensure_future(slow_loris(port, stop, cut)),
        ]
        statuses: dict[str, int] = {}
        async with aiohttp.ClientSession() as http:
            normal = []
            t0 = time.monotonic()
            for i in range(SOAK_S * RATE):
                await asyncio.sleep(max(0.0, t0 + i / RATE - time.monotonic()))  # the scenario: 20 requests/s
                normal.append(asyncio.ensure_future(ordinary(http, url, llama.model, i, statuses)))
            await asyncio.gather(*normal)
        stop.set()
        out, _ = await asyncio.wait_for(poller.communicate(), 30)
        assert poller.returncode == 0, f"the /health poller failed (exit {poller.returncode})"
        polled = orjson.loads(out)
        latencies, late = sorted(polled["lat"]), sorted(polled["late"])
        peak = peak_rss(proc.pid)
        await asyncio.sleep(0.5)  # the ledger flushes every 100 ms
        rows = {
            r["request_id"]: r
            for p in sorted(run_dir.glob("ledger-*.jsonl"))
            for r in map(orjson.loads, p.read_bytes().splitlines())
            if r.get("kind", "request") == "request"
        }
        await await_until(lambda: _attack_pairs(run_dir) > 0, 30, "a review pair of the redaction attack")
        attack_pairs = _attack_pairs(run_dir)
        p99 = latencies[int(len(latencies) * 0.99)] if latencies else float("inf")
        missing_rows = [rid for rid in statuses if rid not in rows]
        ok = sum(1 for s in statuses.values() if s == 200)
        report = (
            f"peak RSS {peak / MIB:.0f} MiB; /health p99 {p99 * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} "
            f"ms over {len(latencies)} (the poller's own oversleep p99 "
            f"{late[int(len(late) * 0.99)] * 1000:.1f} ms, max {late[-1] * 1000:.1f} ms); "
            f"ordinary {ok}/{len(statuses)} answered 200; body attack {bodies}; chunk attack {chunks}; "
            f"slow-loris connections cut {cut[0]}; redaction attack {redacted}, {attack_pairs} of its "
            f"requests stored as review pairs"
        )
        print(report)
        assert bodies.get("413", 0) >= 1 and chunks.get("200", 0) >= 1 and cut[0] >= 1, report
        assert not missing_rows, f"{len(missing_rows)} ordinary requests have no ledger row: {missing_rows[:5]}"
        assert ok == len(statuses) == SOAK_S * RATE, report
        assert peak < SOAK_RSS_BUDGET, report
        assert p99 < 0.1, report
    finally:
        stop.set()
        for task in attacks:
            task.cancel()
        for task in attacks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if poller is not None and poller.returncode is None:
            poller.kill()
            await poller.wait()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
