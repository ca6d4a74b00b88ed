"""The Prometheus HTTP API client of the gates: one instant query, bounded as a whole.

`timeout_s` is the deadline of the whole query — name lookup, connect, TLS handshake, every header and body byte,
and redirects — not of each socket read: a server that sends a byte a second must not hold `rollout gates` or
`rollout watch` (and with it an automatic rollback) for minutes. A watchdog shuts the socket down at the deadline,
which ends any read in progress. Answers are bounded (an error body at 64 KiB), a redirect is followed only within
the configured origin (the query must not be sent to another host), and any text from the server is shown through
`termtext.printable`.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any

import orjson

from switchover.config.rollout import PrometheusSource
from switchover.errors import BadInput, Unreachable
from switchover.termtext import printable

Series = list[tuple[dict[str, str], float | None]]
MAX_ANSWER_BYTES = 32 << 20  # a gate's answer is a few series; more is a query that forgot to aggregate
MAX_ERROR_BYTES = 64 << 10  # an error answer is read this far, for its message only
MAX_REDIRECTS = 3
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_READ = 64 << 10


class _Deadline:
    """A monotonic deadline that shuts down the socket it watches when it passes (ending a blocked read)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.fired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        """Seconds left; TimeoutError once none are."""
        left = self.at - time.monotonic()
        if left <= 0 or self.fired:
            raise TimeoutError
        return left

    def watch(self, sock: socket.socket | None) -> None:
        with self._lock:
            self._sock = sock
            if self.fired and sock is not None:
                _shutdown(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            if self._sock is not None:
                _shutdown(self._sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed: the read it would end has ended
        # the plain socket's shutdown, also on a TLS socket: ssl.SSLSocket.shutdown would drop its TLS state
        # under the reading thread
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _resolve(host: str, port: int, deadline: _Deadline) -> list[Any]:
    """getaddrinfo within the deadline (the resolver cannot be interrupted: it is left to finish in its thread)."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            box.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(deadline.left())
    if not box:
        raise TimeoutError
    if isinstance(box[0], OSError):
        raise box[0]
    return list(box[0])


def _connect(scheme: str, host: str, port: int, deadline: _Deadline) -> socket.socket:
    """A connected socket (TLS handshaken for https, the certificate checked against the host name), every step
    watched by the deadline."""
    last: OSError = OSError(f"{host}: no address")
    for family, kind, proto, _, addr in _resolve(host, port, deadline):
        sock = socket.socket(family, kind, proto)
        sock.settimeout(deadline.left())
        deadline.watch(sock)
        try:
            sock.connect(addr)
            if scheme == "https":
                sock = ssl.create_default_context().wrap_socket(
                    sock, server_hostname=host, do_handshake_on_connect=False
                )
                deadline.watch(sock)
                sock.do_handshake()
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    raise last


def _origin(url: str) -> tuple[str, str, int]:
    p = urllib.parse.urlsplit(url)
    return p.scheme, (p.hostname or "").lower(), p.port or (443 if p.scheme == "https" else 80)


def _read_body(resp: http.client.HTTPResponse, limit: int, deadline: _Deadline) -> bytes | None:
    """The body, or None once it passes `limit` bytes (nothing more is read)."""
    buf = bytearray()
    while True:
        deadline.left()
        piece = resp.read1(_READ)
        if not piece:
            deadline.left()  # the watchdog's shutdown also ends a body early: that is the deadline, not the end
            return bytes(buf)
        buf += piece
        if len(buf) > limit:
            return None


def _exchange(url: str, deadline: _Deadline) -> tuple[int, str | None, bytes | None]:
    """One GET: status, Location, body (None when over its bound: MAX_ANSWER_BYTES, or MAX_ERROR_BYTES for an
    error)."""
    p = urllib.parse.urlsplit(url)
    scheme, host, port = _origin(url)
    cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = cls(host, port, timeout=deadline.left())
    try:
        conn.sock = _connect(scheme, host, port, deadline)  # set: http.client does not connect again
        target = (p.path or "/") + (f"?{p.query}" if p.query else "")
        conn.request("GET", target, headers={"Accept": "application/json", "Accept-Encoding": "identity"})
        resp = conn.getresponse()
        if resp.status in _REDIRECTS:
            return resp.status, resp.getheader("Location"), b""
        limit = MAX_ANSWER_BYTES if resp.status < 400 else MAX_ERROR_BYTES
        body = _read_body(resp, limit, deadline)
        if body is None and resp.status >= 400:
            return resp.status, None, b""  # the message is cut; the status still says what happened
        return resp.status, None, body
    finally:
        deadline.watch(None)
        conn.close()


def _fetch(source: PrometheusSource, url: str, query: str) -> tuple[int, bytes | None]:
    """GET `url` within source.timeout_s in all, following redirects only within the configured origin."""
    deadline = _Deadline(source.timeout_s)
    home = _origin(source.url)
    try:
        for _ in range(MAX_REDIRECTS + 1):
            status, location, body = _exchange(url, deadline)
            if status not in _REDIRECTS:
                return status, body
            target = urllib.parse.urljoin(url, location or "")
            if not location or _origin(target) != home:
                shown = urllib.parse.urlsplit(target)
                where = printable(f"{shown.scheme}://{shown.netloc}", 200) if location else "nowhere"
                raise Unreachable(
                    f"Prometheus {source.url} redirected {query!r} to {where}: not followed (the "
                    "query goes only to rollout.prometheus.url's host; set it to the final address)"
                )
            url = target
        raise Unreachable(f"Prometheus {source.url}: more than {MAX_REDIRECTS} redirects for {query!r}")
    except TimeoutError:
        raise Unreachable(
            f"Prometheus {source.url} did not answer {query!r} within {source.timeout_s:g} s "
            "(rollout.prometheus.timeout_s bounds the whole query)"
        ) from None
    except (http.client.HTTPException, OSError) as exc:
        if deadline.fired:
            raise Unreachable(
                f"Prometheus {source.url} did not answer {query!r} within {source.timeout_s:g} s "
                "(rollout.prometheus.timeout_s bounds the whole query)"
            ) from None
        raise Unreachable(f"Prometheus {source.url} unreachable: {printable(str(exc), 300)}") from None
    finally:
        deadline.cancel()


def _error_detail(body: bytes | None) -> str:
    """The `error` field of an error answer, printable; '' when there is none."""
    try:
        doc = orjson.loads(body or b"")
    except orjson.JSONDecodeError:
        return ""
    detail = doc.get("error") if isinstance(doc, dict) else None
    return printable(str(detail), 500) if detail else ""


def promql_vector(source: PrometheusSource, query: str) -> Series:
    """One instant query; each series' labels and value (None for NaN / ±Inf)."""
    url = f"{source.url}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    status, raw = _fetch(source, url, query)
    if status >= 400:
        detail = _error_detail(raw)
        if status in (400, 422):
            raise BadInput(f"Prometheus rejected {query!r}: {detail or status}")
        raise Unreachable(f"Prometheus {source.url} answered {status} to {query!r}" + (f": {detail}" if detail else ""))
    if raw is None:
        raise BadInput(
            f"Prometheus answered {query!r} with more than {MAX_ANSWER_BYTES >> 20} MiB: a gate "
            "query must aggregate (sum by, histogram_quantile), not list raw series"
        )
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise Unreachable(f"Prometheus {source.url} did not answer JSON") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error", body) if isinstance(body, dict) else body
        raise BadInput(f"Prometheus rejected {query!r}: {printable(str(error), 500)}")
    return series_of(source, query, body.get("data"))


def _value(sample: Any) -> float | None:
    """A `[ts, "value"]` pair's value; None for NaN / ±Inf; ValueError when it is not one."""
    if not isinstance(sample, list) or len(sample) != 2:
        raise ValueError("not a [time, value] pair")
    v = float(sample[1])
    return None if math.isnan(v) or math.isinf(v) else v


def series_of(source: PrometheusSource, query: str, data: Any) -> Series:
    """The series of an instant vector or scalar answer; a range vector or string is bad input (the query's
    fault), a shape the API does not document is the server's."""
    kind = data.get("resultType") if isinstance(data, dict) else None
    if kind in ("matrix", "string"):
        what = "a range vector (drop the trailing [range])" if kind == "matrix" else "a string"
        raise BadInput(f"{query!r} returns {what}: a gate needs an instant vector or a scalar")
    try:
        if kind == "scalar":
            return [({}, _value(data["result"]))]
        if kind != "vector" or not isinstance(data.get("result"), list):
            raise ValueError(f"resultType {printable(repr(kind), 80)}")
        return [
            (
                {printable(str(k), 200): printable(str(v), 200) for k, v in dict(item.get("metric") or {}).items()},
                _value(item["value"]),
            )
            for item in data["result"]
        ]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise Unreachable(
            f"Prometheus {source.url} answered {query!r} in an unexpected shape ({printable(str(exc), 200)})"
        ) from None
