"""Each checklist rule against small evidence tables: the verdict follows from the figures, and a missing
measurement gives not-run (never go)."""

from __future__ import annotations

import pytest

from switchover.check.judging import Limits
from switchover.check.rules import RULES, judge_all
from switchover.config.check import CheckSection, Thresholds
from tests.check import builders as b


def verdict(rule: str, **parts):  # type: ignore[no-untyped-def]
    ev = b.evidence(**parts)
    j = RULES[rule](ev, Limits.of(ev))
    return j.verdict, j


@pytest.mark.parametrize(
    ("steps", "deltas", "expected"),
    [
        ([b.step("old", 1), b.step("new", 1)], [], "go"),
        ([b.step("old", 1), b.step("new", 1, error_rate=0.2)], [], "no-go"),
        ([b.step("old", 1), b.step("new", 1)], [b.delta("ttft", 100, 200, significant=True)], "no-go"),
        ([b.step("old", 1), b.step("new", 1)], [b.delta("ttft", 100, 200, significant=False, p=0.3)], "warn"),
        ([b.step("old", 1), b.step("new", 1)], [b.delta("ttft", 100, 110, significant=True)], "go"),
    ],
)
def test_scheduling_judges_error_rate_and_significant_ttft_regression(steps, deltas, expected) -> None:  # type: ignore[no-untyped-def]
    v, _ = verdict("engine.scheduling", bench=b.bench(steps, [b.ab(1, *deltas)] if deltas else []))
    assert v == expected


def test_scheduling_uses_bench_slos_when_no_threshold_is_set() -> None:
    ev = b.evidence(bench=b.bench([b.step("old", 1), b.step("new", 1, error_rate=0.05)]), slos={"max_error_rate": 0.1})
    assert RULES["engine.scheduling"](ev, Limits.of(ev)).verdict == "go"


def test_scheduling_warns_on_a_differing_error_probe() -> None:
    v, j = verdict("engine.scheduling", probe=b.probe(b.probe_result("error.unknown_model", "errors", "differs")))
    assert v == "warn" and "error.unknown_model" in j.reason()


@pytest.mark.parametrize(
    ("longest", "expected"),
    [((2000, 2000), "go"), ((2000, 1900), "go"), ((2000, 1000), "no-go"), ((None, None), "not-run")],
)
def test_kv_cache_compares_the_longest_input_really_served(longest, expected) -> None:  # type: ignore[no-untyped-def]
    v, _ = verdict("engine.kv_cache", verify=b.verify(longest=longest))
    assert v == expected


@pytest.mark.parametrize(
    ("knees", "old_tok", "new_tok", "expected"),
    [
        ({"old/128": b.knee(False), "new/128": b.knee(False)}, 100, 95, "go"),
        ({"old/128": b.knee(True, 8), "new/128": b.knee(True, 2)}, 100, 100, "warn"),
        ({"old/128": b.knee(False), "new/128": b.knee(False)}, 100, 50, "warn"),
    ],
)
def test_batching_warns_on_an_earlier_knee_or_lower_throughput(knees, old_tok, new_tok, expected) -> None:  # type: ignore[no-untyped-def]
    rep = b.bench([b.step("old", 4, tok_s=old_tok), b.step("new", 4, tok_s=new_tok)], knees=knees)
    assert verdict("engine.batching", bench=rep)[0] == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, "go"),
        ({"structured": (3, 1)}, "no-go"),
        ({"structured": (3, 3), "new_loop": True}, "no-go"),
        ({"flags": ["diverges within the first 8 characters (at 2)"], "identical": False}, "warn"),
    ],
)
def test_kernels_judges_json_validity_long_inputs_and_greedy_flags(kwargs, expected) -> None:  # type: ignore[no-untyped-def]
    assert verdict("engine.kernels", verify=b.verify(**kwargs))[0] == expected


def test_structured_requests_without_an_answer_are_not_counted_as_invalid() -> None:
    """3 valid of 3 answered, 3 more timed out: 100 %, not 50 %; with no answer at all the check is missing."""
    v, j = verdict("engine.kernels", verify=b.verify(structured=(3, 3), new_unanswered=3))
    assert v == "go" and any("3/3 valid (3 more got no answer)" in s for s in j.ok)
    v, j = verdict("engine.kernels", verify=b.verify(structured=(3, 0), new_unanswered=0))
    assert v == "no-go"  # 0 of 3 answered outputs valid is a real drop
    ev = b.verify(structured=(3, 0))
    ev.structured[1] = ev.structured[1].model_copy(
        update={
            "total": 2,
            "cases": [b.StructuredCase(id="a", status="error"), b.StructuredCase(id="b", status="error")],
        }
    )
    v, j = verdict("engine.kernels", verify=ev)
    assert v != "no-go" and any("no request got an answer on new" in m for m in j.missing)


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ([b.probe_result("stop.count", "stop", "same")], "go"),
        ([b.probe_result("stop.count", "stop", "differs")], "no-go"),
        ([b.probe_result("n.parallel", "n", "differs", breaking=False)], "warn"),
        ([b.probe_result("error.malformed", "errors", "differs")], "not-run"),  # not this item's category
    ],
)
def test_defaults_is_no_go_on_a_breaking_api_difference(results, expected) -> None:  # type: ignore[no-untyped-def]
    assert verdict("engine.defaults", probe=b.probe(*results))[0] == expected


def test_an_observation_its_engine_profile_does_not_predict_is_a_warning() -> None:
    same = b.probe_result("stop.count", "stop", "same")
    assert same.new is not None
    same.new.value, same.new.expected, same.new.profile_match = "accepted", {"status": 400}, False
    report = b.probe(same)
    report.new.engine = "vllm"
    v, j = verdict("engine.defaults", probe=report)
    assert v == "warn"
    assert any("probe stop.count on new" in w and "vllm profile predicts" in w for w in j.warn), j.warn
    same.new.profile_match = True
    assert verdict("engine.defaults", probe=report)[0] == "go"


def test_check_probes_each_side_with_its_engine_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    import switchover.probe as probe_pkg
    from switchover.check import parts
    from switchover.config.migration import Migration

    seen = {}

    async def fake_run_probes(old, new, probes, opts, on_progress=None):  # type: ignore[no-untyped-def]
        seen["engines"] = (old.engine, new.engine)
        return b.probe()

    monkeypatch.setattr(probe_pkg, "run_probes", fake_run_probes)
    m = Migration.model_validate(
        {
            "old": {"url": "http://127.0.0.1:1", "engine": "vllm"},
            "new": {"url": "http://127.0.0.1:2", "engine": "llamacpp"},
        }
    )
    asyncio.run(parts.probe_part(m, CheckSection(), lambda *a: None))
    assert seen["engines"] == ("vllm", "llamacpp")  # was (None, None): no profile expectation was checked


def test_defaults_without_probe_is_not_run() -> None:
    assert verdict("engine.defaults")[0] == "not-run"


@pytest.mark.parametrize(
    ("kwargs", "expected"), [({}, "go"), ({"status": "renamed"}, "warn"), ({"new_reachable": False}, "no-go")]
)
def test_observability_needs_new_metrics_and_flags_renames(kwargs, expected) -> None:  # type: ignore[no-untyped-def]
    assert verdict("engine.observability", metrics=b.metrics(**kwargs))[0] == expected


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        ([(10, 10, True), (20, 20, True)], "go"),
        ([(10, 10, False)], "warn"),
        ([(100, 125, False)], "no-go"),  # seed 001 §1: +25% tokens breaks every budget
        ([(None, None, None)], "not-run"),
        ([(0, 0, True), (100, 125, False)], "no-go"),  # an empty text (0 tokens) is no "0 % change" to average in
    ],
)
def test_tokenizer_counts_shift_against_tolerance(texts, expected) -> None:  # type: ignore[no-untyped-def]
    assert verdict("model.tokenizer", live_model=b.live(texts))[0] == expected


@pytest.mark.parametrize(
    ("texts", "chats", "expected"),
    [
        ([(10, 10, True)], [(20, 20)], "go"),
        ([(10, 10, True)], [(20, 26)], "no-go"),
        ([(10, 12, False)], [(20, 26)], "not-run"),  # tokenizers differ: the live check cannot isolate the template
    ],
)
def test_chat_template_differs_when_prompt_tokens_differ_but_tokenizers_agree(texts, chats, expected) -> None:  # type: ignore[no-untyped-def]
    assert verdict("model.chat_template", live_model=b.live(texts, chats))[0] == expected


def test_chat_template_uses_diff_model_renders() -> None:
    dm = b.diff_model(changed_renders=("system+user",))
    v, j = verdict("model.chat_template", diff_model=dm)
    assert v == "no-go" and "system+user" in j.reason()
    assert verdict("model.chat_template", diff_model=b.diff_model())[0] == "go"


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (b.probe_result("sampling.defaults", "sampling", "same"), "go"),
        (b.probe_result("sampling.defaults", "sampling", "differs"), "no-go"),
        (b.probe_result("sampling.defaults", "sampling", "inconclusive"), "not-run"),
    ],
)
def test_sampling_defaults_follow_the_defaults_probe(result, expected) -> None:  # type: ignore[no-untyped-def]
    other = b.probe_result("sampling.seed_repeat", "sampling", "differs")  # belongs to engine.defaults only
    assert verdict("model.sampling_defaults", probe=b.probe(result, other))[0] == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"configured": [120.0]}, "go"),  # 2000 x 35 ms = 70 s + 7 s margin = 77 s
        ({"configured": [30.0]}, "no-go"),  # seed 001 §3: 30 s grace kills a 70 s generation
        ({"configured": [120.0, 30.0]}, "no-go"),
        ({}, "warn"),
        ({"tpot": None, "configured": [120.0]}, "not-run"),
    ],
)
def test_grace_covers_max_tokens_times_tpot_p99(kwargs, expected) -> None:  # type: ignore[no-untyped-def]
    v, j = verdict("rollout.grace", grace=b.grace(**kwargs))
    assert v == expected
    if expected != "not-run":
        assert any(f.name.startswith("required grace") and f.value == 77.0 for f in j.figures)


@pytest.mark.parametrize(("timeout", "expected"), [(15.0, "warn"), (120.0, "go"), (None, "not-run")])
def test_client_timeout_shorter_than_generation_warns(timeout, expected) -> None:  # type: ignore[no-untyped-def]
    assert verdict("rollout.client_timeout", grace=b.grace(client_timeout=timeout))[0] == expected


def test_weights_go_on_identical_hash_warn_on_change() -> None:
    assert verdict("model.weights", diff_model=b.diff_model(weights=("a", "a")))[0] == "go"
    assert verdict("model.weights", diff_model=b.diff_model(weights=("a", "b")))[0] == "warn"
    v, j = verdict("model.weights", diff_model=b.diff_model(weights=(None, None)))
    assert v == "not-run" and "did not hash the weights" in j.reason()


def test_every_item_is_not_run_without_evidence_and_names_why() -> None:
    items = judge_all(b.evidence())
    assert {i.verdict for i in items} == {"not-run"}
    assert all("not measured" in i.reason or "nothing measured" in i.reason for i in items)


def test_a_rule_that_crashes_gives_not_run_with_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(ev, lim):  # type: ignore[no-untyped-def]
        raise KeyError("weird")

    monkeypatch.setitem(RULES, "rollout.grace", boom)
    item = next(i for i in judge_all(b.evidence(grace=b.grace(configured=[999.0]))) if i.id == "rollout.grace")
    assert item.verdict == "not-run" and "rule error: KeyError" in item.reason


def test_thresholds_from_the_check_section_override_defaults() -> None:
    s = CheckSection(thresholds=Thresholds(tokenizer_shift_pct=30.0))
    ev = b.evidence(settings=s, live_model=b.live([(100, 125, False)]))
    assert RULES["model.tokenizer"](ev, Limits.of(ev)).verdict == "warn"


def test_sampling_defaults_warn_when_diff_model_finds_changed_effective_defaults() -> None:
    same = b.probe(b.probe_result("sampling.defaults", "sampling", "same"))
    notes = b.diff_model(notes=["vllm -> llamacpp: temperature changes"])
    assert verdict("model.sampling_defaults", probe=same, diff_model=notes)[0] == "warn"
    changed = b.diff_model(file_changes={"temperature": (0.7, 1.0)})
    v, j = verdict("model.sampling_defaults", probe=same, diff_model=changed)
    assert v == "warn" and "temperature: 0.7 → 1.0" in j.reason()
    assert verdict("model.sampling_defaults", probe=same, diff_model=b.diff_model())[0] == "go"


def test_weights_warn_names_a_quantization_change_from_diff_model() -> None:
    dm = b.diff_model(
        weights=("a", "b"),
        quantization=("BF16", "Q4_1"),
        reasons=[b.Reason(blocking=True, what="quantization changed", why="BF16 -> Q4_1", action="evaluate")],
    )
    v, j = verdict("model.weights", diff_model=dm)
    assert v == "warn" and "quantization changed" in j.reason()
    assert any(f.name == "old / new quantization" and f.value == "BF16 / Q4_1" for f in j.figures)


def _rollback(drill: dict | None, prereqs: dict[str, str], holding_at_risk: bool | None = None):  # type: ignore[no-untyped-def]
    from switchover.evidence.drill import DrillResult
    from switchover.rollout.holding import HoldingReport, OldArmView, Prerequisite
    from switchover.rollout.rollback_view import RollbackEvidence

    d = (
        None
        if drill is None
        else DrillResult(url="http://old", stop_command="stop", start_command="start", started_wall=0.0, **drill)
    )
    pre = [Prerequisite(name=n, status=s, detail=f"{n} {s}") for n, s in prereqs.items()]  # type: ignore[arg-type]
    holding = (
        None
        if holding_at_risk is None
        else HoldingReport(
            started_at=0,
            ends_at=1,
            decision="hold",
            at_risk=holding_at_risk,
            windows=[],
            old=OldArmView(
                url="http://old",
                verdict="pass" if not holding_at_risk else "fail",
                at_risk=holding_at_risk,
                reason="old ready" if not holding_at_risk else "old refused",
            ),
            reason="" if not holding_at_risk else "old refused",
        )
    )
    return RollbackEvidence(
        rollout_status="holding" if holding else "in_progress", stage="s", drill=d, prerequisites=pre, holding=holding
    )


GOOD_DRILL = {"ok": True, "recovery_s": 42.0, "max_recovery_s": 300.0, "within_budget": True}
ALL_OK = {"config": "ok", "weights": "ok", "route": "ok", "monitoring": "ok", "old_ready": "ok"}


@pytest.mark.parametrize(
    ("drill", "prereqs", "holding", "expected"),
    [
        (GOOD_DRILL, ALL_OK, None, "go"),
        (GOOD_DRILL, ALL_OK, False, "go"),
        (None, ALL_OK, None, "warn"),  # before 100 %: time the way back before you need it
        (None, ALL_OK, False, "no-go"),  # at 100 % without a drill: no way back known
        ({**GOOD_DRILL, "ok": False, "reason": "old never answered"}, ALL_OK, None, "no-go"),
        ({**GOOD_DRILL, "recovery_s": 400.0, "within_budget": False}, ALL_OK, None, "no-go"),
        (GOOD_DRILL, {**ALL_OK, "route": "failed"}, None, "warn"),
        (GOOD_DRILL, {**ALL_OK, "route": "failed"}, False, "no-go"),
        (GOOD_DRILL, {**ALL_OK, "monitoring": "unverified"}, False, "warn"),
        (GOOD_DRILL, ALL_OK, True, "warn"),  # old cannot serve right now: the window is at risk
    ],
)
def test_rollback_needs_a_timed_drill_and_its_prerequisites_strictly_from_100_percent(
    drill,
    prereqs,
    holding,  # type: ignore[no-untyped-def]
    expected,
) -> None:
    ev = b.evidence()
    ev.rollback = _rollback(drill, prereqs, holding)
    j = RULES["rollout.rollback"](ev, Limits.of(ev))
    assert j.verdict == expected, j.reason()
    assert any(f.name.startswith("prerequisite: route") for f in j.figures)


def test_rollback_not_run_is_not_a_pass() -> None:
    ev = b.evidence()
    assert RULES["rollout.rollback"](ev, Limits.of(ev)).verdict == "not-run"


@pytest.mark.parametrize(
    ("same", "ratio", "expected"), [(True, None, "go"), (False, 1.02, "warn"), (False, 1.3, "no-go")]
)
def test_tokenizer_judges_the_diff_model_corpus_ratio(same, ratio, expected) -> None:  # type: ignore[no-untyped-def]
    assert verdict("model.tokenizer", diff_model=b.diff_model(tokenizer_same=same, total_ratio=ratio))[0] == expected


def test_typed_evidence_reads_back_from_the_run_directory_with_the_same_verdicts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The part files are the results' JSON; read back, every result is its model again and the items agree."""
    from switchover.check.evidence import PlanEvidence, load_evidence
    from switchover.plan.grace import Finding
    from switchover.plan.translate import LostItem

    plan = PlanEvidence(api_differences=[LostItem(intent="stop", kind="different_default", detail="d")])
    ev = b.full_evidence(diff_model=b.diff_model(weights=("a", "b"), changed_renders=("system+user",)), plan=plan)
    assert ev.grace is not None and ev.grace.need is not None
    ev.grace.findings = [
        Finding(
            file="deploy.yaml",
            line=3,
            setting="terminationGracePeriodSeconds",
            value_s=30.0,
            required_s=ev.grace.need.required_s,
            ok=False,
            message="too short",
        )
    ]
    ev.rollback = _rollback(GOOD_DRILL, ALL_OK)
    back = load_evidence(b.write_run(tmp_path, ev))
    assert type(back.diff_model) is type(ev.diff_model) and back.diff_model == ev.diff_model
    assert back.grace == ev.grace and back.plan == ev.plan and back.rollback == ev.rollback
    assert back.probe == ev.probe and back.verify == ev.verify and back.bench == ev.bench
    before, after = judge_all(ev), judge_all(back)
    assert [(i.id, i.verdict, i.reason) for i in after] == [(i.id, i.verdict, i.reason) for i in before]
    assert {i.id: i.verdict for i in after}["rollout.grace"] == "no-go"  # the deploy file's finding counts


def test_a_run_written_before_typed_evidence_still_reads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Older check runs wrote config.slos without the unset objectives and grace.need as a plain mapping: the same
    JSON the models read."""
    import json

    from switchover.check.evidence import load_evidence

    rd = b.write_run(tmp_path, b.evidence(grace=b.grace(configured=[120.0])))
    cfg = json.loads(rd.file("config.json").read_text())
    cfg["slos"] = {"max_error_rate": 0.1}
    rd.file("config.json").write_text(json.dumps(cfg))
    ev = load_evidence(rd)
    assert Limits.of(ev).max_error_rate == 0.1
    assert ev.grace is not None and ev.grace.need is not None and ev.grace.need.required_s == 77.0


def test_a_bench_summary_that_is_a_device_is_a_failed_part_not_an_unbounded_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """summary.json is read with the run directory's JSON bound: /dev/zero behind it is refused, not read forever."""
    from switchover.check.evidence import load_evidence

    rd = b.write_run(tmp_path, b.evidence())
    (rd.path / "bench-1").mkdir()
    (rd.path / "bench-1" / "summary.json").symlink_to("/dev/zero")
    ev = load_evidence(rd)
    assert ev.bench is None and ev.parts["bench"].status == "failed"
    assert "larger than" in (ev.parts["bench"].reason or "")
