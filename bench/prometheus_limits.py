"""The gates' Prometheus client against two hostile servers on 127.0.0.1: how long one query takes and how much
memory it grows by.

- a server that sends its answer one byte a second (`--timeout-s`, default 3): the query should end at the
  timeout, whatever the per-byte gap;
- a 500 answer announcing and sending 400 MB: the error body should be read only to its bound.

    python bench/prometheus_limits.py [--timeout-s 3] [--only dribble|huge]

To compare with another tree: `git archive REV src | tar -x -C /tmp/old` and run with PYTHONPATH=/tmp/old/src (the
former client reads the dribbling answer to its end: run it under `timeout`).
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import socket
import threading
import time
from collections.abc import Callable

from switchover.config.rollout import PrometheusSource
from switchover.errors import SwitchoverError
from switchover.rollout.custom_gates import promql_vector


def _serve_once(script: Callable[[socket.socket], None]) -> str:
    srv = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        conn, _ = srv.accept()
        with conn, contextlib.suppress(OSError):
            conn.recv(65536)
            script(conn)
        srv.close()

    threading.Thread(target=run, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}"


def _dribble(conn: socket.socket) -> None:
    for b in b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b" " * 100:
        conn.sendall(bytes([b]))
        time.sleep(1.0)


def _huge(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 400000000\r\n\r\n")
    chunk = b"x" * (1 << 20)
    for _ in range(400):
        conn.sendall(chunk)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout-s", type=float, default=3.0)
    ap.add_argument("--only", choices=["dribble", "huge"])
    args = ap.parse_args()
    cases = {"dribble": ("one byte a second", _dribble, args.timeout_s), "huge": ("a 400 MB 500", _huge, 30.0)}
    for key, (name, script, timeout_s) in cases.items():
        if args.only and key != args.only:
            continue
        url = _serve_once(script)
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.monotonic()
        try:
            promql_vector(PrometheusSource(url=url, timeout_s=timeout_s), "up")
            outcome = "answered"
        except SwitchoverError as exc:
            outcome = f"exit {int(exc.exit_code)}: {exc}"
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
        print(f"{name} (timeout_s {timeout_s:g}): {time.monotonic() - t0:.2f} s, peak RSS +{grew:.1f} MiB; {outcome}")


if __name__ == "__main__":
    main()
