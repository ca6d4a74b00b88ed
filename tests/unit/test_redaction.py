"""One redaction function masks every secret shape switchover may see, and leaves ordinary text alone."""

from __future__ import annotations

import logging

import pytest

from switchover.redaction import RedactFilter, redact, redact_data, redact_headers


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("curl -u admin:SECRET1 http://x/health", "SECRET1"),
        ("curl --user=admin:SECRET1 http://x", "SECRET1"),
        ("http://admin:SECRET1@host:8000/v1", "SECRET1"),
        ("https://tok3n@host/v1", "tok3n"),
        ("-H 'Authorization: Basic dXNlcjpwYXNz' http://x", "dXNlcjpwYXNz"),
        ("Authorization: Bearer abcdefghijk", "abcdefghijk"),
        ("got 'sk-live-1234567890abcdef'", "1234567890abcdef"),
        ("OPENAI_API_KEY=pl4inv4lue ./serve", "pl4inv4lue"),
        ("vllm serve m --api-key hunter22 --port 1", "hunter22"),
        ('{"password": "swordfish"}', "swordfish"),
        ("x-api-key: abc123", "abc123"),
        ("hf download --token hf_abcdefghijklmnopqrstu", "abcdefghijklmnopqrstu"),
    ],
)
def test_secrets_are_masked(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out and "***" in out


@pytest.mark.parametrize(
    "text",
    [
        "python -u -m vllm serve m",
        "max_tokens: 5, tokens: 10",
        "the basic arithmetic of tokens",
        "https://example.com/path@x",
        "unexpected token: '}' at 3",
        "task-abcdefghijkl",
    ],
)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_data_and_headers_are_masked_by_field_name_and_content() -> None:
    data = {
        "headers": {"Authorization": "Bearer abcdefgh"},
        "api_key": "k",
        "token": None,
        "cmds": ["curl -u a:b1 x"],
        "n": 3,
    }
    assert redact_data(data) == {
        "headers": {"Authorization": "***"},
        "api_key": "***",
        "token": None,
        "cmds": ["curl -u *** x"],
        "n": 3,
    }
    assert redact_headers({"X-Api-Key": "k", "Accept": "json"}) == [("X-Api-Key", "***"), ("Accept", "json")]


def test_the_logging_filter_masks_formatted_messages(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("switchover.test.redact")
    caplog.handler.addFilter(RedactFilter())
    with caplog.at_level(logging.INFO, logger="switchover.test.redact"):
        log.info("upstream %s answered %d", "http://admin:hunter22@h:1", 401)
    assert "hunter22" not in caplog.text and "http://***@h:1 answered 401" in caplog.text


@pytest.mark.parametrize(
    "text",
    [
        "ab+" * 100_000,
        "http://" + "a" * 300_000,
        "A_" * 150_000,
        "-ua" * 100_000,
        "api_key=" * 40_000,
        "bearer " * 40_000,
    ],
)
def test_long_adversarial_text_is_masked_in_linear_time(text: str) -> None:
    import time

    t0 = time.perf_counter()
    redact(text)
    assert time.perf_counter() - t0 < 2.0  # ~0.1 s; the quadratic scheme rule took minutes on "ab+" * 100_000
