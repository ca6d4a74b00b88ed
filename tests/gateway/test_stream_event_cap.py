"""A streamed answer passes through as it comes, but one SSE event is held until it ends: an event that grows past
MAX_EVENT_BYTES without ending (a broken or hostile upstream) cuts the stream with an error event, is recorded as
`failed_mid_stream` / `too_large`, and the gateway holds no more of it."""

from __future__ import annotations

from tests.gateway.conftest import chat, stack


async def test_an_event_that_never_ends_is_cut_not_held(tmp_path, monkeypatch) -> None:
    from switchover.gateway import relay

    monkeypatch.setattr(relay, "MAX_EVENT_BYTES", 24)  # the fake's events are ~200 bytes, trickled byte by byte
    async with stack(tmp_path, weight=100) as s:
        status, body, _ = await s.post(chat(stream=True, max_tokens=2), headers={"X-Fault": "trickle:1"})
        assert status == 200  # the first event had arrived: the stream was already the client's
        assert b"upstream failed mid-stream: too_large" in body  # the error event that closes a cut stream
        assert body.count(b"data: ") < 6  # cut at the second event, not relayed to its end
        [row] = s.rows()
        assert (row.outcome, row.arm) == ("failed_mid_stream", "new") and "too_large" in (row.error or "")


async def test_events_under_the_bound_pass_whole(tmp_path) -> None:
    async with stack(tmp_path, weight=100) as s:
        status, body, _ = await s.post(chat(stream=True, max_tokens=2), headers={"X-Fault": "trickle:1"})
        assert status == 200 and body.endswith(b"data: [DONE]\n\n")
        [row] = s.rows()
        assert row.outcome == "ok"


async def test_a_first_event_that_never_ends_is_a_failure_before_the_first_byte(tmp_path, monkeypatch) -> None:
    from switchover.gateway import upstream

    monkeypatch.setattr(upstream, "MAX_EVENT_BYTES", 24)  # the first event (~200 bytes) is held before relaying
    async with stack(tmp_path, weight=100) as s:
        status, body, _ = await s.post(chat(stream=True, max_tokens=2), headers={"X-Fault": "trickle:1"})
        [row] = s.rows()
        assert row.fallback_reason == "too_large"  # new was abandoned before the client saw a byte of it
        # the fault header trickles old's answer too, so old fails the same way: the client gets a 502, not a stream
        assert (status, row.outcome) == (502, "error") and b"data: " not in body and "too_large" in (row.error or "")
