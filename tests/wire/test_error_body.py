"""Error bodies in all three engine shapes parse into one model."""

from __future__ import annotations

import pytest

from switchover.wire.error_body import parse_error_body


@pytest.mark.parametrize(
    ("raw", "shape", "message", "type_", "code"),
    [
        (
            b'{"error":{"message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}}',
            "nested",
            "The model `x` does not exist.",
            "NotFoundError",
            "404",
        ),
        (
            b'{"object":"error","message":"bad temp","type":"BadRequestError","param":null,"code":400}',
            "flat",
            "bad temp",
            "BadRequestError",
            "400",
        ),
        (
            b'{"error":"Input validation error: `temperature` must be strictly positive","error_type":"validation"}',
            "tgi",
            "Input validation error: `temperature` must be strictly positive",
            "validation",
            None,
        ),
        (b"Internal Server Error", "text", "Internal Server Error", None, None),
        (b"  ", "empty", "", None, None),
        (b'{"detail":"Not Found"}', "text", '{"detail":"Not Found"}', None, None),
    ],
)
def test_error_shapes(raw: bytes, shape: str, message: str, type_: str | None, code: str | None) -> None:
    body = parse_error_body(raw)
    assert (body.shape, body.message, body.type, body.code) == (shape, message, type_, code)


def test_long_text_bodies_are_truncated() -> None:
    assert len(parse_error_body(b"x" * 10000).message) == 2000
