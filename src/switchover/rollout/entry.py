"""Entry gates: the evidence a stage needs before it is entered, judged from a check run, config and saved plans.

Entering the first stage that sends traffic to new needs a passing `switchover check`; the first weighted stage (the
canary) also needs the pre-canary evidence; the large stage needs its cost per request; every stage must have
stayed its min_duration_s. A missing piece is refused with the command that produces it, unless waived with a
reason (`rollout advance --waive ITEM --reason TEXT`, written to the audit log). Pure functions first; the small
I/O edge (finding the check run, reading a saved plan) is at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from switchover.config import Migration
from switchover.config.gateway import ReviewConfig
from switchover.config.rollout import RolloutSettings, StageSpec
from switchover.config.rollout_entry import EntrySettings
from switchover.errors import BadInput
from switchover.evidence.check import CheckReport
from switchover.textfile import load_json

EntryStatus = Literal["pass", "missing", "fail", "waived"]

CHECK = "rollout.entry_check"
MEMORY = "precanary.memory"
GRACE = "precanary.grace"
CACHE_KEY = "precanary.cache_key"
ROLLBACK_WINDOW = "precanary.rollback_window"
REVIEW = "precanary.review_sampler"
COST = "rollout.cost_per_request"
MIN_DURATION = "rollout.min_duration"
PRECANARY = (MEMORY, GRACE, CACHE_KEY, ROLLBACK_WINDOW, REVIEW)
ITEMS = (CHECK, *PRECANARY, COST, MIN_DURATION)
"""Every item `--waive` accepts (docs/checklist.md rows rollout.entry_check, rollout.precanary,
rollout.cost_per_request, rollout.min_duration)."""

CHECK_SCAN_LIMIT = 200  # check run directories looked at, newest first (a runs folder grows without bound)
CHECK_MAX_BYTES = 16 << 20


class EntryItem(BaseModel):
    """One piece of evidence for entering a stage: there and good, missing, failing, or waived with a reason."""

    id: str = Field(description="Stable id (docs/checklist.md); the name `--waive` takes")
    title: str
    status: EntryStatus
    reason: str = Field(description="What was found, or what is missing")
    command: str | None = Field(default=None, description="The command (or config line) that produces the evidence")
    waived: str | None = Field(default=None, description="The --reason given with --waive for this item")

    @property
    def blocks(self) -> bool:
        return self.status in ("missing", "fail")


class EntryReport(BaseModel):
    """Everything entering `stage` needs, judged; `enforced` false: reported only (rollout.entry.enabled false)."""

    stage: str
    items: list[EntryItem]
    enforced: bool = True

    @property
    def blocking(self) -> list[EntryItem]:
        """Items that stop the advance: every missing or failing one when enforced; the dwell time always."""
        return [i for i in self.items if i.blocks and (self.enforced or i.id == MIN_DURATION)]

    def refusal(self) -> str:
        """One line per blocking item: what is missing and what produces it."""
        return "; ".join(f"{i.id}: {i.reason}" + (f" (run: {i.command})" if i.command else "") for i in self.blocking)


class CheckEvidence(BaseModel):
    """The newest `switchover check` run of this migration (its endpoints match switchover.yaml's old and new)."""

    run_dir: str
    overall: str
    overall_reason: str
    created_wall: float
    grace: str | None = Field(default=None, description="The rollout.grace item's verdict; None: not in the report")
    grace_reason: str = ""
    bench_dir: str | None = Field(default=None, description="The check's bench run directory, when it ran one")


# --- which stage needs what ------------------------------------------------------------------------------


def first_index(stages: Sequence[StageSpec], *, weighted: bool) -> int | None:
    """The first stage that sends traffic to new (shadow or weight), or the first with weight when `weighted`."""
    for i, s in enumerate(stages):
        if s.weight > 0 or (s.shadow and not weighted):
            return i
    return None


def large_index(stages: Sequence[StageSpec], large_weight: int) -> int | None:
    """The first stage with at least `large_weight` %."""
    return next((i for i, s in enumerate(stages) if s.weight >= large_weight), None)


def needs(stages: Sequence[StageSpec], index: int, large_weight: int) -> list[str]:
    """The entry items for entering stage `index` (check at the first live stage, pre-canary at the first weighted,
    cost at the large stage; a later re-entry after a rollback needs them again)."""
    out = []
    if index == first_index(stages, weighted=False):
        out.append(CHECK)
    if index == first_index(stages, weighted=True):
        out.extend(PRECANARY)
    if index == large_index(stages, large_weight):
        out.append(COST)
    return out


def short_stages(stages: Sequence[StageSpec], peak_s: float, large_weight: int) -> list[str]:
    """Shadow and large stages (not the last) whose min_duration_s cannot cover the stated peak (a warning)."""
    out = []
    for s in stages[:-1]:
        if (s.shadow or s.weight >= large_weight) and s.min_duration_s < peak_s:
            out.append(
                f"stage {s.name} has min_duration_s {s.min_duration_s:g} s, shorter than the peak it must "
                f"cover (rollout.peak_s {peak_s:g} s): it may advance before the peak was seen"
            )
    return out


# --- judging each item -----------------------------------------------------------------------------------


def judge_check(found: CheckEvidence | None, *, now: float, max_age_s: float, config: str) -> EntryItem:
    """A `check` run of this migration whose overall verdict is go (no breaking probe difference, every required
    item run or waived with a reason), not older than max_age_s."""
    cmd = f"switchover check -c {config}"
    base = dict(id=CHECK, title="a passing `switchover check` of this migration", command=cmd)
    if found is None:
        return EntryItem(
            **base,
            status="missing",
            reason="no `switchover check` run of this migration's old and new endpoints was found",
        )
    age = now - found.created_wall
    where = f"check {Path(found.run_dir).name}"
    if found.overall != "go":
        return EntryItem(**base, status="fail", reason=f"{where} is {found.overall}: {found.overall_reason}")
    if age > max_age_s:
        return EntryItem(
            **base,
            status="missing",
            reason=f"{where} passed, but {age / 86400:.1f} days ago "
            f"(rollout.entry.check_max_age_s {max_age_s / 86400:g} days)",
        )
    return EntryItem(id=CHECK, title=base["title"], status="pass", reason=f"{where} is go: {found.overall_reason}")


def judge_memory(entry: EntrySettings, plan: dict[str, object] | None, problem: str | None) -> EntryItem:
    """Old and new fit on the shared GPUs (`plan canary`), or they do not share GPUs (stated)."""
    base = dict(id=MEMORY, title="memory for old and new on the shared GPUs")
    cmd = (
        "switchover plan canary -m OLD_MODEL --new-model NEW_MODEL -e ENGINE --gpu GPU --json > canary.json; "
        "then rollout.entry.shared_gpu: true and rollout.entry.canary_plan: canary.json "
        "(or shared_gpu: false when they run on separate GPUs)"
    )
    if entry.shared_gpu is False:
        return EntryItem(
            **base, status="pass", reason="old and new run on separate GPUs (rollout.entry.shared_gpu: false)"
        )
    if entry.shared_gpu is None:
        return EntryItem(**base, status="missing", reason="rollout.entry.shared_gpu is not stated", command=cmd)
    if problem is not None or plan is None:
        return EntryItem(
            **base, status="missing", reason=problem or "rollout.entry.canary_plan is not set", command=cmd
        )
    copies = plan.get("copies")
    stuck = (
        [
            f"{c.get('role')}: {(c.get('instance') or {}).get('problem')}"
            for c in copies
            if isinstance(c, dict) and not (c.get("instance") or {}).get("starts")
        ]
        if isinstance(copies, list)
        else []
    )
    if not isinstance(copies, list) or len(copies) < 2:
        return EntryItem(**base, status="missing", reason="the canary plan holds no two copies", command=cmd)
    if stuck:
        return EntryItem(**base, status="fail", reason="the two copies do not fit: " + "; ".join(stuck), command=cmd)
    conc = ", ".join(f"{c.get('role')} {c.get('concurrency')} requests" for c in copies if isinstance(c, dict))
    return EntryItem(**base, status="pass", reason=f"both copies start ({conc})")


def judge_grace(found: CheckEvidence | None, config: str) -> EntryItem:
    """The check's rollout.grace item: every configured drain grace covers the longest generation."""
    base = dict(id=GRACE, title="drain grace ≥ the longest generation")
    cmd = (
        f"switchover check -c {config} (its bench and grace parts), or switchover plan grace --bench RUN "
        "--max-tokens N --scan DEPLOY_DIR"
    )
    if found is None or found.grace is None:
        return EntryItem(**base, status="missing", reason="no check run judged rollout.grace", command=cmd)
    if found.grace == "go":
        return EntryItem(**base, status="pass", reason=found.grace_reason)
    if found.grace == "no-go":
        return EntryItem(**base, status="fail", reason=found.grace_reason, command=cmd)
    what = "not run" if found.grace == "not-run" else f"only {found.grace} (no grace configured to compare)"
    return EntryItem(**base, status="missing", reason=f"rollout.grace was {what}: {found.grace_reason}", command=cmd)


def judge_cache_key(entry: EntrySettings) -> EntryItem:
    """Caches in front of the engine are keyed by model version (or there are none), as stated."""
    base = dict(id=CACHE_KEY, title="a versioned cache key")
    cmd = (
        "switchover cachekey NEW_MODEL --model-id ID (the key's parts); then rollout.entry.cache_key: versioned "
        "(or no_cache)"
    )
    if entry.cache_key == "versioned":
        return EntryItem(
            **base,
            status="pass",
            reason="stated: cache keys carry the model id and the weights, tokenizer and template hashes",
        )
    if entry.cache_key == "no_cache":
        return EntryItem(**base, status="pass", reason="stated: no cache in front of the engine")
    if entry.cache_key == "unversioned":
        return EntryItem(
            **base,
            status="fail",
            reason="stated unversioned: after the switch the cache serves old's "
            "answers and prefix state to new's requests",
            command=cmd,
        )
    return EntryItem(**base, status="missing", reason="rollout.entry.cache_key is not stated", command=cmd)


def judge_rollback_window(settings: RolloutSettings, stages: Sequence[StageSpec]) -> EntryItem:
    """A rollback window is configured: holding after a 100 % last stage, with at least one open window."""
    base = dict(id=ROLLBACK_WINDOW, title="a rollback window configured")
    cmd = "rollout.holding.enabled: true with a 100 % last stage (docs/rollout.md, holding)"
    last = stages[-1] if stages else None
    if not settings.holding.enabled:
        return EntryItem(**base, status="missing", reason="rollout.holding.enabled is false", command=cmd)
    if last is None or last.weight != 100:
        return EntryItem(
            **base, status="missing", reason="the last stage is not 100 %: no holding window opens", command=cmd
        )
    longest = max(w.duration_s for w in settings.holding.windows.values())
    return EntryItem(
        **base,
        status="pass",
        reason=f"old is kept and watched for {longest / 3600:g} h after 100 % "
        f"({', '.join(t.value for t in settings.holding.windows)})",
    )


def judge_review(entry: EntrySettings, review: ReviewConfig | None) -> EntryItem:
    """A strong-SLA service needs the human spot-check sampler before a hot switch."""
    base = dict(id=REVIEW, title="the review sampler for a strong SLA")
    if entry.sla != "strong":
        return EntryItem(**base, status="pass", reason="rollout.entry.sla is standard: spot checks not required")
    if review is not None and review.pairs_per_day > 0:
        return EntryItem(**base, status="pass", reason=f"gateway.review samples {review.pairs_per_day} pairs a day")
    return EntryItem(
        **base,
        status="fail",
        reason="sla strong: a hot switch with no human spot-check ability is "
        "refused (gateway.review.pairs_per_day is 0 or there is no gateway)",
        command="gateway.review.pairs_per_day: 200, then `switchover review` to rate pairs",
    )


def min_duration_item(stage: StageSpec | None, entered_at: float | None, now: float) -> EntryItem | None:
    """The current stage has not stayed its min_duration_s yet (None when it has, or sets none)."""
    if stage is None or not stage.min_duration_s or entered_at is None or now - entered_at >= stage.min_duration_s:
        return None
    left = stage.min_duration_s - (now - entered_at)
    return EntryItem(
        id=MIN_DURATION,
        title=f"stage {stage.name} stays {stage.min_duration_s:g} s",
        status="missing",
        reason=f"stage {stage.name} needs {stage.min_duration_s:g} s before advancing "
        f"({now - entered_at:.0f} s so far, {left:.0f} s left)",
        command="wait",
    )


def apply_waivers(items: list[EntryItem], waivers: dict[str, str]) -> list[EntryItem]:
    """Blocking items named in `waivers` become waived, carrying the reason."""
    return [
        i.model_copy(update=dict(status="waived", waived=waivers[i.id])) if i.blocks and i.id in waivers else i
        for i in items
    ]


def check_waivers(waivers: dict[str, str]) -> None:
    """BadInput naming an unknown item or an empty reason."""
    unknown = sorted(set(waivers) - set(ITEMS))
    if unknown:
        raise BadInput(f"--waive: unknown item {unknown[0]!r}; choose from {', '.join(ITEMS)}")
    empty = [k for k, v in waivers.items() if not v.strip()]
    if empty:
        raise BadInput(f"--waive {empty[0]}: a waiver needs --reason saying why")


# --- the I/O edge -----------------------------------------------------------------------------------------


def _matches(report: CheckReport, migration: Migration) -> bool:
    ends = {e.role: (e.url.rstrip("/"), e.engine, e.model) for e in report.endpoints}
    sides = (("old", migration.old), ("new", migration.new))
    want = {r: (e.url.rstrip("/"), e.engine.value, e.model) for r, e in sides}
    return ends == want


def read_check(path: Path) -> CheckReport | None:
    """check.json of a run directory; None when unreadable (a half-written or foreign file is no evidence)."""
    try:
        return CheckReport.model_validate(load_json(path, max_bytes=CHECK_MAX_BYTES, what="check.json"))
    except (BadInput, ValidationError, OSError):
        return None


def find_check(runs_dir: Path, migration: Migration) -> CheckEvidence | None:
    """The newest check run under `runs_dir` of this migration's old and new (newest by the run's own time)."""
    if not runs_dir.is_dir():
        return None
    found: list[tuple[float, Path, CheckReport]] = []
    candidates = sorted((p for p in runs_dir.glob("*/check.json") if p.is_file()), reverse=True)
    for path in candidates[:CHECK_SCAN_LIMIT]:
        report = read_check(path)
        if report is not None and _matches(report, migration):
            found.append((report.created_wall, path.parent, report))
    if not found:
        return None
    _, run_dir, report = max(found, key=lambda f: f[0])
    grace = next((i for i in report.items if i.id == "rollout.grace"), None)
    bench = next(
        (
            f.split("/")[0]
            for p in report.parts
            if p.part == "bench" and p.status == "ran"
            for f in p.files
            if f.endswith("/summary.json")
        ),
        None,
    )
    return CheckEvidence(
        run_dir=str(run_dir),
        overall=report.overall,
        overall_reason=report.overall_reason,
        created_wall=report.created_wall,
        grace=grace.verdict if grace else None,
        grace_reason=grace.reason if grace else "",
        bench_dir=str(run_dir / bench) if bench else None,
    )


def read_plan(path: Path) -> tuple[dict[str, object] | None, str | None]:
    """A saved `plan canary --json` output, or why it cannot be read."""
    try:
        data = load_json(path, max_bytes=CHECK_MAX_BYTES, what="canary plan")
    except BadInput as exc:
        return None, f"rollout.entry.canary_plan: {exc.message}"
    if not isinstance(data, dict):
        return None, f"rollout.entry.canary_plan {path}: not a `plan canary --json` output"
    return data, None
