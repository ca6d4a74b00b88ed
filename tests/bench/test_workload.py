"""Prompt synthesis to exact lengths, cache-busters, datasets and seeded arrivals."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from switchover.bench.workload import (
    PromptMaker,
    arrival_offsets,
    bucket_prompt,
    cache_buster,
    fit_bucket,
    load_dataset,
    unit_words,
    with_buster,
)
from switchover.errors import BadInput
from switchover.evidence.bench_findings import FILLER


def word_counter(bos: int = 1, two_token_words: frozenset[str] = frozenset()):
    """A fake server tokenizer: one token per word (two for some), plus BOS."""

    async def count(text: str) -> int:
        words = text.replace(".", " .").split()
        return bos + sum(2 if w in two_token_words else 1 for w in words)

    return count


async def test_fit_hits_the_exact_target():
    fit = await fit_bucket(word_counter(), 128, seed=0, bucket="128")
    assert fit.achieved == 128 and fit.deviation == 0
    p = bucket_prompt("completions", fit, 0, ("128", 0, 0, 7), 16)
    assert await word_counter()(str(p.payload)) == 128


async def test_fit_reports_the_deviation_when_no_word_count_hits():
    async def even(text: str) -> int:  # only even counts exist
        return 2 * len(text.split())

    fit = await fit_bucket(even, 33, seed=0, bucket="33")
    assert abs(fit.deviation) == 1 and fit.achieved in (32, 34)


async def test_fit_rejects_targets_shorter_than_the_cache_buster():
    with pytest.raises(BadInput, match="too short"):
        await fit_bucket(word_counter(), 4, seed=0, bucket="4")


async def test_unit_words_drop_multi_token_words():
    units = await unit_words(word_counter(two_token_words=frozenset({"data", "value"})))
    assert "data" not in units and "value" not in units and "the" in units


async def test_every_request_has_the_same_length_with_unit_words():
    count = word_counter(two_token_words=frozenset({"data", "value", "hold"}))
    vocab = await unit_words(count)
    fit = await fit_bucket(count, 64, seed=3, bucket="64", vocab=vocab)
    lengths = {await count(str(bucket_prompt("completions", fit, 3, ("64", 0, 0, i), 8).payload)) for i in range(30)}
    assert lengths == {64}


def test_cache_buster_is_unique_per_request_and_deterministic():
    a = cache_buster(0, ("128", 0, 0, 1))
    assert a == cache_buster(0, ("128", 0, 0, 1))
    assert a != cache_buster(0, ("128", 0, 0, 2))
    assert cache_buster(0, ("x",), unique=False) == cache_buster(0, ("y",), unique=False)
    assert all(w in FILLER for w in a.rstrip(".").split()[1:])


def test_cache_busters_of_a_step_are_distinct_across_blocks_and_the_same_when_drawn_again():
    from switchover.bench.workload import BUSTER_BLOCK

    n = 2 * BUSTER_BLOCK + 5
    first = [cache_buster(7, ("128", 1, 0, i)) for i in range(n)]
    assert [cache_buster(7, ("128", 1, 0, i)) for i in reversed(range(n))] == first[::-1]
    assert len(set(first)) > 0.99 * n  # seeded draws: a rare repeat is possible, a repeated block is not
    assert first[:BUSTER_BLOCK] != first[BUSTER_BLOCK : 2 * BUSTER_BLOCK]
    assert first[:50] != [cache_buster(7, ("128", 2, 0, i)) for i in range(50)]  # another step, other words


def test_a_step_draws_one_seeded_generator_per_block_of_requests_not_one_per_request(monkeypatch):
    from switchover.bench import workload

    made = []
    real = workload._rng
    monkeypatch.setattr(workload, "_rng", lambda *parts: made.append(parts) or real(*parts))
    workload._buster_block.cache_clear()
    make = PromptMaker(_Plan(), _fit(), None, ("128", 9, 0))
    for i in range(5000):  # one generator per request once cost a seventh of a bench run's CPU
        make(i)
    assert len([m for m in made if m[1] == "buster"]) == -(-5000 // workload.BUSTER_BLOCK)


class _Plan:
    api = "chat"
    seed = 5
    output_tokens = 8
    allow_prefix_cache = False


def _fit():
    from switchover.evidence.bench_findings import BucketFit

    return BucketFit(bucket="32", target=32, words=20, achieved=32, deviation=0, method="x", probes=1)


@pytest.mark.parametrize("api", ["chat", "completions"])
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("source", ["bucket", "dataset"])
def test_a_steps_prompt_maker_gives_each_request_the_prompt_its_key_names(tmp_path, api, shared, source):
    plan = _Plan()
    plan.api, plan.allow_prefix_cache = api, shared
    dataset = None
    if source == "dataset":
        line = {"prompt": "tell me"} if api == "completions" else {"messages": [{"role": "user", "content": "hi"}]}
        path = tmp_path / "d.jsonl"
        path.write_text("\n".join(json.dumps({**line, "max_tokens": k + 1}) for k in range(3)))
        dataset = load_dataset(path, 8)
    head = ("32", 2, 1)
    make = PromptMaker(plan, None if dataset else _fit(), dataset, head)
    for i in [*range(5), 1023, 1024, 1025, 3000, 7, 2]:  # across blocks, and back
        key = (*head, i)
        if dataset is None:
            want = bucket_prompt(api, _fit(), plan.seed, key, plan.output_tokens, unique=not shared)
        else:
            want = dataset[i % 3] if shared else with_buster(dataset[i % 3], cache_buster(plan.seed, key, True))
        assert make(i) == want
    if not shared:
        assert make(1) != make(2)
    if dataset is not None and api == "chat":  # the dataset's own messages are never changed
        assert dataset[0].payload == [{"role": "user", "content": "hi"}]


def test_chat_prompts_are_messages():
    from switchover.evidence.bench_findings import BucketFit

    fit = BucketFit(bucket="32", target=32, words=20, achieved=32, deviation=0, method="x", probes=1)
    p = bucket_prompt("chat", fit, 0, ("k",), 8)
    assert isinstance(p.payload, list) and p.payload[0]["role"] == "user"


def test_same_seed_same_arrivals_and_mean_rate():
    a = arrival_offsets("poisson", 10.0, 2000, seed=1)
    assert a == arrival_offsets("poisson", 10.0, 2000, seed=1)
    assert a != arrival_offsets("poisson", 10.0, 2000, seed=2)
    assert a[0] == 0.0
    assert np.mean(np.diff(a)) == pytest.approx(0.1, rel=0.1)


def test_constant_rate_gaps_are_exact():
    assert np.diff(arrival_offsets("constant", 4.0, 5, seed=0)) == pytest.approx([0.25] * 4)


def test_gamma_burstiness_below_one_is_burstier_than_poisson():
    p = np.diff(arrival_offsets("poisson", 10.0, 5000, seed=0))
    g = np.diff(arrival_offsets("gamma", 10.0, 5000, seed=0, burstiness=0.25))
    assert np.mean(g) == pytest.approx(0.1, rel=0.15)
    assert np.std(g) > 1.5 * np.std(p)


def test_bad_rate_is_bad_input():
    with pytest.raises(BadInput, match="rate must be positive"):
        arrival_offsets("constant", 0, 3, seed=0)


def test_dataset_prompts_messages_and_trace(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text(
        "\n".join(
            json.dumps(o)
            for o in [{"prompt": "hi", "timestamp": 100.0}, {"prompt": "there", "max_tokens": 5, "timestamp": 101.5}]
        )
    )
    ps = load_dataset(f, 16)
    assert [p.at_s for p in ps] == [0.0, 1.5]
    assert [p.max_tokens for p in ps] == [16, 5]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"prompt": 1}'], ":1: `prompt` must be a string"),
        (['{"x": 1}'], ":1: each line needs exactly one of"),
        (['{"prompt": "a"}', "nope"], ":2: not valid JSON"),
        (['{"prompt": "a", "max_tokens": 0}'], ":1: `max_tokens` must be a positive integer"),
        (['{"prompt": "a"}', '{"messages": [{"role": "user", "content": "b"}]}'], "mixes"),
        (['{"prompt": "a", "timestamp": 1}', '{"prompt": "b"}'], "every line has a `timestamp`"),
        ([], "empty"),
    ],
)
def test_dataset_errors_name_the_line(tmp_path, lines, message):
    f = tmp_path / "d.jsonl"
    f.write_text("\n".join(lines))
    with pytest.raises(BadInput, match=re.escape(message)):
        load_dataset(f, 16)
