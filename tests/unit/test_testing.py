"""switchover.testing: bounded waits that name what they waited for, the tool-missing rule, the fake engine's
fault modes and its command line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import urllib.request

import aiohttp
import orjson
import pytest

from switchover.subproc import stop
from switchover.testing import (
    FakeEngine,
    Persona,
    WaitTimeout,
    ZeroWorkServer,
    await_holds,
    await_until,
    holds_for,
    in_ci,
    missing,
    require_tool,
    wait_until,
)
from switchover.wire.sse import parse_all

CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def test_wait_until_returns_the_value_and_fails_naming_what_it_waited_for() -> None:
    calls = iter([0, 0, 7])
    assert wait_until(lambda: next(calls), 5, "a value") == 7
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout, match=r"timed out after 0.1 s waiting for the flag \(last value: False\)"):
        wait_until(lambda: False, 0.1, "the flag")
    assert time.monotonic() - t0 < 2


def test_holds_for_fails_as_soon_as_the_condition_breaks() -> None:
    holds_for(lambda: True, 0.05, "always")
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout, match="nothing sent did not hold"):
        holds_for(lambda: time.monotonic() - t0 < 0.05, 10, "nothing sent")
    assert time.monotonic() - t0 < 2  # not the whole 10 s


async def test_the_async_waits_do_not_block_the_loop() -> None:
    flag: list[int] = []
    asyncio.get_running_loop().call_later(0.05, flag.append, 1)
    assert await await_until(lambda: flag, 5, "the callback") == [1]
    await await_holds(lambda: flag == [1], 0.05, "the flag unchanged")
    with pytest.raises(WaitTimeout, match="never"):
        await await_until(lambda: False, 0.05, "never")


@pytest.mark.parametrize(
    ("value", "ci"),
    [
        (None, False),
        ("", False),
        ("0", False),
        ("false", False),
        ("no", False),
        ("true", True),
        ("1", True),
        ("yes", True),
    ],
)
def test_in_ci_reads_the_ci_variable(monkeypatch: pytest.MonkeyPatch, value: str | None, ci: bool) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert in_ci() is ci


def test_a_missing_tool_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-such-tool-xyz not installed"):
        require_tool("no-such-tool-xyz", hint="apt-get install it")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        missing("the test bed is missing")
    assert require_tool("no-such-tool-xyz", "sh").endswith("/sh")  # the first one found


async def _post(
    url: str, body: dict, headers: dict[str, str] | None = None, timeout: float = 5
) -> tuple[int, bytes, int]:
    """(status, body, number of reads it took) with the fault headers given."""
    reads = 0
    buf = bytearray()
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            url + "/v1/chat/completions",
            data=orjson.dumps(body),
            headers=headers or {},
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as r,
    ):
        async for part in r.content.iter_any():
            reads += 1
            buf += part
        return r.status, bytes(buf), reads


async def test_x_fault_applies_to_the_named_arm_only_and_stats_count_events() -> None:
    engine = FakeEngine("new")
    async with engine.running() as url:
        status, _, _ = await _post(url, CHAT, {"X-Fault": "status:429", "X-Fault-Arm": "new"})
        assert status == 429
        status, body, _ = await _post(url, {**CHAT, "stream": True}, {"X-Fault": "status:429", "X-Fault-Arm": "old"})
        assert status == 200 and parse_all([body])[-1].data == b"[DONE]"
    assert engine.stats.by_mode == {"status": 1, "ok": 1} and engine.stats.events == 4
    assert engine.stats.completed == 2 and engine.stats.in_flight == 0


async def test_a_stall_mid_stream_sends_k_events_then_nothing_until_the_client_leaves() -> None:
    engine = FakeEngine("new")
    async with engine.running() as url:
        task = asyncio.ensure_future(_post(url, {**CHAT, "stream": True}, {"X-Fault": "stall:2"}, timeout=30))
        await await_until(lambda: engine.stats.events == 2, 5, "two events before the stall")
        await await_holds(lambda: engine.stats.events == 2 and not task.done(), 0.2, "nothing after the stall")
        task.cancel()
        await await_until(lambda: engine.stats.cancelled == 1, 5, "the stalled stream cancelled with its client")


async def test_trickle_writes_slow_bytes_and_the_stream_stays_whole() -> None:
    async with FakeEngine("new").running() as url:
        t0 = time.monotonic()
        status, body, reads = await _post(url, {**CHAT, "max_tokens": 1}, {"X-Fault": "trickle:1"})
        assert status == 200  # not streamed: the JSON answer is whole
        status, body, reads = await _post(url, {**CHAT, "max_tokens": 1, "stream": True}, {"X-Fault": "trickle:1"})
    assert status == 200 and parse_all([body])[-1].data == b"[DONE]"
    assert reads > 20 and time.monotonic() - t0 >= len(body) * 0.001 * 0.5  # byte by byte, ~1 ms apart


async def test_a_script_set_over_http_is_consumed_in_order() -> None:
    engine = FakeEngine("old")
    async with engine.running() as url, aiohttp.ClientSession() as http:
        async with http.post(url + "/faults", json={"sequence": ["status:503", "status:500"]}) as r:
            assert r.status == 200
        got = [(await _post(url, CHAT))[0] for _ in range(3)]
        async with http.get(url + "/stats") as r:
            stats = await r.json()
    assert got == [503, 500, 200] and stats["requests"] == 3 and stats["by_mode"] == {"status": 2, "ok": 1}


async def test_a_persona_answers_ok_requests_and_faults_still_apply() -> None:
    engine = FakeEngine(persona=Persona(served="p-model", max_stop=1))
    async with engine.running() as url, aiohttp.ClientSession() as http:
        async with http.get(url + "/v1/models") as r:
            assert (await r.json())["data"][0] == {"id": "p-model", "object": "model", "max_model_len": 1500}
        status, body, _ = await _post(url, {**CHAT, "model": "p-model", "stop": ["a", "b"]})
        assert status == 400 and b"at most 1 stop strings" in body
        status, _, _ = await _post(url, {**CHAT, "model": "p-model"}, {"X-Fault": "status:502"})
        assert status == 502


def test_the_engine_serves_synchronous_tests_from_a_thread() -> None:
    engine = FakeEngine("old", model="old")
    with engine.in_thread() as url:
        req = urllib.request.Request(url + "/v1/completions", data=b'{"prompt": "hi", "max_tokens": 2}')
        with urllib.request.urlopen(req, timeout=5) as r:
            answer = orjson.loads(r.read())
    assert answer["model"] == "old" and answer["choices"][0]["text"] == " t0 t1" and engine.stats.completed == 1


async def test_zero_work_server_answers_a_stream_of_max_tokens_events() -> None:
    async with ZeroWorkServer() as srv:
        status, body, _ = await _post(srv.url, {**CHAT, "stream": True, "max_tokens": 5})
    events = parse_all([body])
    assert status == 200 and len(events) == 7 and events[-1].data == b"[DONE]"  # 5 tokens, usage, [DONE]


async def _raw(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    answer = await asyncio.wait_for(reader.read(4096), 5)
    writer.close()
    return answer


@pytest.mark.parametrize("length", [b"x", b"-5", b"99999999999", b"\xb2", b"9" * 40])
async def test_zero_work_server_refuses_a_bad_or_huge_content_length(length: bytes) -> None:
    async with ZeroWorkServer() as srv:
        answer = await _raw(srv.port, b"POST /v1/completions HTTP/1.1\r\nContent-Length: " + length + b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 400") and b"bad Content-Length" in answer
        status, _, _ = await _post(srv.url, {**CHAT, "stream": True, "max_tokens": 2})  # still serving
    assert status == 200


@pytest.mark.parametrize(
    ("data", "why"),
    [(b"GARBAGE\r\n\r\n", b"bad request line"), (b"POST /" + b"a" * (70 << 10), b"request head too large")],
)
async def test_zero_work_server_refuses_a_malformed_or_endless_head(data: bytes, why: bytes) -> None:
    async with ZeroWorkServer() as srv:
        answer = await _raw(srv.port, data)
        assert answer.startswith(b"HTTP/1.1 400") and why in answer
        status, _, _ = await _post(srv.url, {**CHAT, "stream": True, "max_tokens": 2})  # still serving
    assert status == 200


async def test_zero_work_server_refuses_max_tokens_it_would_have_to_build_in_memory() -> None:
    async with ZeroWorkServer() as srv:
        status, body, _ = await _post(srv.url, {**CHAT, "max_tokens": 10**12})
    assert status == 400 and b"bad request" in body


def _start(*args: str) -> tuple[subprocess.Popen[str], float]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "switchover.testing", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return proc, time.monotonic()


@pytest.mark.parametrize("kind", ["zero", "scripted"])
def test_the_command_line_prints_the_port_after_loading_and_serves(kind: str) -> None:
    proc, t0 = _start(kind, "--port", "0", "--load-s", "0.3")
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        assert time.monotonic() - t0 >= 0.3  # it listened only after "loading"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
            assert r.status == 200 and orjson.loads(r.read())["data"]
    finally:
        stop(proc)


def test_a_bad_port_is_one_line_and_exit_2() -> None:
    proc, _ = _start("zero", "--port", "70000")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "--port: 70000 is not a port" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "args",
    [
        ("zero", "--itl-ms", "nan"),
        ("zero", "--chunks", "-1"),
        ("zero", "--load-s", "1e300"),
        ("scripted", "--delay-ms", "inf"),
    ],
)
def test_a_bad_number_flag_is_one_line_and_exit_2(args: tuple[str, ...]) -> None:
    proc, _ = _start(*args)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and f"{args[1]}: " in err and "Traceback" not in err


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1]",
        b'{"sequence": "ok"}',
        b'{"weights": {"ok": -1}}',
        b'{"weights": {"ok": 0}}',
        b'{"seed": "x"}',
        b'{"sequence": [1]}',
        b'{"sequence": ["die-mid"]}',
        b'{"weights": {"hnag": 1}}',
    ],
)
async def test_a_bad_fault_script_is_a_400_and_the_old_script_stays(body: bytes) -> None:
    engine = FakeEngine("new")
    engine.script(["status:503"])
    async with engine.running() as url, aiohttp.ClientSession() as http:
        async with http.post(url + "/faults", data=body) as r:
            assert r.status == 400 and "invalid_request_error" in await r.text()
        async with http.post(url + "/tokenize", data=body) as r:
            assert r.status == 200
    assert engine._sequence == ["status:503"]


async def test_zero_work_paced_streams_are_held_while_they_run_and_let_go_after() -> None:
    import gc

    async with ZeroWorkServer(itl_s=0.005) as srv:
        pending = asyncio.ensure_future(_post(srv.url, {**CHAT, "stream": True, "max_tokens": 20}))
        await await_until(lambda: srv.paced_tasks, 5, "the paced stream started")
        gc.collect()  # a task only the loop knew of could be collected here
        status, body, _ = await pending
        await await_until(lambda: not srv.paced_tasks, 5, "the finished stream let go")
    assert status == 200 and len(parse_all([body])) == 22  # 20 tokens, usage, [DONE]


@pytest.mark.parametrize("fault", ["die-mid:2", "hang:nan", "status:abc", "status:99", "drip:-1", "stall:x"])
async def test_a_misspelt_or_bad_fault_is_a_400_not_a_normal_answer(fault: str) -> None:
    async with FakeEngine("new").running() as url:
        status, body, _ = await _post(url, {**CHAT, "stream": True}, {"X-Fault": fault})
    assert status == 400 and b"fault mode" in body
