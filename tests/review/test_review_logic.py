"""The pure parts of spot-checks: the Wilson interval, the rating gate, task types, the daily quota, redaction."""

from __future__ import annotations

import random

import pytest

from switchover.config.gateway import ReviewConfig, TaskRule, TaskTypesConfig
from switchover.evidence.review import ReviewSummary, rating_gate, summarize, wilson
from switchover.gateway.review_sampler import Quota, Redactor, task_type


@pytest.mark.parametrize(
    ("bad", "n", "low", "high"),
    [(0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (1, 100, 0.0018, 0.0545)],
)
def test_wilson_interval_matches_the_textbook_values(bad, n, low, high):
    lo, hi = wilson(bad, n)
    assert lo == pytest.approx(low, abs=2e-4) and hi == pytest.approx(high, abs=2e-4)
    assert wilson(0, 0) is None


def _summary(**types: dict[str, int]) -> ReviewSummary:
    ts = [summarize(name, sum(c.values()), c) for name, c in types.items()]
    total: dict[str, int] = {}
    for c in types.values():
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    return ReviewSummary(types=ts, total=summarize("all", sum(t.pairs for t in ts), total))


@pytest.mark.parametrize(
    ("types", "verdict"),
    [
        ({"chat": {"same": 5}}, "hold"),  # too few ratings never passes
        ({"chat": {"same": 18, "better": 1, "worse": 1}}, "pass"),  # 5 %
        ({"chat": {"same": 16, "broken": 4}}, "fail"),  # 20 %
        ({"chat": {"same": 30}, "sql": {"same": 17, "worse": 3}}, "fail"),  # 6 % overall, 15 % for sql (20 ratings)
        ({"chat": {"same": 30}, "sql": {"worse": 2}}, "pass"),  # 2 of 2 bad, too few to judge sql alone; 6.25 % overall
    ],
)
def test_the_rating_gate_holds_without_enough_ratings_and_judges_each_well_rated_type(types, verdict):
    assert rating_gate(_summary(**types), max_bad_share=0.10, min_ratings=20).verdict == verdict


def test_task_type_comes_from_the_first_matching_rule_then_the_header():
    cfg = TaskTypesConfig(
        rules=[
            TaskRule(type="sql", header="x-app", equals="sqlbot"),
            TaskRule(type="code", model="coder-7b"),
            TaskRule(type="completion", path="/v1/completions"),
        ]
    )
    h = {"x-app": "sqlbot", "x-task-type": "summarize"}.get
    assert task_type(cfg, "/v1/chat/completions", "m", h) == "sql"
    assert task_type(cfg, "/v1/chat/completions", "coder-7b", {}.get) == "code"
    assert task_type(cfg, "/v1/completions", "m", {}.get) == "completion"
    assert task_type(cfg, "/v1/chat/completions", "m", {"x-task-type": "summarize"}.get) == "summarize"
    assert task_type(cfg, "/v1/chat/completions", "m", {"x-task-type": "a b<script>"}.get) == "other"
    assert task_type(cfg, "/v1/chat/completions", "m", {}.get) == "other"


def test_the_quota_caps_each_day_and_each_type_and_starts_again_tomorrow():
    q = Quota(ReviewConfig(pairs_per_day=5, per_type_per_day=2, sample_percent=100))
    took = [q.take("2026-12-01", t) for t in ["a", "a", "a", "b", "b", "b", "c", "c", "d"]]
    assert took == [True, True, False, True, True, False, True, False, False]  # 2 a, 2 b, then the day's 5th is c
    assert q.take("2026-12-02", "a")
    q.load("2026-12-03", {"a": 2})  # a restart resumes the day's counts
    assert not q.take("2026-12-03", "a") and q.take("2026-12-03", "b")
    assert not Quota(ReviewConfig(pairs_per_day=0)).take("2026-12-01", "a")


def test_sample_percent_spreads_the_samples():
    q = Quota(ReviewConfig(pairs_per_day=100_000, per_type_per_day=100_000, sample_percent=10), random.Random(3))
    n = sum(q.take("d", "t") for _ in range(10_000))
    assert 800 < n < 1200


def test_redaction_masks_secrets_contacts_and_configured_patterns_before_storage():
    clean = Redactor(ReviewConfig(redact_patterns=[r"ACME-\d+"], max_chars=200))
    text = (
        "key sk-PLANTED0123456789abcdef, mail ann.lee@example.com, call +1 (555) 123-4567, "
        "order ACME-991, Authorization: Bearer abcdefghijkl, version 1.2.3 and 42 items"
    )
    out = clean(text)
    for secret in ("sk-PLANTED0123456789abcdef", "ann.lee@example.com", "555) 123-4567", "ACME-991", "abcdefghijkl"):
        assert secret not in out
    assert "[email]" in out and "[number]" in out and "[redacted]" in out
    assert "version 1.2.3 and 42 items" in out  # ordinary numbers stay
    assert clean("x" * 1000).endswith(" […]") and len(clean("x" * 1000)) <= 205


def test_a_sample_that_cannot_start_gives_its_place_back():
    q = Quota(ReviewConfig(pairs_per_day=2, per_type_per_day=2, sample_percent=100))
    assert q.take("d", "a") and q.take("d", "a") and not q.take("d", "a")
    q.give_back("d", "a")
    assert q.take("d", "a")


def test_header_named_task_types_are_capped_and_rule_types_always_pass():
    from switchover.gateway.review_sampler import LabelCap

    cfg = TaskTypesConfig(rules=[TaskRule(type="sql", header="x-app", equals="sqlbot")])
    cap = LabelCap(limit=3)
    assert [cap(cfg, f"t{i}") for i in range(5)] == ["t0", "t1", "t2", "other", "other"]
    assert cap(cfg, "t1") == "t1" and cap(cfg, "sql") == "sql" and cap(cfg, "other") == "other"
