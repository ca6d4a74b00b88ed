"""Gathering the entry gates' evidence for one rollout: the newest check run, the saved canary plan, the bench to
price (the I/O side of rollout/entry.py, which judges)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from switchover.config.check import CheckSection
from switchover.rollout import entry as en
from switchover.rollout.stages import RolloutState

if TYPE_CHECKING:
    from switchover.rollout.controller import Rollout


def _beside(config_path: Path, text: str) -> Path:
    p = Path(text).expanduser()
    return p if p.is_absolute() else config_path.resolve().parent / p


def runs_dir(rollout: Rollout) -> Path:
    """Where `switchover check` puts its run directories for this migration file (check.runs_dir)."""
    return _beside(rollout.config_path, (rollout.migration.check or CheckSection()).runs_dir)


def entry_items(rollout: Rollout, state: RolloutState, needed: list[str]) -> list[en.EntryItem]:
    """Each needed item, judged from what exists now (nothing is run here)."""
    if not needed:
        return []
    settings, entry = rollout.settings, rollout.settings.entry
    config = str(rollout.config_path)
    found = en.find_check(runs_dir(rollout), rollout.migration) if {en.CHECK, en.GRACE, en.COST} & set(needed) else None
    out: list[en.EntryItem] = []
    for item in needed:
        if item == en.CHECK:
            out.append(en.judge_check(found, now=rollout.clock(), max_age_s=entry.check_max_age_s, config=config))
        elif item == en.MEMORY:
            plan, problem = (
                en.read_plan(_beside(rollout.config_path, entry.canary_plan))
                if entry.canary_plan and entry.shared_gpu
                else (None, None)
            )
            out.append(en.judge_memory(entry, plan, problem))
        elif item == en.GRACE:
            out.append(en.judge_grace(found, config))
        elif item == en.CACHE_KEY:
            out.append(en.judge_cache_key(entry))
        elif item == en.ROLLBACK_WINDOW:
            out.append(en.judge_rollback_window(settings, state.stages))
        elif item == en.REVIEW:
            gateway = rollout.migration.gateway
            out.append(en.judge_review(entry, gateway.review if gateway is not None else None))
        elif item == en.COST:
            out.append(_cost(rollout, found))
    return out


def _cost(rollout: Rollout, found: en.CheckEvidence | None) -> en.EntryItem:
    from switchover.rollout.cost import judge_cost, read_bench

    cost = rollout.settings.cost
    if cost.gpu_hour_price is None:
        return judge_cost(cost, None, None)
    bench = (
        _beside(rollout.config_path, cost.bench)
        if cost.bench
        else Path(found.bench_dir)
        if found is not None and found.bench_dir
        else None
    )
    if bench is None:
        return judge_cost(cost, None, "no bench run: rollout.cost.bench is not set and the newest check ran no bench")
    report, problem = read_bench(bench)
    return judge_cost(cost, report, problem)
