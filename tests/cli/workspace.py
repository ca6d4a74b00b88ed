"""The fuzz workspace: good inputs every verb can start from, bad files of every class a user hands over by
mistake, and two loopback servers that answer wrongly (not HTTP; HTML). Built once per test session."""

from __future__ import annotations

import json
import os
import socket
import socketserver
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.modeldiff.conftest import make_model
from tests.plan import configs as C

SECRET = "FUZZSECRET"  # planted in argv values; no file switchover writes may contain it
CLOSED = "http://127.0.0.1:1"  # nothing listens on port 1: connection refused at once

MIGRATION = f"""\
old:
  url: {CLOSED}
  engine: vllm
new:
  url: http://127.0.0.1:2
  engine: llamacpp
gateway:
  listen: {{host: 127.0.0.1, port: 18089}}
  weight: 5
rollout: {{}}
"""
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefg", "bcdefgh", strict=True)
)
RULES = """\
groups:
- name: llm
  rules:
  - alert: SlowFirstToken
    expr: histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 2
"""
DEPLOY = """\
apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      terminationGracePeriodSeconds: 30
      containers: [{name: llm, image: vllm}]
"""


def _gguf_header(tensors: int, kvs: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, tensors, kvs)


# class -> (file name, content); a directory when content is None
BAD_FILES: dict[str, tuple[str, bytes | None]] = {
    "empty": ("empty.yaml", b""),
    "binary": ("binary.bin", os.urandom(3000)),
    "yaml_recursive": ("recursive.yaml", b"old: &a [*a]\n"),
    "yaml_key": ("key.yaml", b"? [a, b]\n: 1\n"),
    "yaml_bomb": ("bomb.yaml", BOMB.encode()),
    "yaml_deep": ("deep.yaml", b"[" * 3000 + b"]" * 3000),
    "yaml_huge": ("huge.yaml", b"# padding\n" * 220_000),
    "yaml_list": ("list.yaml", b"- a\n- b\n"),
    "yaml_nan": ("nan.yaml", MIGRATION.replace("weight: 5", "weight: .nan").encode()),
    "json_malformed": ("malformed.json", b'{"steps": [1,'),
    "json_list": ("list.json", b"[1, 2, 3]"),
    "jsonl_bad": ("bad.jsonl", b'not json\n{"prompt": 1}\n[]\n'),
    "gguf_4": ("four.gguf", b"GGUF"),
    "gguf_200": ("short.gguf", _gguf_header(1, 2) + b"\x05" * 176),
    "gguf_kv": ("kvcount.gguf", _gguf_header(0, 1 << 40)),
    "dir": ("a-directory", None),
}
SPECIAL_PATHS = {"missing": "does-not-exist/nowhere.yaml", "proc": "/proc/version", "zero": "/dev/zero"}


@dataclass
class Workspace:
    """Where every fuzz case runs: `work` is the cwd, `inputs` holds the fixtures, `out` receives outputs."""

    root: Path
    urls: dict[str, str] = field(default_factory=dict)

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def inputs(self) -> Path:
        return self.root / "in"

    def path(self, name: str) -> str:
        return str(self.inputs / name)

    def bad(self, cls: str) -> str:
        """The path of a bad file of class `cls`."""
        if cls in SPECIAL_PATHS:
            special = SPECIAL_PATHS[cls]
            return special if special.startswith("/") else str(self.inputs / special)
        return str(self.inputs / "bad" / BAD_FILES[cls][0])


def build(root: Path) -> Workspace:
    """Write the good and bad inputs under `root`."""
    ws = Workspace(root)
    for d in (ws.work, ws.inputs / "bad", root / "out"):
        d.mkdir(parents=True, exist_ok=True)
    inp = ws.inputs
    (inp / "model").mkdir()
    (inp / "model" / "config.json").write_text(json.dumps(C.LLAMA_8B))
    make_model(inp, "hf")
    (inp / "switchover.yaml").write_text(MIGRATION)
    (ws.work / "switchover.yaml").write_text(MIGRATION)  # the default --config of several verbs
    (inp / "rules.yaml").write_text(RULES)
    (inp / "deploy").mkdir()
    (inp / "deploy" / "llm.yaml").write_text(DEPLOY)
    (inp / "prompts.jsonl").write_text('{"id": "a", "prompt": "Hello", "max_tokens": 4}\n')
    (inp / "corpus.jsonl").write_text('{"text": "hello world"}\n')
    (inp / "prompt.txt").write_text("Hello")
    (inp / "summary.json").write_text(
        json.dumps({"steps": [{"endpoint": "new", "tpot_ms": {"p99": 30.0}, "ttft_ms": {"p99": 200.0}}]})
    )
    for name, content in BAD_FILES.values():
        target = inp / "bad" / name
        if content is None:
            target.mkdir()
        else:
            target.write_bytes(content)
    bad_model = inp / "bad-model"
    bad_model.mkdir()
    (bad_model / "config.json").write_text('{"num_hidden_layers": 2,')
    weird = inp / "weird-model"
    weird.mkdir()
    (weird / "config.json").write_text(
        json.dumps(C.LLAMA_8B | {"num_hidden_layers": -4, "hidden_size": 1e308, "max_position_embeddings": 0})
    )
    return ws


class _NotHttp(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")


class _Html(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.settimeout(2)
        try:
            self.request.recv(65536)
        except OSError:
            return
        body = b"<html><body><h1>Welcome to nginx!</h1></body></html>"
        self.request.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@contextmanager
def servers() -> Iterator[dict[str, str]]:
    """Loopback servers that answer wrongly: {'not_http': url, 'html': url}; stopped on exit."""
    started = []
    urls = {}
    for name, handler in (("not_http", _NotHttp), ("html", _Html)):
        srv = _Server(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        started.append(srv)
        urls[name] = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        yield urls
    finally:
        for srv in started:
            srv.shutdown()
            srv.server_close()


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
