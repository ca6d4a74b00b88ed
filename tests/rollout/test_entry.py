"""Entry gates: a stage is entered only with its evidence (a passing check, the pre-canary items, the cost), a
missing piece is refused with the command that produces it, and an override is a waiver with a reason, audited."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from unittest.mock import patch

import orjson
import pytest

from switchover.cli.app import main
from switchover.config import load_migration
from switchover.config.gateway import ReviewConfig
from switchover.config.rollout import RolloutSettings
from switchover.config.rollout_entry import EntrySettings
from switchover.errors import BadInput
from switchover.evidence.check import CheckItem, CheckReport, EndpointSummary, PartRun
from switchover.rollout import entry as en
from switchover.rollout.controller import Rollout
from tests.rollout.builders import Clock, cli, write_ledger

OLD = EndpointSummary(role="old", url="http://127.0.0.1:18001", engine="vllm")
NEW = EndpointSummary(role="new", url="http://127.0.0.1:18002", engine="llamacpp")

CONFIG = """\
old: {url: "http://127.0.0.1:18001", engine: vllm}
new: {url: "http://127.0.0.1:18002", engine: llamacpp}
gateway:
  weight: 0
  rollback: false
  run_dir: gw
  shadow: {percent: 20}
rollout:
  stages: [shadow, 5, 50, 100]
  window_s: 3600
  gates: {min_samples: 30}
"""


def _check(
    folder: Path,
    overall: str = "go",
    *,
    created: float | None = None,
    endpoints: list[EndpointSummary] | None = None,
    grace: str = "go",
    name: str = "20260101T000000Z-check",
) -> Path:
    """A check run directory as `switchover check` leaves it (check.json)."""
    rd = folder / "runs" / name
    rd.mkdir(parents=True)
    items = [
        CheckItem(
            id="rollout.grace",
            area="drain",
            title="grace",
            verdict=grace,
            rule="r",  # type: ignore[arg-type]
            reason=f"grace {grace}: 300 s needed, 600 s configured",
        )
    ]
    report = CheckReport(
        name="check",
        created_wall=time.time() if created is None else created,
        overall=overall,  # type: ignore[arg-type]
        overall_reason=f"overall {overall}",
        items=items,
        endpoints=endpoints or [OLD, NEW],
        parts=[PartRun(part="bench", status="ran", files=["bench/summary.json"])],
    )
    (rd / "check.json").write_bytes(orjson.dumps(report.model_dump(mode="json")))
    return rd


def _rollout(tmp_path: Path, extra: str = "") -> Rollout:
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(CONFIG + extra)
    write_ledger(tmp_path / "gw", [])
    return Rollout(load_migration(cfg), cfg, clock=Clock(time.time()))


# --- pure judging -------------------------------------------------------------------------------------------


def _found(overall: str = "go", age_s: float = 0.0, grace: str | None = "go") -> en.CheckEvidence:
    return en.CheckEvidence(
        run_dir="/r/20260101T000000Z-check",
        overall=overall,
        overall_reason="why",
        created_wall=1000.0 - age_s,
        grace=grace,
        grace_reason="grace text",
    )


@pytest.mark.parametrize(
    ("found", "status", "text"),
    [
        (None, "missing", "no `switchover check` run"),
        (_found("no-go"), "fail", "is no-go"),
        (_found("incomplete"), "fail", "is incomplete"),
        (_found("go", age_s=8 * 86400), "missing", "8.0 days ago"),
        (_found("go"), "pass", "is go"),
    ],
)
def test_the_check_item_passes_only_on_a_recent_go(found: en.CheckEvidence | None, status: str, text: str) -> None:
    item = en.judge_check(found, now=1000.0, max_age_s=7 * 86400, config="sw.yaml")
    assert item.status == status and text in item.reason
    assert item.status == "pass" or item.command == "switchover check -c sw.yaml"


@pytest.mark.parametrize(
    ("grace", "status"),
    [("go", "pass"), ("no-go", "fail"), ("warn", "missing"), ("not-run", "missing"), (None, "missing")],
)
def test_the_grace_item_follows_the_checks_rollout_grace_verdict(grace: str | None, status: str) -> None:
    assert en.judge_grace(_found(grace=grace), "sw.yaml").status == status


PLAN_OK = {
    "copies": [
        {"role": "old", "concurrency": 4, "instance": {"starts": True}},
        {"role": "new", "concurrency": 3, "instance": {"starts": True}},
    ]
}
PLAN_STUCK = {
    "copies": [
        {"role": "old", "concurrency": 4, "instance": {"starts": True}},
        {"role": "new", "concurrency": 0, "instance": {"starts": False, "problem": "no KV room"}},
    ]
}


@pytest.mark.parametrize(
    ("shared", "plan", "problem", "status", "text"),
    [
        (None, None, None, "missing", "not stated"),
        (False, None, None, "pass", "separate GPUs"),
        (True, None, None, "missing", "canary_plan is not set"),
        (True, None, "rollout.entry.canary_plan: x: no such file", "missing", "no such file"),
        (True, PLAN_STUCK, None, "fail", "new: no KV room"),
        (True, {"copies": []}, None, "missing", "no two copies"),
        (True, PLAN_OK, None, "pass", "old 4 requests, new 3 requests"),
    ],
)
def test_the_memory_item_needs_a_fitting_canary_plan_when_gpus_are_shared(
    shared: bool | None, plan: dict[str, object] | None, problem: str | None, status: str, text: str
) -> None:
    item = en.judge_memory(EntrySettings(shared_gpu=shared), plan, problem)
    assert item.status == status and text in item.reason
    assert item.status == "pass" or "plan canary" in (item.command or "")


@pytest.mark.parametrize(
    ("key", "status"), [(None, "missing"), ("versioned", "pass"), ("no_cache", "pass"), ("unversioned", "fail")]
)
def test_the_cache_key_item_needs_a_stated_versioned_key(key: str | None, status: str) -> None:
    item = en.judge_cache_key(EntrySettings(cache_key=key))  # type: ignore[arg-type]
    assert item.status == status and (status == "pass" or "switchover cachekey" in (item.command or ""))


def test_the_rollback_window_item_needs_holding_after_a_100_percent_last_stage() -> None:
    on = RolloutSettings(stages=["shadow", 5, 100])
    assert en.judge_rollback_window(on, on.stages).status == "pass"
    off = RolloutSettings(stages=["shadow", 5, 100], holding={"enabled": False})
    assert "enabled is false" in en.judge_rollback_window(off, off.stages).reason
    short = RolloutSettings(stages=["shadow", 5, 20])
    assert en.judge_rollback_window(short, short.stages).status == "missing"


def test_a_strong_sla_without_the_review_sampler_is_refused_with_the_reason() -> None:
    strong = EntrySettings(sla="strong")
    item = en.judge_review(strong, ReviewConfig())
    assert item.status == "fail" and "no human spot-check ability is refused" in item.reason
    assert en.judge_review(strong, None).status == "fail"
    assert en.judge_review(strong, ReviewConfig(pairs_per_day=200)).status == "pass"
    assert en.judge_review(EntrySettings(), None).status == "pass"  # standard SLA: not required


def test_check_goes_to_the_first_live_stage_precanary_to_the_first_weighted_and_cost_to_the_large() -> None:
    stages = RolloutSettings(stages=["shadow", 5, 20, 50, 100]).stages
    assert [en.needs(stages, i, 50) for i in range(5)] == [[en.CHECK], list(en.PRECANARY), [], [en.COST], []]
    no_shadow = RolloutSettings(stages=[5, 100]).stages
    assert en.needs(no_shadow, 0, 50) == [en.CHECK, *en.PRECANARY] and en.needs(no_shadow, 1, 50) == [en.COST]


def test_waivers_turn_only_blocking_items_waived_and_need_a_known_item_and_a_reason() -> None:
    items = [en.judge_cache_key(EntrySettings()), en.judge_cache_key(EntrySettings(cache_key="no_cache"))]
    out = en.apply_waivers(items, {en.CACHE_KEY: "no cache yet"})
    assert [i.status for i in out] == ["waived", "pass"] and out[0].waived == "no cache yet"
    with pytest.raises(BadInput, match=r"unknown item 'precanary\.vibes'"):
        en.check_waivers({"precanary.vibes": "x"})
    with pytest.raises(BadInput, match="needs --reason"):
        en.check_waivers({en.CHECK: " "})


def test_shadow_and_large_stages_shorter_than_the_peak_are_warned_about() -> None:
    s = RolloutSettings(stages=["shadow", 5, {"weight": 50, "min_duration_s": 86400}, 100])
    warnings = en.short_stages(s.stages, 86400, 50)
    assert len(warnings) == 1 and "stage shadow" in warnings[0]
    assert en.short_stages(RolloutSettings().stages, 86400, 50) == []  # the default schedule covers a day


# --- finding the check run ------------------------------------------------------------------------------------


def test_the_newest_check_of_this_migrations_endpoints_is_the_evidence(tmp_path: Path) -> None:
    m = load_migration(_write(tmp_path))
    assert en.find_check(tmp_path / "runs", m) is None
    _check(tmp_path, "go", created=100.0, name="20260101T000000Z-check")
    _check(tmp_path, "no-go", created=200.0, name="20260102T000000Z-check")
    other = EndpointSummary(role="new", url="http://127.0.0.1:9", engine="sglang")
    _check(tmp_path, "go", created=300.0, name="20260103T000000Z-check", endpoints=[OLD, other])
    (tmp_path / "runs" / "20260104T000000Z-check").mkdir()
    (tmp_path / "runs" / "20260104T000000Z-check" / "check.json").write_text("{half written")
    found = en.find_check(tmp_path / "runs", m)
    assert found is not None and found.overall == "no-go" and found.created_wall == 200.0  # another migration's
    assert found.bench_dir == str(tmp_path / "runs" / "20260102T000000Z-check" / "bench")  # go is not evidence


def _write(tmp_path: Path, extra: str = "") -> Path:
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(CONFIG + extra)
    return cfg


# --- the controller and the CLI ---------------------------------------------------------------------------------


def test_a_fresh_rollout_does_not_answer_advance_without_a_check(tmp_path: Path) -> None:
    r = _rollout(tmp_path)
    report = r.gate_report()
    assert report.decision == "hold" and report.entry is not None
    assert [(i.id, i.status) for i in report.entry.items] == [(en.CHECK, "missing")]
    res = r.advance(why="go", force=True)  # --force passes a hold, never missing evidence
    assert res.action == "refused" and "rollout.entry_check" in res.message and "switchover check -c" in res.message
    assert r.state().stage_name == "0%" and r.store.audit() == []


def test_a_no_go_check_is_refused_naming_its_verdict_and_a_go_check_enters_shadow(tmp_path: Path) -> None:
    r = _rollout(tmp_path)
    _check(tmp_path, "no-go", name="20260101T000000Z-check")
    res = r.advance(why="go")
    assert res.action == "refused" and "is no-go: overall no-go" in res.message
    _check(tmp_path, "go", name="20260102T000000Z-check")
    res = r.advance(why="check passed")
    assert res.action == "advance" and res.state.stage == "shadow"


def test_the_canary_needs_every_precanary_item_and_each_refusal_names_its_command(tmp_path: Path) -> None:
    r = _rollout(tmp_path, "  entry: {sla: strong}\n")
    _check(tmp_path, "go")
    assert r.advance(why="check passed").action == "advance"
    r.clock.t += 10  # type: ignore[attr-defined]
    report = r.gate_report()
    assert report.entry is not None and report.entry.stage == "5%"
    got = {i.id: i.status for i in report.entry.items}
    assert got == {
        en.MEMORY: "missing",
        en.GRACE: "pass",
        en.CACHE_KEY: "missing",
        en.ROLLBACK_WINDOW: "pass",
        en.REVIEW: "fail",
    }
    res = r.advance(why="shadow clean", force=True)
    assert res.action == "refused"
    for text in (
        "precanary.memory",
        "plan canary",
        "precanary.cache_key",
        "switchover cachekey",
        "precanary.review_sampler",
        "pairs_per_day",
    ):
        assert text in res.message


def test_a_waived_item_is_entered_and_the_waiver_is_in_the_audit_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path)
    write_ledger(tmp_path / "gw", [])
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli(capsys, "gates")
    assert code == 1 and "rollout.entry_check" in out and "decision: hold" in out
    code, _, err = cli(capsys, "advance", "--waive", "rollout.entry_check")
    assert code == 2 and "--waive needs --reason" in err
    code, _, err = cli(capsys, "advance", "--waive", "rollout.vibes", "-m", "x")
    assert code == 2 and "unknown item 'rollout.vibes'" in err
    code, out, _ = cli(capsys, "advance", "--waive", "rollout.entry_check", "-m", "check rerun after the fix")
    assert code == 0, out
    audit = [orjson.loads(line) for line in (tmp_path / ".switchover/rollout/audit.jsonl").read_bytes().splitlines()]
    assert audit[-1]["to_stage"] == "shadow"
    assert audit[-1]["waived"] == {"rollout.entry_check": "check rerun after the fix"}


def test_entry_disabled_reports_the_evidence_without_enforcing_it(tmp_path: Path) -> None:
    r = _rollout(tmp_path, "  entry: {enabled: false}\n")
    report = r.gate_report()
    assert report.decision == "advance" and report.entry is not None and not report.entry.enforced
    assert report.entry.items[0].status == "missing"
    assert r.advance(why="no check wanted here").action == "advance"


def _plan_canary_json(capsys: pytest.CaptureFixture[str], model: str, out: Path) -> None:
    """What `switchover plan canary ... --json > out` writes (exit 1 when the copies do not fit, JSON all the same)."""
    capsys.readouterr()
    argv = ["switchover", "plan", "canary", "-m", f"builtin:{model}", "-e", "vllm", "--gpu", "H100-80G", "--json"]
    with patch.object(sys, "argv", argv), pytest.raises(SystemExit):
        main()
    out.write_text(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("model", "status", "text"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "pass", "both copies start (old 18 requests, new 18 requests)"),
        ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "fail", "no memory left for KV"),
    ],
)
def test_the_memory_item_reads_what_plan_canary_json_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, status: str, text: str
) -> None:
    _plan_canary_json(capsys, model, tmp_path / "canary.json")
    r = _rollout(tmp_path, "  entry: {shared_gpu: true, canary_plan: canary.json}\n")
    _check(tmp_path, "go")
    assert r.advance(why="check passed").state.stage == "shadow"
    report = r.gate_report()
    assert report.entry is not None
    (memory,) = [i for i in report.entry.items if i.id == en.MEMORY]
    assert memory.status == status and text in memory.reason, memory.reason
