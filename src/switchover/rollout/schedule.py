"""The checklist schedule `switchover rollout init` writes: day-spaced stages, spot checks, per-task-type gates.

5 % → 20 % after a day (with stratified spot checks: the review sampler's ratings, per task type) → 50 % at day
three → 100 % at day seven; old kept warm 48 h (the quality window), business metrics watched a week; any task
type worse → back one stage (on_fail: previous). docs/rollout.md, stage defaults.
"""

from __future__ import annotations

import re
from pathlib import Path

from switchover.atomicfile import write_atomic
from switchover.errors import BadInput, SwitchoverError
from switchover.textfile import read_text

SECTION = """\
rollout:
  # written by `switchover rollout init`: the checklist schedule (docs/rollout.md, stage defaults)
  peak_s: 86400                 # the peak a shadow or large stage must cover: one day holds the daily peak
  stages:
    - {name: shadow, weight: 0, shadow: true, min_duration_s: 86400}       # mirrored traffic over a daily peak
    - {weight: 5, min_duration_s: 86400}                                   # 5 % for a day
    - {weight: 20, min_duration_s: 172800, custom: [spot_check_rating, task_type_errors]}   # to day three
    - {weight: 50, min_duration_s: 345600, custom: [spot_check_rating, task_type_errors]}   # to day seven
    - 100                                                                  # then the holding window
  on_fail: previous             # a hard gate failing (any task type worse) goes back one stage
  custom_gates:
    # stratified spot checks: `switchover review` ratings, one verdict per task type (needs
    # gateway.review.pairs_per_day > 0; without ratings the stage holds, never passes)
    - {name: spot_check_rating, builtin: spot_check_rating, max: 0.10, min_samples: 50}
    - name: task_type_errors    # new's errors or cut answers, one verdict per task type
      ledger: {fail_when: "outcome == 'error' or finish_reason == 'length'"}
      max: 0.02
      by: task_type
  holding:
    windows:
      quality: {duration_s: 172800, gates: [spot_check_rating]}   # old kept warm 48 h after 100 %
      business: {duration_s: 604800}                             # a week for downstream metrics
"""

_ROLLOUT_KEY = re.compile(r"^rollout\s*:", re.MULTILINE)


def has_rollout(text: str) -> bool:
    """Does the migration file already have a top-level `rollout:` section?"""
    return _ROLLOUT_KEY.search(text) is not None


def with_schedule(text: str) -> str:
    """The migration file's text with the checklist schedule appended (it must have no rollout: section)."""
    if has_rollout(text):
        raise BadInput(
            "switchover.yaml already has a rollout: section; `switchover rollout init --print` shows the "
            "checklist schedule to merge by hand"
        )
    return text + ("" if not text or text.endswith("\n") else "\n") + "\n" + SECTION


def write_schedule(config: Path) -> str:
    """Append the schedule to `config`, validated by loading the result; the file is left as it was on failure."""
    from switchover.config import load_migration

    load_migration(config)  # a file that is not a valid migration is refused as it is (BadInput naming the field)
    before = read_text(config, what="migration file")
    after = with_schedule(before)
    write_atomic(config, after)
    try:
        load_migration(config)
    except SwitchoverError:
        write_atomic(config, before)
        raise
    return after
