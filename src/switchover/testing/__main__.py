"""`python -m switchover.testing {zero,scripted} --port N ...`: serve a fake engine on 127.0.0.1 until killed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import sys

from switchover.testing.zerowork import serve_forever

_MAX = {"chunks": 1_000_000, "itl_ms": 60_000.0, "load_s": 3600.0, "delay_ms": 600_000.0}  # sane bounds
EXAMPLE = "Example: python -m switchover.testing zero --port 0 --itl-ms 1"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m switchover.testing",
        description="A fake OpenAI-compatible engine on 127.0.0.1 (tests and benchmarks).",
        epilog=EXAMPLE,
    )
    sub = ap.add_subparsers(dest="kind", required=True)
    zero = sub.add_parser(
        "zero", help="zero-work streaming (the load generator's harness); prints the port", epilog=EXAMPLE
    )
    zero.add_argument("--chunks", type=int, default=128, help="events per response when max_tokens is absent")
    zero.add_argument("--itl-ms", type=float, default=0.0, help="pause between events (0 = all at once)")
    scripted = sub.add_parser(
        "scripted",
        help="fault-injecting engine (X-Fault header or POST /faults)",
        epilog="Example: python -m switchover.testing scripted --port 9001 --name new",
    )
    scripted.add_argument("--name", default="new", help="this engine's name for X-Fault-Arm")
    scripted.add_argument("--model", default="fake-model")
    scripted.add_argument("--delay-ms", type=float, default=0.0, help="latency before every answer")
    for p in (zero, scripted):
        p.add_argument("--port", type=int, default=0, help="0: any free port (printed on stdout)")
        p.add_argument("--load-s", type=float, default=0.0, help="seconds before listening (an engine loading)")
    return ap


async def _scripted(args: argparse.Namespace) -> None:
    from switchover.testing.engine import FakeEngine  # here: the zero-work server does not load aiohttp's server

    if args.load_s > 0:
        await asyncio.sleep(args.load_s)  # the scenario: an engine that takes this long to start listening
    engine = await FakeEngine(args.name, args.model, args.delay_ms).start(port=args.port)
    sys.stdout.write(f"{engine.url.rsplit(':', 1)[1]}\n")
    sys.stdout.flush()
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.port < 0 or args.port > 65535:
        parser().error(f"--port: {args.port} is not a port (0-65535)")
    for flag in ("chunks", "itl_ms", "load_s", "delay_ms"):
        value = getattr(args, flag, None)
        if value is not None and not (math.isfinite(value) and 0 <= value <= _MAX[flag]):
            parser().error(f"--{flag.replace('_', '-')}: {value} is not a number from 0 to {_MAX[flag]:g}")
    with contextlib.suppress(KeyboardInterrupt):
        if args.kind == "scripted":  # the default loop, as the gateway benchmarks have always measured it with
            asyncio.run(_scripted(args))
            return
        try:
            import uvloop
        except ImportError:  # pragma: no cover
            asyncio.run(serve_forever(args.port, args.chunks, args.itl_ms, args.load_s))
        else:
            uvloop.run(serve_forever(args.port, args.chunks, args.itl_ms, args.load_s))


if __name__ == "__main__":
    main()
