"""Stage defaults that follow the checklists: the day-spaced schedule (config default and `rollout init`), a
min_duration_s that --force cannot pass, the week-long business window."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from switchover.config import load_migration
from switchover.config.rollout import RolloutSettings
from switchover.config.rollout_holding import FailureType, HoldingSettings
from switchover.errors import BadInput
from switchover.rollout.controller import Rollout
from switchover.rollout.schedule import SECTION, has_rollout, with_schedule
from tests.rollout.builders import Clock, cli, write_ledger

DAY = 86400.0
BASE = """\
old: {url: "http://127.0.0.1:18001", engine: vllm}
new: {url: "http://127.0.0.1:18002", engine: llamacpp}
gateway:
  weight: 0
  rollback: false
  run_dir: gw
"""


def test_the_default_schedule_is_day_spaced_shadow_a_day_then_5_20_50_100_by_day_seven() -> None:
    s = RolloutSettings()
    assert [(st.name, st.min_duration_s) for st in s.stages] == [
        ("shadow", DAY),
        ("5%", DAY),
        ("20%", 2 * DAY),
        ("50%", 4 * DAY),
        ("100%", 0.0),
    ]
    assert sum(st.min_duration_s for st in s.stages[1:]) == 7 * DAY  # 100 % is reached on day seven


def test_the_business_holding_window_defaults_to_a_week_and_quality_keeps_old_warm_48_h() -> None:
    w = HoldingSettings().windows
    assert w[FailureType.BUSINESS].duration_s == 7 * DAY and w[FailureType.QUALITY].duration_s == 2 * DAY


def test_rollout_init_writes_a_schedule_that_loads_with_spot_checks_and_task_type_gates(tmp_path: Path) -> None:
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(BASE)
    cfg.write_text(with_schedule(BASE))
    r = load_migration(cfg).rollout
    assert r is not None and r.on_fail == "previous"
    assert [(st.weight, st.min_duration_s) for st in r.stages] == [
        (0, DAY),
        (5, DAY),
        (20, 2 * DAY),
        (50, 4 * DAY),
        (100, 0.0),
    ]
    assert r.stages[2].custom == ["spot_check_rating", "task_type_errors"]
    assert r.custom_gate("task_type_errors").by == "task_type"
    assert r.holding.windows[FailureType.QUALITY].gates == ["spot_check_rating"]
    assert r.holding.windows[FailureType.BUSINESS].duration_s == 7 * DAY
    with pytest.raises(BadInput, match="already has a rollout: section"):
        with_schedule(cfg.read_text())
    assert has_rollout("x: 1\nrollout:\n  stages: [5]\n") and not has_rollout("x: {rollout: 1}\n")


def test_rollout_init_by_cli_appends_once_and_prints_without_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(BASE)
    code, out, _ = cli(capsys, "init", "-c", str(cfg))
    assert code == 0 and "pairs_per_day" in out and cfg.read_text().endswith(SECTION)
    code, _, err = cli(capsys, "init", "-c", str(cfg))
    assert code == 2 and "already has a rollout: section" in err
    code, out, _ = cli(capsys, "init", "--print")
    assert code == 0 and out == SECTION


def test_a_min_duration_is_not_passed_by_force_but_by_a_waiver(tmp_path: Path) -> None:
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(BASE + "rollout:\n  stages: [{weight: 5, min_duration_s: 3600}, 20]\n  entry: {enabled: false}\n")
    write_ledger(tmp_path / "gw", [])
    clock = Clock(time.time())
    r = Rollout(load_migration(cfg), cfg, clock=clock)
    assert r.advance(why="start").state.stage == "5%"
    clock.t += 60
    res = r.advance(why="in a hurry", force=True)
    assert res.action == "refused" and "rollout.min_duration" in res.message and "3540 s left" in res.message
    res = r.advance(why="the peak was yesterday's", force=True, waivers={"rollout.min_duration": "peak seen"})
    assert res.action == "advance" and res.transition is not None
    assert res.transition.waived == {"rollout.min_duration": "peak seen"}


def test_status_warns_of_a_shadow_or_large_stage_shorter_than_the_peak(tmp_path: Path) -> None:
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(BASE + "rollout:\n  stages: [shadow, 5, 50, 100]\n")
    warnings = Rollout(load_migration(cfg), cfg).view().warnings
    assert [w.split(" has ")[0] for w in warnings if "rollout.peak_s" in w] == ["stage shadow", "stage 50%"]
