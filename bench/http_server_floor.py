"""What the gateway's HTTP server costs: aiohttp's server vs a minimal asyncio protocol, both answering a fixed
chat-completion body, closed loop at c=1 from this process (aiohttp client, as bench/gateway_overhead.py).

The gateway serves with aiohttp; its added latency over direct (docs/gateway.md) includes aiohttp's per-request
machinery. This puts a number on the part a hand-written front for the proxied routes could save. The minimal
server is a measuring stick, not a server: it handles Content-Length requests only.

    python bench/http_server_floor.py [--n 2000] [--rounds 3]

Measured 2026-11-29 15:22 UTC on the 2-vCPU dev box, quiet (3 rounds): aiohttp p50 0.356 / 0.368 / 0.443 ms,
p99 0.49-0.64 ms; minimal protocol p50 0.240 / 0.224 / 0.279 ms, p99 0.32-0.41 ms: aiohttp's server costs
0.12-0.16 ms of latency per request, a third of the gateway's added p50 at 500 req/s.
2026-11-29 17:10 UTC, with aiohttp's low-level server added (web.Server: the protocol without the Application's
router): aiohttp p50 0.319 / 0.334 / 0.333 ms, low-level 0.319 / 0.320 / 0.303 ms, minimal 0.235 / 0.220 /
0.147 ms. Dropping the Application saves 0-30 µs; the cost is aiohttp's protocol itself.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

from switchover.testbed.processes import free_port

BODY = (
    b'{"id":"x","object":"chat.completion","model":"fake-model","choices":[{"index":0,"message":{"role":'
    b'"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,'
    b'"total_tokens":2}}'
)


def serve_aiohttp(port: int) -> None:
    import uvloop
    from aiohttp import web

    async def handle(req: web.Request) -> web.Response:
        await req.read()
        return web.Response(body=BODY, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_route("*", "/{p:.*}", handle)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)  # as the gateway runs it
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()

    uvloop.run(main())


def serve_lowlevel(port: int) -> None:
    """aiohttp's low-level server (web.Server): its protocol without the Application's router and machinery."""
    import uvloop
    from aiohttp import web

    async def handle(req: web.BaseRequest) -> web.Response:
        await req.read()
        return web.Response(body=BODY, content_type="application/json")

    async def main() -> None:
        runner = web.ServerRunner(web.Server(handle, handler_cancellation=True), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()

    uvloop.run(main())


def serve_minimal(port: int) -> None:
    import uvloop

    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY

    class Minimal(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.buf = b""

        def data_received(self, data: bytes) -> None:
            self.buf += data
            while (end := self.buf.find(b"\r\n\r\n")) >= 0:
                head = self.buf[:end].lower()
                at = head.find(b"content-length:")
                n = int(head[at + 15 :].split(b"\r\n")[0]) if at >= 0 else 0
                if len(self.buf) < end + 4 + n:
                    return
                self.buf = self.buf[end + 4 + n :]
                self.transport.write(reply)  # type: ignore[attr-defined]

    async def main() -> None:
        await asyncio.get_running_loop().create_server(Minimal, "127.0.0.1", port)
        await asyncio.Event().wait()

    uvloop.run(main())


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_serve":
        {"aiohttp": serve_aiohttp, "lowlevel": serve_lowlevel, "minimal": serve_minimal}[sys.argv[2]](int(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="requests per server per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds alternating the servers")
    a = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    import gateway_overhead as g

    servers = {"aiohttp": free_port(), "lowlevel": free_port(), "minimal": free_port()}
    procs = [
        subprocess.Popen([sys.executable, __file__, "--_serve", name, str(port)]) for name, port in servers.items()
    ]
    try:

        async def measure() -> None:
            for port in servers.values():
                await g.wait_http(f"http://127.0.0.1:{port}/health")
            for k in range(a.rounds):
                for name, port in servers.items():
                    r = await g.load(
                        f"http://127.0.0.1:{port}", stream=False, concurrency=1, n=a.n, seconds=30, headers={}
                    )
                    print(
                        f"round {k + 1} {name:8s} p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms "
                        f"({r['n']} ok, {r['errors']} errors)",
                        flush=True,
                    )

        t = time.monotonic()
        asyncio.run(measure())
        print(f"took {time.monotonic() - t:.0f} s")
    finally:
        for p in procs:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
