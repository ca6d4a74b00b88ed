"""The custom gates' expression language: what it computes, what it refuses, and that it never evaluates code."""

from __future__ import annotations

import pytest

from switchover.expr import MAX_DEPTH, ExprError, compile_expr

FIELDS = {"status", "path", "outcome", "prompt_tokens", "completion_tokens", "finish_reason", "json_valid", "stream"}
ROW = {
    "status": 200,
    "path": "/v1/chat/completions",
    "outcome": "ok",
    "prompt_tokens": 2400,
    "completion_tokens": 7,
    "finish_reason": "length",
    "json_valid": None,
    "stream": True,
}


@pytest.mark.parametrize(
    ("src", "value"),
    [
        ("status == 200", True),
        ("status != 200", False),
        ("prompt_tokens > 2000 and finish_reason == 'length'", True),
        ('prompt_tokens > 5000 or outcome == "ok"', True),
        ("not (status >= 500)", True),
        ("outcome in ['error', 'failed_mid_stream']", False),
        ("outcome not in ['error', 'failed_mid_stream']", True),
        ("status in [200, 201]", True),
        ("completion_tokens * 2 + 1", 15),
        ("prompt_tokens / 0", None),  # division by zero is null, not an exception
        ("completion_tokens - -3", 10),
        ("startswith(path, '/v1/chat')", True),
        ("contains(lower(path), 'CHAT')", False),
        ("len(path) > 3", True),
        ("exists(json_valid)", False),
        ("json_valid == null", True),
        ("json_valid == false", False),  # null is not false
        ("json_valid > 0", False),  # ordering with null: false
        ("status > 'a'", False),  # number vs string: no order
        ("stream", True),
        ("1.5e1 == 15", True),
    ],
)
def test_expressions_compute_over_a_row(src: str, value: object) -> None:
    assert compile_expr(src, FIELDS)(ROW) == value


def test_a_filter_matches_only_a_true_value() -> None:
    assert compile_expr("json_valid == false", FIELDS).matches(ROW) is False
    assert compile_expr("completion_tokens", FIELDS).matches(ROW) is False  # 7 is not true
    assert compile_expr("status == 200", FIELDS).matches(ROW) is True


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("stauts == 200", "unknown field 'stauts' at 1"),
        ("__import__('os')", "unknown field '__import__'"),
        ("__import__('os').system('true')", "unexpected character '.'"),
        ("status == 200)", "unexpected ')'"),
        ("status ==", "end of expression"),
        ("status = 200", "unexpected character '='"),
        ("path ; 1", "unexpected character ';'"),
        ("lower(path, path)", "takes 1 argument, got 2"),
        ("startswith", "is a function"),
        ("status in [path]", "a list holds literals only"),
        ("", "non-empty"),
        ("x" * 501, "longer than 500"),
        ("(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1), "nested deeper"),
        ("not " * (MAX_DEPTH + 1) + "stream", "nested deeper"),
    ],
)
def test_bad_expressions_are_refused_naming_the_problem(src: str, message: str) -> None:
    with pytest.raises(ExprError, match=None) as exc:
        compile_expr(src, FIELDS)
    assert message in str(exc.value)


def test_the_fields_an_expression_reads_are_known() -> None:
    e = compile_expr("status >= 500 or finish_reason == 'length'", FIELDS)
    assert e.fields_used == {"status", "finish_reason"}
