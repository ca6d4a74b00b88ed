"""The PromQL lexer tells metric names from functions, aggregations, keywords, labels and strings."""

from __future__ import annotations

import pytest

from switchover.alerts.promql import PromQLError, lex, parse, replace_spans


def _names(expr: str) -> list[str | None]:
    return [s.name for s in parse(expr).selectors]


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("sum by (le) (rate(a_bucket[5m]))", ["a_bucket"]),
        ("sum(rate(a[1h30m])) by (model_name) / sum(b offset 5m)", ["a", "b"]),
        ('count_values("v", up) and on(job) vllm:x{job="a", le="1.0"}', ["up", "vllm:x"]),
        ('label_replace(a, "dst", "rate(b)", "src", "(.*)")', ["a"]),  # names inside strings are not metrics
        ('{__name__=~"vllm:.*"}', [None]),
        ('{__name__="vllm:x", job="a"}', ["vllm:x"]),
        ("max_over_time(a[10m:1m]) > Inf or NaN", ["a"]),
        ("topk(5, a) unless bool b", ["a", "b"]),
        ("time() - a", ["a"]),
    ],
)
def test_metric_names_are_found_and_nothing_else(expr: str, names: list[str | None]) -> None:
    assert _names(expr) == names


def test_matchers_groupings_quantiles_and_thresholds_are_read() -> None:
    p = parse(
        'histogram_quantile(0.99, sum by (le, model_name) (rate(x_bucket{le="0.5",model_name!~"a|b"}[5m]))) > 2.5'
    )
    (sel,) = p.selectors
    assert [(m.label, m.op, m.value) for m in sel.matchers] == [("le", "=", "0.5"), ("model_name", "!~", "a|b")]
    assert [g.keyword for g in p.groupings] == ["by"] and [lbl for lbl, _ in p.groupings[0].labels] == [
        "le",
        "model_name",
    ]
    assert p.quantiles == [0.99] and p.thresholds == [(">", 2.5)]


def test_spans_are_replaced_exactly_and_overlaps_refused() -> None:
    expr = "rate(a[5m]) / rate(a[5m])"
    edits = [(s.name_start, s.name_end, "bb") for s in parse(expr).selectors]
    assert replace_spans(expr, edits) == "rate(bb[5m]) / rate(bb[5m])"
    with pytest.raises(ValueError, match="overlapping"):
        replace_spans(expr, [(0, 4, "x"), (2, 6, "y")])


def test_a_character_promql_does_not_have_is_refused() -> None:
    with pytest.raises(PromQLError, match="unexpected character '\\$'"):
        parse("rate(a[5m]) $ 2")


def test_hexadecimal_numbers_are_read_as_thresholds_and_quantile_levels() -> None:
    p = parse("histogram_quantile(0x0, rate(a_bucket[5m])) > 0x1F")
    assert p.quantiles == [0.0] and p.thresholds == [(">", 31.0)]


def test_one_tokenizer_serves_both_languages() -> None:
    """PromQL and the ledger-field expressions share switchover.lexing: same scanning, same error wording."""
    from switchover.expr import ExprError, compile_expr
    from switchover.lexing import Token

    toks = lex("rate(x[5m:1m]) # note")
    assert [t.text for t in toks] == ["rate", "(", "x", "[", "5m", ":", "1m", "]", ")"]
    assert toks[5] == Token("op", ":", 9) and toks[4].end == 9
    with pytest.raises(PromQLError, match=r"unexpected character '\$' at 3"):
        lex("a $ b")
    with pytest.raises(ExprError, match=r"unexpected character '\$' at 3"):
        compile_expr("a $ b", ["a", "b"])
