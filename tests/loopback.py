"""A raw TCP server on 127.0.0.1 for tests that need a peer misbehaving below HTTP (silent, dribbling, a fixed
answer): each accepted connection goes to `handle` on its own thread; every connection and the server are closed
when the block ends."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def tcp_server(handle: Callable[[socket.socket, threading.Event], None] | None = None) -> Iterator[str]:
    """Yields `http://127.0.0.1:PORT`. `handle(conn, stop)` serves one connection (`stop` is set when the block
    ends); None holds every connection open without a word."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn = srv.accept()[0]
                held.append(conn)
                if handle is not None:
                    threading.Thread(target=handle, args=(conn, stop), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        srv.close()
        for c in held:
            with contextlib.suppress(OSError):
                c.close()
