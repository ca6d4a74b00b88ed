"""The memory budget's rules on their own (draws, holds, refusals), the JSON pricing that runs before any parse, and
the gateway's answers when the budget is full: 503 with Retry-After, its reason in the ledger and /metrics."""

from __future__ import annotations

import tracemalloc

import orjson
import pytest
from pydantic import ValidationError

from switchover.config.gateway import LimitsConfig
from switchover.gateway.jsoncost import TokenScan, count_tokens, parsed_cost, tokens_bound
from switchover.httpfront.budget import MemoryBudget, OverBudget
from switchover.testing import await_until
from tests.gateway.conftest import chat, metric_total, request_rows, stack

MIB = 1 << 20


def test_a_draw_that_does_not_fit_is_refused_whole_and_draws_nothing():
    b = MemoryBudget(100)
    assert b.take("answer", 60)
    assert not b.take("request_body", 41)
    assert (b.used, b.by_kind["answer"], b.by_kind["request_body"], b.refused) == (60, 60, 0, 1)
    assert b.take("request_body", 40) and b.free == 0 and b.peak == 100


def test_giving_back_more_than_was_drawn_cannot_mint_budget():
    b = MemoryBudget(100)
    b.take("answer", 10)
    b.give("answer", 50)
    b.give("shadow", 5)
    assert (b.used, b.by_kind["answer"], b.by_kind["shadow"]) == (0, 0, 0)


def test_a_hold_returns_everything_it_drew_once_however_often_it_is_released():
    b = MemoryBudget(1000)
    h = b.hold()
    h.add("request_body", 100)
    h.add("parsed_json", 300)
    h.drop("parsed_json", 100)
    assert b.used == 300 and h.total == 300
    h.release()
    h.release()
    assert b.used == 0 and b.peak == 400


@pytest.mark.parametrize(
    ("size", "status", "words"),
    [
        (80, 503, "retry"),  # fits the budget, not what is free now
        (1001, 413, "the whole budget is 1000"),  # could never fit
    ],
)
def test_a_hold_that_does_not_fit_raises_503_when_busy_and_413_when_bigger_than_the_budget(size, status, words):
    b = MemoryBudget(1000)
    b.take("shadow", 950)
    with pytest.raises(OverBudget) as info:
        b.hold().add("answer", size)
    assert info.value.status == status and words in str(info.value)
    assert b.used == 950


# ---- pricing JSON before it is parsed ---------------------------------------------------------------------------

BODIES = [
    b'{"a":"b"}',
    b"[{},{},[]]",
    b'{"a,b:{[":"x\\"y,:]"}',
    b'["\\\\",1,2.5,true,null]',
    b'{"messages":[{"role":"user","content":"hello, world: {x}"}],"stream":false,"max_tokens":3}',
    '{"t":"caf\u00e9 \u2603, \U0001f600"}'.encode(),
    b'{"k":"\\u00e9\\ud83d\\ude00,"}',
]


def reference_tokens(body: bytes) -> int:
    """Marks outside strings plus strings, counted one byte at a time (slow and obviously right)."""
    count, in_string, escaped = 0, False, False
    for c in body:
        if in_string:
            if escaped:
                escaped = False
            elif c == 0x5C:
                escaped = True
            elif c == 0x22:
                in_string = False
        elif c == 0x22:
            in_string, count = True, count + 1
        elif c in b"{[,:":
            count += 1
    return count


@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("window", [1, 2, 3, 7, 1 << 16])
def test_the_exact_token_count_is_the_same_for_every_window_size_and_within_the_cheap_bound(body, window):
    scan = TokenScan()
    for start in range(0, len(body), window):
        assert scan.feed(body, start, min(len(body), start + window), 10**9)
    assert scan.tokens == reference_tokens(body) and not scan.in_string
    assert reference_tokens(body) <= tokens_bound(body)


def test_the_exact_scan_stops_as_soon_as_the_limit_is_passed():
    body = b"[" + b",".join([b"{}"] * 100_000) + b"]"
    scan = TokenScan()
    fed = 0
    for start in range(0, len(body), 4096):
        fed += 4096
        if not scan.feed(body, start, min(len(body), start + 4096), 1000):
            break
    assert scan.tokens > 1000 and fed <= 8192, f"counted {fed} of {len(body)} bytes"


SHAPES = [
    b"{}",
    b"[]",
    b"1234567",
    b"-1.5e300",
    b'"abcdefgh"',
    b'{"a":1,"b":"xy"}',
    b"[[1,2],[3]]",
    '"\u00e9\u00e9\u00e9\U0001f600"'.encode(),
    b'"\\ud83d\\ude00aaaaaaaa"',
    b'"' + b"a" * 5000 + b'"',
]


@pytest.mark.parametrize("shape", SHAPES)
def test_the_price_of_a_body_is_at_least_what_its_parse_allocates(shape):
    body = b"[" + b",".join([shape] * 20_000) + b"]"
    tokens = reference_tokens(body)
    tracemalloc.start()
    try:
        parsed = orjson.loads(body)
        allocated = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del parsed
    assert allocated <= parsed_cost(body, tokens), (allocated, parsed_cost(body, tokens))


async def test_a_prose_body_full_of_commas_is_counted_exactly_not_refused_on_the_cheap_bound():
    body = orjson.dumps(chat(messages=[{"role": "user", "content": "a, b: c, " * 200_000}]))
    assert tokens_bound(body) > 500_000
    assert await count_tokens(body, 500_000) == reference_tokens(body)


async def test_a_body_of_empty_objects_over_the_limit_is_not_counted_to_its_end():
    body = b'{"x":[' + b",".join([b"{}"] * 2_000_000) + b"]}"
    assert await count_tokens(body, 1_000_000) is None


def test_a_body_limit_over_the_memory_budget_is_refused_in_the_config():
    with pytest.raises(ValidationError, match="over memory_budget_bytes"):
        LimitsConfig(max_body_bytes=64 * MIB, memory_budget_bytes=32 * MIB)


# ---- the gateway when the budget is full ------------------------------------------------------------------------

REFUSED = "switchover_gateway_refused_total"


async def test_a_request_the_full_budget_cannot_price_gets_503_with_retry_after_a_ledger_row_and_a_metric(tmp_path):
    async with stack(tmp_path, weight=0, limits={"memory_budget_bytes": 16 * MIB, "max_body_bytes": 8 * MIB}) as s:
        budget = s.gw.budget
        request = chat(messages=[{"role": "user", "content": "x" * 5000}])
        held = budget.limit - len(orjson.dumps(request)) - 1000  # room for the body, not for its parse
        assert budget.take("review", held)  # the rest of the gateway holds nearly all of it
        status, body, headers = await s.post(request)
        assert status == 503 and headers.get("Retry-After") == "1", body
        assert b"memory budget" in body
        assert s.old.stats.requests == 0
        rows = request_rows(s)
        assert [(r["status"], r["outcome"], r["error"][:40]) for r in rows] == [
            (503, "refused", orjson.loads(body)["error"]["message"][:40])
        ]
        text = s.gw.metrics.render().decode()
        assert 'switchover_gateway_refused_total{reason="memory_budget"} 1.0' in text
        assert metric_total(text, "switchover_gateway_memory_budget_used_bytes") == held
        budget.give("review", held)
        status, _, _ = await s.post(chat())
        assert status == 200 and budget.used == 0


async def test_a_body_the_full_budget_cannot_buffer_gets_503_with_retry_after_from_the_front(tmp_path):
    async with stack(tmp_path, weight=0, limits={"memory_budget_bytes": 16 * MIB, "max_body_bytes": 8 * MIB}) as s:
        assert s.gw.budget.take("answer", s.gw.budget.limit - 1000)
        status, body, headers = await s.post(chat(messages=[{"role": "user", "content": "z" * 5000}]))
        assert status == 503 and headers.get("Retry-After") == "1", body
        assert [(r["status"], r["outcome"], r["error"]) for r in request_rows(s)] == [(503, "refused", "body_memory")]
        assert 'reason="body_memory"} 1.0' in s.gw.metrics.render().decode()


async def test_a_body_of_more_json_values_than_the_limit_gets_413_and_never_reaches_an_engine(tmp_path):
    async with stack(tmp_path, weight=0, limits={"max_json_values": 1000}) as s:
        status, body, _ = await s.post(chat(extra=[{} for _ in range(2000)]))
        assert status == 413 and b"max_json_values" in body
        assert s.old.stats.requests == 0
        assert [(r["status"], r["outcome"]) for r in request_rows(s)] == [(413, "bad_request")]
        assert 'reason="json_too_large"} 1.0' in s.gw.metrics.render().decode()
        assert s.gw.budget.used == 0


async def test_a_shadow_copy_the_budget_has_no_room_for_is_dropped_and_the_request_still_served(tmp_path):
    async with stack(
        tmp_path, weight=0, shadow={"percent": 100}, limits={"memory_budget_bytes": 16 * MIB, "max_body_bytes": 8 * MIB}
    ) as s:
        budget = s.gw.budget
        request = chat(messages=[{"role": "user", "content": "y" * 20_000}])
        priced = parsed_cost(orjson.dumps(request), tokens_bound(orjson.dumps(request)))
        # room for the body, its parse and the old arm's small answer (~5 KB priced); not for a 20 KB copy
        budget.take("review", budget.limit - priced - len(orjson.dumps(request)) - 10_000)
        status, _, _ = await s.post(request)
        assert status == 200
        shadows = s.shadow_rows()
        assert [(r.shadow.dropped, r.shadow.error) for r in shadows] == [(True, "memory_budget")]
        assert s.new.stats.requests == 0


REVIEW = {"pairs_per_day": 10, "sample_percent": 100, "max_concurrency": 4}


async def test_a_review_pair_draws_its_copies_until_it_is_stored_and_is_skipped_when_there_is_no_room(tmp_path):
    async with stack(
        tmp_path, weight=0, review=REVIEW, limits={"memory_budget_bytes": 16 * MIB, "max_body_bytes": 8 * MIB}
    ) as s:
        budget, spot = s.gw.budget, s.gw.spotcheck
        request = chat(messages=[{"role": "user", "content": "w" * 20_000}])
        seen: list[int] = []
        spot_maybe = spot.maybe

        def watched(*args):  # what the budget holds for reviews right after a pair starts
            started = spot_maybe(*args)
            seen.append(budget.by_kind["review"])
            return started

        spot.maybe = watched
        assert (await s.post(request))[0] == 200
        await await_until(lambda: spot.written == 1, 10, "the review pair stored")
        assert seen and seen[0] >= 2 * len(orjson.dumps(request))  # two copies of the body, and its parse
        await await_until(lambda: budget.by_kind["review"] == 0, 5, "the pair's draw given back")

        priced = parsed_cost(orjson.dumps(request), tokens_bound(orjson.dumps(request)))
        budget.take("answer", budget.limit - priced - len(orjson.dumps(request)) - 10_000)  # no room for a pair
        assert (await s.post(request))[0] == 200
        assert len(seen) == 1 and spot.written == 1
        assert [bool(r.get("reviewed")) for r in request_rows(s)] == [True, False]


async def test_the_arms_copy_of_a_body_with_usage_asked_for_draws_from_the_budget(tmp_path):
    async with stack(tmp_path, weight=100, limits={"memory_budget_bytes": 16 * MIB, "max_body_bytes": 8 * MIB}) as s:
        budget = s.gw.budget
        request = chat(stream=True, messages=[{"role": "user", "content": "v" * 200_000}])  # usage is asked for
        raw = orjson.dumps(request)
        priced = parsed_cost(raw, tokens_bound(raw))
        budget.take("answer", budget.limit - priced - len(raw) - 1000)  # room for the body and its parse only
        status, body, headers = await s.post(request)
        assert status == 503 and headers.get("Retry-After") == "1", body
        assert s.new.stats.requests == 0 and s.old.stats.requests == 0
        assert [(r["outcome"], r["error"]) for r in request_rows(s)] == [("refused", "memory_budget (request_body)")]
