"""The review redactor (secrets, e-mail addresses, phone-like numbers) runs in time linear in the text, masks what
it masked before, is bounded by a capped review.max_chars, and runs off the gateway's event loop (issue 22: one
prompt of "(1." repeated froze the gateway for 18 s)."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from switchover.config.gateway import MAX_REVIEW_CHARS, ReviewConfig
from switchover.gateway import review_sampler as sampler
from switchover.gateway.review_sampler import Redactor
from tests.gateway.conftest import chat, stack

MB = 1 << 20
HANG_GUARD_S = 2.0  # CPU seconds of this process (time.process_time): other jobs on the machine do not count
# units that, repeated, start a possible e-mail or number at every few characters, each failing late
ADVERSARIAL = {
    "e-mail": ["a", "a.", "a@", "A_a.", "a@a.", "@a.", "a@a.a@", "a@a. ", "x@y."],
    "number": ["(1.", "1 ", "+1(", "1-1.", "`1-", "1a", "(1.a", "1", "1)(", "-u(1."],
}
# the patterns the redactor used before (quadratic on the inputs above): the oracle on short texts
_OLD_PII = (
    (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"), "[email]"),
    (re.compile(r"(?<![\w.])\+?\d[\d\s().-]{6,}\d(?![\w.])"), "[number]"),
)


def _pii(text: str) -> str:
    return sampler._NUMBER_RUN.sub(sampler._number, sampler._EMAIL.sub("[email]", text))


@pytest.mark.parametrize(("family", "unit"), [(f, u) for f, units in ADVERSARIAL.items() for u in units])
def test_one_megabyte_of_adversarial_text_is_masked_in_linear_time(family: str, unit: str) -> None:
    text = unit * (MB // len(unit) + 1)
    t0 = time.process_time()
    _pii(text)
    took = time.process_time() - t0
    assert took < HANG_GUARD_S, f"{family}: {unit!r} repeated to 1 MB took {took:.1f} s"


def test_the_redactor_at_its_largest_max_chars_is_fast_on_every_adversarial_unit_at_once() -> None:
    clean = Redactor(ReviewConfig(max_chars=MAX_REVIEW_CHARS))
    unit = "".join(u for units in ADVERSARIAL.values() for u in units) + "(-u --token= A_KEY= sk-"
    text = unit * (2 * MAX_REVIEW_CHARS // len(unit) + 1)
    t0 = time.process_time()
    out = clean(text)
    assert time.process_time() - t0 < HANG_GUARD_S and out.endswith(" […]")


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="1234 ().-+a_.@x٣b:", max_size=40))
def test_the_linear_masks_equal_the_former_patterns_on_any_short_text(text: str) -> None:
    expected = text
    for pattern, mask in _OLD_PII:
        expected = pattern.sub(mask, expected)
    assert _pii(text) == expected


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("call (555) 123-4567 today", "call ([number] today"),
        ("call +1 555 123 4567 now", "call [number] now"),
        ("order 12345678 shipped", "order [number] shipped"),
        ("order 1234567 shipped", "order 1234567 shipped"),
        ("v1.2.3 and 12345", "v1.2.3 and 12345"),
        ("write ann.lee+x@mail.example.org now", "write [email] now"),
        ("555-1234567 (555) 123-4567x", "[number]-4567x"),
    ],
)
def test_numbers_and_addresses_are_masked_as_before(text: str, masked: str) -> None:
    assert Redactor(ReviewConfig())(text) == masked


def test_max_chars_is_capped_and_says_why() -> None:
    with pytest.raises(ValidationError, match="less than or equal"):
        ReviewConfig(max_chars=1_000_000)
    assert ReviewConfig(max_chars=MAX_REVIEW_CHARS).max_chars == MAX_REVIEW_CHARS
    assert "event loop" in (ReviewConfig.model_fields["max_chars"].description or "")


async def test_the_gateway_redacts_review_pairs_off_its_event_loop(tmp_path, monkeypatch):
    calls: list[bool] = []
    real = Redactor.__call__

    def spy(self: Redactor, text: str) -> str:
        try:
            asyncio.get_running_loop()
            calls.append(True)  # on the event loop: every other request waits for it
        except RuntimeError:
            calls.append(False)
        return real(self, text)

    monkeypatch.setattr(Redactor, "__call__", spy)
    review = {"pairs_per_day": 1, "per_type_per_day": 1, "sample_percent": 100, "max_concurrency": 2}
    async with stack(tmp_path, review=review) as s:
        status, _, _ = await s.post(chat(max_tokens=3))
        assert status == 200
        deadline = time.monotonic() + 10
        while s.gw.spotcheck.written < 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert s.gw.spotcheck.written == 1
    assert calls and not any(calls), f"{sum(calls)} of {len(calls)} redactions ran on the event loop"
