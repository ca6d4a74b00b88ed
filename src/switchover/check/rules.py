"""Evidence -> one CheckItem per checklist item (pure), and the overall verdict."""

from __future__ import annotations

from collections.abc import Callable

from switchover.check import rules_engine_switch as eng
from switchover.check import rules_live_switch as live
from switchover.check import rules_model as mod
from switchover.check import rules_rollback
from switchover.check.evidence import Evidence
from switchover.check.judging import ChecklistEntry, Judgement, Limits, item, load_checklist
from switchover.evidence.check import CheckItem

Rule = Callable[[Evidence, Limits], Judgement]

RULES: dict[str, Rule] = {
    "engine.scheduling": eng.scheduling,
    "engine.kv_cache": eng.kv_cache,
    "engine.batching": eng.batching,
    "engine.kernels": eng.kernels,
    "engine.defaults": eng.defaults,
    "engine.observability": eng.observability,
    "model.weights": mod.weights,
    "model.tokenizer": mod.tokenizer,
    "model.chat_template": mod.chat_template,
    "model.sampling_defaults": mod.sampling_defaults,
    "rollout.grace": mod.grace,
    "rollout.client_timeout": mod.client_timeout,
    "rollout.rollback": rules_rollback.rollback,
    "rollout.warmup_tail": live.warmup_tail,
    "engine.binding_cap": live.binding_cap,
    "engine.oom_rate": live.oom_rate,
    "rollout.client_defaults": live.client_defaults,
}


def judge_all(ev: Evidence, checklist: list[ChecklistEntry] | None = None) -> list[CheckItem]:
    """Apply every item's rule; a rule that crashes on odd evidence yields not-run with the error, never a pass."""
    entries = checklist if checklist is not None else load_checklist()
    lim = Limits.of(ev)
    out = []
    for entry in entries:
        rule = RULES.get(entry.id)
        if rule is None:
            j = Judgement(missing=[f"no rule implements {entry.id}"])
        else:
            try:
                j = rule(ev, lim)
            except Exception as exc:  # evidence from an older/newer helper version: say so, do not pass
                j = Judgement(missing=[f"rule error: {type(exc).__name__}: {exc}"])
        out.append(item(entry, j, ev.config.settings.waive))
    return out
