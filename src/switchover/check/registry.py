"""The parts of `check`, written once: name, title, what each needs, whether it talks to the endpoints, and the
function that runs it. The runner runs them in this order; `--only` / `--skip` are checked against it and the CLI
help lists it; docs/check.md's parts table is held to it by a test. Import-light: the parts' own modules (and the
verbs they call) are imported when a part runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel

    from switchover.config import Migration
    from switchover.config.check import CheckSection
    from switchover.wire import EngineClient
    from switchover.wire.discovery import Discovered


@dataclass
class PartInputs:
    """What a part is given: the migration (models filled in from discovery), the check settings, where relative
    paths start, the endpoints as discovered once, and the results of the parts before it (in memory)."""

    m: Migration
    s: CheckSection
    base: Path
    run_path: Path
    config_path: Path | None = None
    progress: Callable[[str], None] = lambda _msg: None
    found: dict[str, Discovered] = field(default_factory=dict)  # "old" / "new" -> discovery
    results: dict[str, BaseModel] = field(default_factory=dict)
    bench_dir: Path | None = None
    clients: dict[str, EngineClient] = field(default_factory=dict)  # the check's own, one per endpoint


@dataclass
class PartOutput:
    """A part's typed result (written as <name>.json) or, for a part that writes its own files, those files."""

    result: BaseModel | None = None
    files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PartSpec:
    """One part of the pre-flight."""

    name: str
    title: str
    needs: str  # in words, for the help and docs/check.md
    live: bool  # talks to both endpoints: not attempted when one does not answer GET /v1/models
    run: Callable[[PartInputs], Awaitable[PartOutput]]
    missing_input: Callable[[CheckSection], str | None] = lambda _s: None  # why it cannot run with these settings


async def _plan(i: PartInputs) -> PartOutput:
    import asyncio

    from switchover.check import parts

    return PartOutput(await asyncio.to_thread(parts.plan_part, i.m, i.s, i.base))


async def _probe(i: PartInputs) -> PartOutput:
    from switchover.check import parts

    return PartOutput(await parts.probe_part(i.m, i.s, i.progress, i.found))


async def _verify(i: PartInputs) -> PartOutput:
    from switchover.check import parts

    return PartOutput(await parts.verify_part(i.m, i.s, i.base, i.progress, i.found))


async def _live_model(i: PartInputs) -> PartOutput:
    from switchover.check import parts

    return PartOutput(await parts.live_model_part(i.m, i.s, i.clients))


async def _metrics(i: PartInputs) -> PartOutput:
    from switchover.check import parts

    return PartOutput(await parts.metrics_part(i.m, i.clients))


async def _diff_model(i: PartInputs) -> PartOutput:
    import asyncio

    from switchover.check import parts

    return PartOutput(await asyncio.to_thread(parts.diff_model_part, i.m, i.s, i.base))


async def _bench(i: PartInputs) -> PartOutput:
    from switchover.check import parts

    report, path = await parts.bench_part(i.m, i.s, i.run_path, i.progress)
    i.bench_dir = path
    return PartOutput(
        report, files=[f"{path.name}/summary.json", f"{path.name}/requests.parquet", f"{path.name}/report.html"]
    )


async def _grace(i: PartInputs) -> PartOutput:
    import asyncio

    from switchover.check import parts

    return PartOutput(await asyncio.to_thread(parts.grace_part, i.m, i.s, i.base, i.bench_dir, i.results.get("bench")))


async def _rollback(i: PartInputs) -> PartOutput:
    import asyncio

    from switchover.check import parts

    return PartOutput(await asyncio.to_thread(parts.rollback_part, i.m, i.config_path))


async def _clients(i: PartInputs) -> PartOutput:
    import asyncio

    from switchover.rollout.client_defaults import ledger_mix

    return PartOutput(await asyncio.to_thread(ledger_mix, i.m, i.config_path, i.s.clients.since_s))


def _diff_model_inputs(s: CheckSection) -> str | None:
    return None if s.diff_model.old and s.diff_model.new else "no model files given (check.diff_model.old / new)"


PARTS: tuple[PartSpec, ...] = (
    PartSpec(
        "plan",
        "API differences, launch translation and capacity from the engine profiles",
        "the engine profiles; check.plan.old_launch, model_dir and gpu when given",
        False,
        _plan,
    ),
    PartSpec("probe", "API behaviour probes on old and new", "both endpoints", True, _probe),
    PartSpec(
        "verify", "output equivalence: greedy divergence, JSON validity, long inputs", "both endpoints", True, _verify
    ),
    PartSpec(
        "live_model", "tokenizer and chat-template counts through both servers", "both endpoints", True, _live_model
    ),
    PartSpec(
        "metrics", "metric names and units by intent; a scrape of both /metrics", "both endpoints", True, _metrics
    ),
    PartSpec(
        "diff_model",
        "tokenizer, template, generation defaults and weights of the two model folders",
        "check.diff_model.old and new (model folders or GGUF files)",
        False,
        _diff_model,
        _diff_model_inputs,
    ),
    PartSpec("bench", "a short A/B latency ladder, old then new at each step", "both endpoints", True, _bench),
    PartSpec(
        "grace",
        "drain grace needed for the longest generation vs the configured grace periods",
        "the bench part's run; check.grace.max_tokens",
        False,
        _grace,
    ),
    PartSpec(
        "rollback",
        "the way back: last drill, rollback prerequisites, holding window",
        "the migration file's rollout; old's 1-token readiness",
        False,
        _rollback,
    ),
    PartSpec(
        "clients",
        "what the clients send through the gateway and which of their defaults differ on new",
        "the gateway ledger (gateway.run_dir or rollout.ledger)",
        False,
        _clients,
    ),
)

NAMES: tuple[str, ...] = tuple(p.name for p in PARTS)
BY_NAME: dict[str, PartSpec] = {p.name: p for p in PARTS}
