"""An in-process stack for gateway tests: two fault-injecting upstreams (old, new) and a gateway on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from switchover.config import load_migration
from switchover.gateway.app import Gateway
from switchover.gateway.server import running as running_gateway
from switchover.ledger_files import read_ledger, read_requests
from switchover.ledger_record import LedgerRecord, ShadowRecord
from switchover.testbed.processes import free_port
from switchover.testing import FakeEngine, render

MODEL = "client-model"


@dataclass
class Stack:
    gw: Gateway
    url: str
    old: FakeEngine
    new: FakeEngine
    config_path: Path
    config: dict[str, Any]
    http: aiohttp.ClientSession

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def rows(self) -> list[LedgerRecord]:
        self.gw.ledger.flush()
        return list(read_requests(self.gw.run_dir))

    def shadow_rows(self) -> list[ShadowRecord]:
        self.gw.ledger.flush()
        return [r for r in read_ledger(self.gw.run_dir) if isinstance(r, ShadowRecord)]

    def rewrite(self, **gateway_fields: Any) -> None:
        """Atomically rewrite gateway fields in the config file (what the rollout helper does)."""
        self.config["gateway"].update(gateway_fields)
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(self.config))
        tmp.replace(self.config_path)

    async def post(
        self,
        body: dict[str, Any],
        tenant: str = "t1",
        path: str = "/v1/chat/completions",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes, dict[str, str]]:
        h = {"x-tenant-id": tenant, **(headers or {})}
        async with self.http.post(self.url + path, data=orjson.dumps(body), headers=h) as r:
            return r.status, await r.read(), dict(r.headers)


def chat(stream: bool = False, max_tokens: int = 4, **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
        "max_tokens": max_tokens,
        **extra,
    }


def tenant_in(gw_weight: float, arm: str, start: int = 0, seed: bytes = b"") -> str:
    """A tenant name that the weight sends to `arm` (under the gateway's tenant seed: `Gateway.tenant_seed`)."""
    from switchover.gateway.policy import bucket_of, tenant_hash, threshold

    for i in range(start, start + 100000):
        t = f"tenant-{i}"
        if (bucket_of(tenant_hash(t, seed)) < threshold(gw_weight)) == (arm == "new"):
            return t
    raise AssertionError("no tenant found")


@contextlib.asynccontextmanager
async def stack(
    tmp_path: Path,
    *,
    new_url: str | None = None,
    new_model: str = "engine-new-name",
    old_url: str | None = None,
    old_key_env: str | None = None,
    new_key_env: str | None = None,
    **gateway: Any,
) -> AsyncIterator[Stack]:
    old, new = FakeEngine("old", model=MODEL), FakeEngine("new", model=new_model, keep_bodies=4)
    async with old.running() as ourl, new.running() as nurl:
        gwcfg: dict[str, Any] = {
            "weight": 50,
            "run_dir": str(tmp_path / "run"),
            "reload_poll_s": 0.05,
            "fallback": {"on_timeout_ms": 500},
            "timeouts": {"connect_ms": 500, "first_byte_ms": 2000, "idle_ms": 1000},
            "kill_switch": {"min_samples": 1000},
            **gateway,
        }
        config: dict[str, Any] = {
            "old": {"url": old_url or ourl, "engine": "vllm"},
            "new": {"url": new_url or nurl, "engine": "llamacpp"},
            "gateway": gwcfg,
        }
        if old_key_env:
            config["old"]["api_key_env"] = old_key_env
        if new_key_env:
            config["new"]["api_key_env"] = new_key_env
        path = tmp_path / "switchover.yaml"
        path.write_text(yaml.safe_dump(config))
        gw = Gateway(load_migration(path), path)
        async with running_gateway(gw, port=0) as url, aiohttp.ClientSession() as http:
            yield Stack(gw, url, old, new, path, config, http)


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


# ---- raw-socket attack helpers (test_security_*.py, test_front_fuzz.py) ---------------------------------------
# Attacks are bytes written by hand on plain sockets; the fakes below record exactly what reached them.

ALLOWED_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/embeddings", "/tokenize", "/detokenize")
_STATUS_LINE = re.compile(rb"HTTP/1\.1 (\d{3})[^\r\n]*\r\n")


def path_allowed(path: str, allowed: Sequence[str] = ALLOWED_PATHS) -> bool:
    """Prefix match on whole segments: /v1/models and /v1/models/x are inside /v1/models; /v1/modelsX is not."""
    return any(path == a or path.startswith(a + "/") for a in allowed)


@dataclass
class Reply:
    """One HTTP response as read off the socket (header names lowercased)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        found = [v for k, v in self.headers if k == name.lower()]
        return found[-1] if found else None

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k == name.lower()]

    @property
    def closes(self) -> bool:
        return any(t.strip().lower() == "close" for v in self.all("connection") for t in v.split(","))

    def error_message(self) -> str | None:
        """error.message of an OpenAI-shaped error body, or None when the body is not one."""
        try:
            obj = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return None
        err = obj.get("error") if isinstance(obj, dict) else None
        msg = err.get("message") if isinstance(err, dict) else None
        return msg if isinstance(msg, str) and msg else None


def _dechunk(data: bytes) -> tuple[bytes, int] | None:
    out, pos = bytearray(), 0
    while True:
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            return None
        n = int(data[pos:eol].split(b";")[0], 16)
        if n == 0:
            end = data.find(b"\r\n\r\n", eol)
            return (bytes(out), end + 4) if end >= 0 else None
        if len(data) < eol + 2 + n + 2:
            return None
        out += data[eol + 2 : eol + 2 + n]
        pos = eol + 2 + n + 2


def parse_replies(data: bytes, head_only: bool = False) -> list[Reply]:
    """The complete final (non-1xx) responses in `data`, in order; a last body delimited by close is kept."""
    out: list[Reply] = []
    pos = 0
    while pos < len(data):
        m = _STATUS_LINE.match(data, pos)
        end = data.find(b"\r\n\r\n", pos)
        if m is None or end < 0:
            break
        status = int(m.group(1))
        headers = []
        for line in data[m.end() : end].split(b"\r\n"):
            if line:
                k, _, v = line.decode("latin-1").partition(":")
                headers.append((k.strip().lower(), v.strip()))
        pos = end + 4
        reply = Reply(status, headers, b"")
        if 100 <= status < 200:
            continue
        if head_only or status in (204, 304):
            out.append(reply)
            continue
        if "chunked" in (reply.header("transfer-encoding") or "").lower():
            got = _dechunk(data[pos:])
            if got is None:
                reply.body = data[pos:]
                out.append(reply)
                break
            reply.body, used = got
            pos += used
        elif reply.header("content-length") is not None:
            n = int(reply.header("content-length") or 0)
            reply.body = data[pos : pos + n]
            pos += n
        else:
            reply.body, pos = data[pos:], len(data)
        out.append(reply)
    return out


@dataclass
class Exchange:
    """What came back on one raw connection."""

    data: bytes
    closed: bool  # the peer closed (EOF or reset) within the time bound
    elapsed_s: float
    sent: int = 0  # bytes written before the peer closed or the writes ended

    @property
    def replies(self) -> list[Reply]:
        return parse_replies(self.data)

    @property
    def reply(self) -> Reply:
        replies = self.replies
        assert replies, f"no complete response; got {self.data[:200]!r} (closed={self.closed})"
        return replies[0]


async def connect(port: int, source: str | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection to 127.0.0.1:port, optionally from another loopback source address (127.0.0.2...)."""
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0) if source else None, limit=1 << 22)


async def read_all(reader: asyncio.StreamReader, timeout: float) -> tuple[bytes, bool]:
    """Everything until the peer closes, bounded by `timeout`; (bytes, closed)."""
    buf = bytearray()
    try:
        async with asyncio.timeout(timeout):
            while True:
                chunk = await reader.read(1 << 16)
                if not chunk:
                    return bytes(buf), True
                buf += chunk
    except TimeoutError:
        return bytes(buf), False
    except ConnectionError:
        return bytes(buf), True


async def exchange(
    port: int,
    data: bytes | Sequence[bytes],
    *,
    timeout: float = 5.0,
    gap_s: float = 0.0,
    half_close: bool = False,
    source: str | None = None,
) -> Exchange:
    """Write `data` (one write, or each part in turn with `gap_s` between), then read until the gateway closes
    (bounded by `timeout`). With half_close the write side is shut after the last part."""
    t0 = time.perf_counter()
    reader, writer = await connect(port, source)
    sent = 0
    try:
        for i, part in enumerate([data] if isinstance(data, bytes) else data):
            if i and gap_s:
                await asyncio.sleep(gap_s)  # the scenario: the attack's pause between parts
            try:
                writer.write(part)
                await writer.drain()
                sent += len(part)
            except ConnectionError:
                break
        if half_close and writer.can_write_eof():
            with contextlib.suppress(OSError):
                writer.write_eof()
        got, closed = await read_all(reader, max(0.1, timeout - (time.perf_counter() - t0)))
        return Exchange(got, closed, time.perf_counter() - t0, sent)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def http_request(
    method: str = "POST",
    target: str = "/v1/chat/completions",
    body: bytes | None = None,
    headers: Sequence[tuple[str, str]] = (),
    version: str = "HTTP/1.1",
    close: bool = True,
) -> bytes:
    """A well-formed request (Content-Length framing) to build attacks from."""
    lines = [f"{method} {target} {version}", "Host: 127.0.0.1"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


CHAT_BODY = orjson.dumps(chat())


def metric_total(text: str, name: str) -> float:
    """The sum of every series of a metric in Prometheus text (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and (line[len(name) : len(name) + 1] in ("{", " ")):
            total += float(line.rsplit(" ", 1)[1])
    return total


def ledger_lines(run_dir: Path) -> list[dict[str, Any]]:
    """Every complete line of every ledger file, parsed as JSON (does not depend on the record model)."""
    out = []
    for path in sorted(run_dir.glob("ledger-*.jsonl")):
        for line in path.read_bytes().splitlines(keepends=True):
            if line.endswith(b"\n"):
                out.append(orjson.loads(line))
    return out


def request_rows(s: Stack) -> list[dict[str, Any]]:
    """The request rows (not shadow rows) of the stack's ledger, as dicts."""
    s.gw.ledger.flush()
    return [r for r in ledger_lines(s.gw.run_dir) if r.get("kind", "request") == "request"]


@dataclass
class Recorded:
    """One request as it reached a recording upstream (header names lowercased)."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body_len: int
    body: bytes  # the first 64 KiB

    def header(self, name: str) -> str | None:
        found = [v for k, v in self.headers if k == name.lower()]
        return found[-1] if found else None

    def names(self) -> set[str]:
        return {k for k, _ in self.headers}


@dataclass
class RecordingUpstream:
    """A loopback OpenAI-compatible fake that records every connection, request head and (prefix of) body, and
    answers a valid chat / text completion (streamed when asked), a model list, or 404. With `redirect_to` set,
    every request is answered 307 to that URL instead."""

    name: str
    model: str = MODEL
    redirect_to: str | None = None
    connections: int = 0
    requests: list[Recorded] = field(default_factory=list)
    raw: bytearray = field(default_factory=bytearray)  # every byte received (bodies capped at 64 KiB each)
    seen: asyncio.Event = field(default_factory=asyncio.Event)

    async def _read_request(self, reader: asyncio.StreamReader) -> Recorded:
        head = await reader.readuntil(b"\r\n\r\n")
        self.raw += head
        lines = head[:-4].decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = []
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers.append((k.strip().lower(), v.strip()))
        hd = dict(headers)
        body = bytearray()
        total = 0
        if "chunked" in hd.get("transfer-encoding", "").lower():
            while True:
                size_line = await reader.readuntil(b"\r\n")
                n = int(size_line.split(b";")[0], 16)
                if n == 0:
                    while await reader.readuntil(b"\r\n") != b"\r\n":
                        pass
                    break
                part = await reader.readexactly(n + 2)
                total += n
                if len(body) < 1 << 16:
                    body += part[:n]
        else:
            n = int(hd.get("content-length", "0"))
            left = n
            while left:
                part = await reader.read(min(left, 1 << 20))
                if not part:
                    raise asyncio.IncompleteReadError(b"", left)
                left -= len(part)
                if len(body) < 1 << 16:
                    body += part
            total = n
        body = body[: 1 << 16]
        self.raw += body
        return Recorded(method, target, headers, total, bytes(body))

    def _answer(self, req: Recorded) -> tuple[int, str, bytes]:
        if self.redirect_to is not None:
            return 307, "application/json", b"{}"
        path = req.target.partition("?")[0]
        obj: Any = None
        if req.body and req.body_len == len(req.body):
            with contextlib.suppress(orjson.JSONDecodeError):
                obj = orjson.loads(req.body)
        obj = obj if isinstance(obj, dict) else {}
        if path in ("/v1/chat/completions", "/v1/completions") and req.method == "POST":
            is_chat = path == "/v1/chat/completions"
            if obj.get("stream") is True:  # the shared fake engine's bytes (switchover.testing.render)
                events = [
                    render.chunk(" hi", None, is_chat, model=self.model, id_="c0", empty_delta=True),
                    render.chunk("", "stop", is_chat, model=self.model, id_="c1", empty_delta=True),
                ]
                opts = obj.get("stream_options")
                if isinstance(opts, dict) and opts.get("include_usage"):
                    events.append(render.usage_chunk(3, 1, model=self.model, id_="u"))
                return 200, "text/event-stream", b"".join(events) + render.DONE
            whole = render.whole(is_chat, " hi", "stop", model=self.model, completion_tokens=1, id_="c")
            return 200, "application/json", orjson.dumps(whole)
        if path == "/v1/models":
            return (
                200,
                "application/json",
                orjson.dumps({"object": "list", "data": [{"id": self.model, "object": "model"}]}),
            )
        if path == "/v1/embeddings":
            return (
                200,
                "application/json",
                orjson.dumps(
                    {
                        "object": "list",
                        "model": self.model,
                        "data": [{"object": "embedding", "index": 0, "embedding": [0.0]}],
                    }
                ),
            )
        if path == "/tokenize":
            return 200, "application/json", b'{"tokens": [1, 2]}'
        if path == "/detokenize":
            return 200, "application/json", b'{"prompt": "hi"}'
        return 404, "application/json", b'{"error": {"message": "not found", "type": "not_found", "code": 404}}'

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.seen.set()
        try:
            while True:
                req = await self._read_request(reader)
                self.requests.append(req)
                self.seen.set()
                status, ctype, body = self._answer(req)
                extra = f"Location: {self.redirect_to}\r\n" if self.redirect_to is not None else ""
                head = (
                    f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
                ).encode()
                writer.write(head + (b"" if req.method == "HEAD" else body))
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def wait_requests(self, n: int, timeout: float = 5.0) -> bool:
        """True once `n` requests have arrived (False after `timeout`)."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # a bounded poll (the caller asserts the result)
        return len(self.requests) >= n


@contextlib.asynccontextmanager
async def running_recorder(rec: RecordingUpstream) -> AsyncIterator[str]:
    """Serve `rec` on 127.0.0.1 (a free port); yields its base URL."""
    server = await asyncio.start_server(rec.handle, "127.0.0.1", 0, limit=1 << 22)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2):
                await server.wait_closed()


@dataclass
class Trap:
    """A listener on another loopback port: any connection to it is a request sent where it must not go."""

    connections: int = 0
    data: bytearray = field(default_factory=bytearray)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        with contextlib.suppress(Exception):
            async with asyncio.timeout(0.5):
                self.data += await reader.read(1 << 16)
        writer.close()


@contextlib.asynccontextmanager
async def running_trap() -> AsyncIterator[Trap]:
    trap = Trap()
    server = await asyncio.start_server(trap.handle, "127.0.0.1", 0)
    trap.port = server.sockets[0].getsockname()[1]
    try:
        yield trap
    finally:
        server.close()


@dataclass
class Recorders:
    old: RecordingUpstream
    new: RecordingUpstream

    @property
    def connections(self) -> int:
        return self.old.connections + self.new.connections

    @property
    def requests(self) -> list[Recorded]:
        return self.old.requests + self.new.requests


@contextlib.asynccontextmanager
async def recorded_stack(tmp_path: Path, **kw: Any) -> AsyncIterator[tuple[Stack, Recorders]]:
    """stack() with recording upstreams as old and new (what reached each arm, headers included)."""
    rec = Recorders(RecordingUpstream("old"), RecordingUpstream("new"))
    async with (
        running_recorder(rec.old) as ourl,
        running_recorder(rec.new) as nurl,
        stack(tmp_path, old_url=ourl, new_url=nurl, **kw) as s,
    ):
        yield s, rec


async def read_reply(reader: asyncio.StreamReader, timeout: float = 5.0) -> Reply:
    """Read exactly one final response (Content-Length or chunked body) off a kept-alive connection."""
    async with asyncio.timeout(timeout):
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            reply = parse_replies(head, head_only=True)
            if not reply:  # a 1xx interim response
                continue
            r = reply[0]
            if "chunked" in (r.header("transfer-encoding") or "").lower():
                raw = bytearray()
                while (got := _dechunk(bytes(raw))) is None:
                    chunk = await reader.read(1 << 16)
                    if not chunk:
                        raise ConnectionError("closed inside a chunked body")
                    raw += chunk
                r.body = got[0]
            else:
                r.body = await reader.readexactly(int(r.header("content-length") or 0))
            return r
