"""The probe registry: each probe declares its request, what it observes, and whether a difference breaks clients."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from switchover.probe.report import Observation, ProbeResult, Verdict

if TYPE_CHECKING:
    from switchover.engines import ApiSemantics
    from switchover.probe.context import ProbeContext

RunFn = Callable[["ProbeContext"], Awaitable[Observation]]  # returns what it observed, or raises ProbeEnded
ExpectFn = Callable[["ApiSemantics"], Any]


class ProbeEnded(Exception):
    """Ends a probe early with `observation` as what it observed (a request that failed, a refusal that is the
    answer): raised by the catalog's helpers (`send_ok`, `end_if`) so that a probe reads straight through. The runner
    records the observation exactly as if the probe had returned it; any other exception is a probe error."""

    def __init__(self, observation: Observation) -> None:
        super().__init__(observation.summary)
        self.observation = observation


@dataclass(frozen=True, kw_only=True)
class Declaration:
    """What a probe declares about itself; `expect` (when given) is what an engine profile predicts the probe will
    observe at default launch flags (None: no prediction). A family of probes that run one function with other
    arguments (a table, like sampling.TWO_REQUESTS) extends it with those arguments, one row per probe."""

    id: str
    title: str
    category: str
    request: str  # what is sent
    observes: str  # what is looked at
    breaking: bool  # a difference breaks a client that relied on the old behaviour
    breaks: str  # ... and this is what breaks
    expect: ExpectFn | None = None

    def register(self, run: RunFn) -> RunFn:
        """Register `run`, the coroutine that observes one endpoint, as this probe."""
        if self.id in REGISTRY:
            raise ValueError(f"duplicate probe id {self.id}")
        REGISTRY[self.id] = Probe(run=run, **{f.name: getattr(self, f.name) for f in fields(Declaration)})
        return run


@dataclass(frozen=True, kw_only=True)
class Probe(Declaration):
    """A declared probe: `run` observes one endpoint; `judge` compares two observations."""

    run: RunFn

    def expected(self, api: ApiSemantics) -> Any | None:
        """The value the profile predicts for this probe, in the probe's own vocabulary; None when none."""
        return self.expect(api) if self.expect is not None else None

    def judge(self, old: Observation, new: Observation | None) -> ProbeResult:
        verdict = judge(old, new)
        return ProbeResult(
            id=self.id,
            title=self.title,
            category=self.category,
            request=self.request,
            observes=self.observes,
            breaking=self.breaking,
            breaks=self.breaks,
            old=old,
            new=new,
            verdict=verdict,
            breaking_difference=self.breaking and verdict == "differs",
        )


def judge(old: Observation, new: Observation | None) -> Verdict:
    """Same/differs on the compared values; inconclusive when either side could not be observed."""
    if new is None:
        return "observed" if old.status == "observed" else "inconclusive"
    if old.status != "observed" or new.status != "observed":
        return "inconclusive"
    return "same" if _norm(old.value) == _norm(new.value) else "differs"


def _norm(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    return value


REGISTRY: dict[str, Probe] = {}
CATEGORY_ORDER = (
    "stop",
    "finish_reason",
    "request",
    "sampling",
    "n",
    "usage",
    "response_format",
    "length",
    "errors",
    "logprobs",
    "stream",
    "response",
    "tools",
)


def probe(
    *,
    id: str,
    title: str,
    category: str,
    request: str,
    observes: str,
    breaking: bool,
    breaks: str,
    expect: ExpectFn | None = None,
) -> Callable[[RunFn], RunFn]:
    """Register an observing coroutine as a probe (with the profile's prediction of what it observes)."""
    return Declaration(
        id=id,
        title=title,
        category=category,
        request=request,
        observes=observes,
        breaking=breaking,
        breaks=breaks,
        expect=expect,
    ).register


def all_probes() -> list[Probe]:
    """Every registered probe, in declaration order."""
    from switchover.probe import catalog  # noqa: F401  (registers the probes)

    order = {c: i for i, c in enumerate(CATEGORY_ORDER)}
    return sorted(REGISTRY.values(), key=lambda p: order.get(p.category, len(order)))


def select(only: list[str] | None = None, skip: list[str] | None = None) -> list[Probe]:
    """Probes whose id or category matches `only` (all when empty) and not `skip`."""
    from switchover.errors import BadInput

    probes = all_probes()
    known = {p.id for p in probes} | {p.category for p in probes}
    for name in (only or []) + (skip or []):
        if name not in known:
            raise BadInput(
                f"--only/--skip: unknown probe or category {name!r}", hint="`switchover probe --list` shows them"
            )
    if only:
        probes = [p for p in probes if p.id in only or p.category in only]
    if skip:
        probes = [p for p in probes if p.id not in skip and p.category not in skip]
    return probes
