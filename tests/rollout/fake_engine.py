"""A stand-in engine for the drill tests: sleeps (loading), then serves /v1/models and a 1-token
/v1/completions on 127.0.0.1:PORT until killed. Usage: python fake_engine.py PORT LOAD_SECONDS"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def _send(self, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send(
            {
                "id": "c",
                "object": "text_completion",
                "model": "fake",
                "choices": [{"index": 0, "text": " hi", "finish_reason": "length"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    time.sleep(float(sys.argv[2]))
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
