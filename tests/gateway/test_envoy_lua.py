"""The Envoy plane's Lua filter (gateway/envoy/lua.py) in a real Envoy 1.40 on loopback: every tenant lands on the
arm policy.route gives it with the deployment's seed (so the two planes agree, and the seed moves tenants), old's
streamed answer is read as it passes (usage asked for, the usage-only event dropped, the stream otherwise
intact), and an answer the filter cannot read leaves the fields null and the answer untouched."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from switchover.gateway.clients import deployment_seed
from switchover.gateway.ledger import ledger_files
from switchover.gateway.policy import RequestMeta, RouteState, bucket_of, route, tenant_hash
from switchover.subproc import stop
from switchover.testbed.processes import free_port
from switchover.testing import FakeEngine, wait_until
from tests.export.test_envoy import _envoy
from tests.gateway.test_envoy_plane import start_plane

SRC = str(Path(__file__).resolve().parents[2] / "src")
WORDS = ["a", "b", "c", "d", "e"]


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _answerer(arm: str, seen: list[dict[str, Any]]):
    """An engine that streams one event per write (text events, then finish, then usage when asked), or answers
    garbage when the client sends X-Mode: garbage."""

    async def handler(request: web.Request) -> web.StreamResponse:
        body = json.loads(await request.read())
        seen.append(body)
        if request.headers.get("x-mode") == "garbage":
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b'data: {"choices":[{"text":"x"}],"usage":{"completion_tokens":12345678901234}}\n\n')
            await resp.write(b'data: {"finish_reason":"' + b"z" * 5000 + b'" \xff\xfe not json\n\n')
            await resp.write_eof()
            return resp
        if not body.get("stream"):
            return web.json_response(
                {
                    "model": arm,
                    "choices": [{"index": 0, "finish_reason": "length", "text": "x"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                }
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(_event({"choices": [{"index": 0, "text": "", "finish_reason": None}]}))
        await asyncio.sleep(0.05)  # the first text comes 50 ms after the head
        for i, w in enumerate(WORDS):
            last = i == len(WORDS) - 1
            await resp.write(_event({"choices": [{"index": 0, "text": w, "finish_reason": "stop" if last else None}]}))
        if (body.get("stream_options") or {}).get("include_usage"):
            await resp.write(_event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": len(WORDS)}}))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    return handler


class Bed:
    def __init__(self, url: str, run_dir: Path, seed: bytes, seen: dict[str, list[dict[str, Any]]]) -> None:
        self.url, self.run_dir, self.seed, self.seen = url, run_dir, seed, seen

    def rows(self) -> list[dict[str, Any]]:
        out = [json.loads(line) for f in ledger_files(self.run_dir) for line in f.read_text().splitlines() if line]
        return [r for r in out if r.get("kind", "request") == "request"]

    def post(self, body: dict[str, Any], headers: dict[str, str]) -> bytes:
        req = urllib.request.Request(
            self.url + "/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **headers},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
            return resp.read()


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[Bed]:
    seen: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    old = FakeEngine("old", handler=_answerer("old", seen["old"]))
    new = FakeEngine("new", handler=_answerer("new", seen["new"]))
    with old.in_thread(), new.in_thread():
        port = free_port()
        cfg = tmp_path / "switchover.yaml"
        cfg.write_text(f"""\
old: {{url: {old.url}, engine: vllm}}
new: {{url: {new.url}, engine: vllm}}
gateway:
  data_plane: envoy
  weight: 30
  tenant_header: x-team
  listen: {{port: {port}}}
  envoy: {{binary: {_envoy()}, admin_port: {free_port()}, concurrency: 2}}
  kill_switch: {{enabled: false}}
  drain_seconds: 1
  run_dir: run
""")
        run_dir = tmp_path / "run"
        proc = start_plane(cfg, run_dir)
        try:
            seed = deployment_seed(run_dir / "tenant.seed")
            yield Bed(f"http://127.0.0.1:{port}", run_dir, seed, seen)
        finally:
            stop(proc)


def test_every_tenant_lands_on_the_arm_policy_route_gives_it_with_the_deployments_seed(bed: Bed) -> None:
    # short ids, and ids across blake2b's 128-byte block boundaries (one, two and many blocks after the key block)
    keys = [f"team-{i}" for i in range(300)] + [f"{n}-".ljust(n, "x") for n in (127, 128, 129, 256, 3000)]
    for k in keys:
        bed.post({"prompt": "hi"}, {"x-team": k})
    for k in ("sk-one", "sk-two"):  # no tenant header: the bearer token is the tenant, as in the built-in gateway
        bed.post({"prompt": "hi"}, {"Authorization": f"Bearer {k}"})
    bed.post({"prompt": "hi"}, {})  # neither: the one anonymous bucket
    wait_until(lambda: len(bed.rows()) >= len(keys) + 3, 10, "a row per request")
    rows = bed.rows()
    expected = {tenant_hash(k, bed.seed) for k in [*keys, "sk-one", "sk-two", None]}
    assert {r["tenant"] for r in rows} == expected
    state = RouteState(weight=30)
    for r in rows:
        assert r["bucket"] == bucket_of(r["tenant"])
        assert r["arm"] == route(RequestMeta("/v1/completions", r["tenant"]), state).arm, r
    on_new = sum(r["arm"] == "new" for r in rows)
    assert 0.2 < on_new / len(rows) < 0.4
    # another deployment (another seed) puts the tenants elsewhere: Envoy's buckets follow the seed
    other = [bucket_of(tenant_hash(k, b"\x00" * 32)) for k in keys]
    assert other != [bucket_of(tenant_hash(k, bed.seed)) for k in keys]


def test_a_streamed_answer_is_read_as_it_passes_and_reaches_the_client_without_the_usage_it_did_not_ask_for(
    bed: Bed,
) -> None:
    teams = [f"s{i}" for i in range(12)]
    bodies = [bed.post({"prompt": "hi", "stream": True}, {"x-team": t}) for t in teams]
    for got in bodies:
        events = [e for e in got.split(b"\n\n") if e]
        assert len(events) == len(WORDS) + 2 and events[-1] == b"data: [DONE]"  # role, words, [DONE]
        assert b'"usage"' not in got
    asked = bed.seen["old"] + bed.seen["new"]
    assert all(b["stream_options"] == {"include_usage": True} for b in asked)  # the plane asked for usage
    wait_until(lambda: len(bed.rows()) >= len(teams), 10, "the rows")
    for r in bed.rows():
        assert (r["completion_tokens"], r["tokens_source"], r["finish_reason"]) == (len(WORDS), "usage", "stop")
        assert r["prompt_tokens"] == 3 and r["stream"] is True
        assert 45 <= r["ttft_ms"] <= r["e2e_ms"] + 1, r  # the first text came 50 ms after the head
        assert r["tpot_ms"] is not None


def test_a_client_that_asked_for_usage_gets_it_and_a_plain_json_answer_is_read_too(bed: Bed) -> None:
    got = bed.post({"prompt": "hi", "stream": True, "stream_options": {"include_usage": True}}, {"x-team": "u"})
    assert got.count(b'"usage"') == 1
    assert json.loads(bed.post({"prompt": "hi"}, {"x-team": "j"}))["usage"]["completion_tokens"] == 1
    wait_until(lambda: len(bed.rows()) >= 2, 10, "the rows")
    stream, plain = sorted(bed.rows(), key=lambda r: not r["stream"])
    assert (stream["completion_tokens"], stream["tokens_source"]) == (len(WORDS), "usage")
    assert (plain["completion_tokens"], plain["finish_reason"], plain.get("ttft_ms")) == (1, "length", None)


def test_usage_is_asked_only_for_a_top_level_stream_true_without_stream_options(bed: Bed) -> None:
    bodies = [
        {"prompt": 'say "stream": true', "extra": {"stream": True}},  # nested, and inside a string: not a stream
        {"prompt": "hi", "stream": True, "stream_options": {"include_usage": False}},  # the client's choice stands
        {"prompt": "hi", "stream": False},
    ]
    for b in bodies:
        bed.post(b, {"x-team": "n"})
    assert bed.seen["old"] + bed.seen["new"] == bodies  # forwarded as sent


def test_an_answer_the_filter_cannot_read_passes_untouched_with_null_fields(bed: Bed) -> None:
    got = bed.post({"prompt": "hi", "stream": True}, {"x-team": "g", "X-Mode": "garbage"})
    assert got.endswith(b"not json\n\n") and b"z" * 5000 in got and b"\xff\xfe" in got
    wait_until(lambda: len(bed.rows()) >= 1, 10, "the row")
    row = bed.rows()[0]
    assert row["outcome"] == "ok"
    assert [row.get(k) for k in ("completion_tokens", "tokens_source", "finish_reason")] == [None, None, None]
