"""Pure verify logic: divergence points, flags, tolerant summaries, text checks, prompt files, logprob parsing."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from switchover.errors import BadInput
from switchover.verify import textcheck
from switchover.verify.divergence import Output, agreement, compare, first_difference, summarize
from switchover.verify.greedy import output_from
from switchover.verify.prompts import load_jsonl
from switchover.wire.records import RequestRecord


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [("hello", "hello", None), ("hello", "help", 3), ("abc", "abcdef", 3), ("", "x", 0), (["a", "b"], ["a", "c"], 1)],
)
def test_first_difference_finds_the_first_mismatch_or_the_shorter_end(a, b, want) -> None:
    assert first_difference(a, b) == want


def test_agreement_counts_positions_over_the_longer_sequence() -> None:
    assert agreement(["a", "b", "c", "d"], ["a", "x", "c"]) == 0.5
    assert agreement([], []) == 1.0


def test_identical_outputs_are_not_flagged() -> None:
    d = compare(
        "p",
        "english",
        Output(text="Paris is", tokens=["Paris", " is"], token_source="chunks"),
        Output(text="Paris is", tokens=["Paris", " is"], token_source="chunks"),
    )
    assert d.identical and d.first_char is None and d.flags == [] and d.token_agreement == 1.0


def test_divergence_in_the_first_8_characters_is_flagged() -> None:
    d = compare("p", "english", Output(text="The capital"), Output(text="Tha capital"))
    assert d.first_char == 2 and any("first 8" in f for f in d.flags)
    late = compare("p", "english", Output(text="The capital is Paris"), Output(text="The capital is Lyon."))
    assert late.first_char == 15 and late.flags == []


def test_lengths_differing_more_than_twice_are_flagged() -> None:
    d = compare("p", "code", Output(text="def f(): return 1" * 3), Output(text="def f(): return 1"))
    assert any("2x" in f for f in d.flags)


def test_token_positions_use_reference_ids_when_both_have_them() -> None:
    old = Output(text="ab cd", tokens=["ab", " cd"], ids=[1, 2, 3])
    new = Output(text="ab ce", tokens=["ab", " ce"], ids=[1, 2, 4])
    d = compare("p", "x", old, new)
    assert d.first_token == 2 and d.old_tokens == 3 and d.token_basis == "reference tokenizer"


def test_logprob_tokens_are_never_compared_with_stream_chunks() -> None:
    """One engine gave logprobs (one token each), the other only a stream whose chunks hold several tokens:
    positions would compare different units, so there are no token figures and no tie gap, and the basis says so.
    The character-level comparison still stands."""
    old = Output(
        text="The cat sat",
        tokens=["The", " cat", " sat"],
        token_source="logprobs",
        logprobs=[-0.1, -0.2, -0.3],
        top=[{"The": -0.1}, {" cat": -0.2}, {" sat": -0.3, " sit": -0.4}],
    )
    new = Output(text="The cat sit", tokens=["The cat", " sit"], token_source="chunks")
    d = compare("p", "x", old, new)
    assert d.first_char == 9
    assert d.first_token is None and d.token_agreement is None and d.tie_gap is None
    assert d.logprob_delta_mean is None
    assert d.token_basis is not None and "logprobs" in d.token_basis and "chunks" in d.token_basis


def test_logprob_deltas_cover_the_common_prefix_and_the_tie_gap_reads_the_new_alternatives() -> None:
    old = Output(
        text="A B",
        tokens=["A", " B"],
        token_source="logprobs",
        logprobs=[-0.1, -0.7],
        top=[{"A": -0.1}, {" B": -0.7, " C": -0.8}],
    )
    new = Output(
        text="A C",
        tokens=["A", " C"],
        token_source="logprobs",
        logprobs=[-0.3, -0.69],
        top=[{"A": -0.3}, {" C": -0.69, " B": -0.71}],
    )
    d = compare("p", "x", old, new)
    assert d.logprob_delta_mean == pytest.approx(0.2)
    assert d.tie_gap == pytest.approx(0.02)
    s = summarize([d])
    assert s.near_ties == 1 and s.prompts == 1 and s.identical == 0


def test_failed_side_is_flagged_and_counted_not_compared() -> None:
    d = compare("p", "x", Output(text="x"), Output(error="HTTP 500"))
    assert not d.identical and d.flags and d.first_char is None
    s = summarize([d, compare("q", "x", Output(text="a"), Output(text="a"))])
    assert s.failed == 1 and s.identical == 1 and s.prefix_chars_p50 == 1.0


def test_summary_prefix_distribution_is_over_common_prefix_lengths() -> None:
    divs = [compare(str(i), "x", Output(text="a" * i + "X"), Output(text="a" * i + "Y")) for i in (0, 10, 20)]
    s = summarize(divs)
    assert s.prefix_chars_p50 == 10.0 and s.prefix_chars_p10 == 2.0


def test_repetition_loop_detection() -> None:
    assert textcheck.is_loop("the cat sat " * 10)
    assert textcheck.tail_loop("answer: ababababab") == "ab"
    assert not textcheck.is_loop("The harbour council met to review the budget for the new sea wall.")


def test_script_drift_between_prompt_and_output() -> None:
    assert textcheck.script_drift("请总结上面的文字", "The council met on a grey morning") == "cjk -> latin"
    assert textcheck.script_drift("Summarize the text", "The council met on a grey morning") is None
    assert textcheck.script_drift("Summarize", "ok") is None  # too few letters to judge


def test_early_stop_is_a_self_stop_with_few_tokens() -> None:
    assert textcheck.early_stop("stop", 2)
    assert not textcheck.early_stop("length", 2)
    assert not textcheck.early_stop("stop", 40)
    assert textcheck.early_stop("stop", None) is None  # no token count: not judged
    assert textcheck.early_stop("length", None) is False


def test_prompt_file_errors_name_the_line(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "hi"}\n\n{"messages": [{"role": "user", "content": "x"}], "max_tokens": 8}\n')
    cases = load_jsonl(f)
    assert [c.id for c in cases] == ["line-1", "line-3"] and cases[1].max_tokens == 8
    f.write_text('{"prompt": "hi"}\n{"id": "b"}\n')
    with pytest.raises(BadInput, match="line 2"):
        load_jsonl(f)
    f.write_text("not json\n")
    with pytest.raises(BadInput, match="line 1: not JSON"):
        load_jsonl(f)
    with pytest.raises(BadInput, match="no such file"):
        load_jsonl(tmp_path / "missing.jsonl")


def _rec(**kw) -> RequestRecord:
    return RequestRecord(api="chat", stream=False, model="m", started_wall=0.0, send_ns=0, **kw)


def test_output_from_reads_chat_logprobs_by_bytes_and_completions_logprobs() -> None:
    chat = _rec(
        texts={0: "Hi"},
        finish_reasons={0: "length"},
        logprobs=[
            {
                "content": [
                    {
                        "token": "H",
                        "bytes": [72],
                        "logprob": -0.5,
                        "top_logprobs": [{"token": "H", "bytes": [72], "logprob": -0.5}],
                    },
                    {"token": "bytes:\\xe4", "bytes": [228], "logprob": -1.0, "top_logprobs": []},
                ]
            }
        ],
    )
    o = output_from(chat)
    assert o.tokens == ["H", "\\xe4"] and o.logprobs == [-0.5, -1.0] and o.top[0] == {"H": -0.5}
    comp = _rec(
        texts={0: "ab"},
        logprobs=[{"tokens": ["a", "b"], "token_logprobs": [-1.0, None], "top_logprobs": [{"a": -1.0}, {"b": -2.0}]}],
    )
    o = output_from(comp)
    assert o.tokens == ["a", "b"] and math.isnan(o.logprobs[1])
