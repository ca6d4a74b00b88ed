"""Which cap bound in a bench step, as summary.json keeps it (bench/capbind.py judges it), and the advice read
from it: the flag that raises the cap, as the release data knows it at the version served (plan translate and
bench's console both say it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache, lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Binding = Literal["requests", "tokens", "kv_cache", "none", "unknown"]
WORDS = {"requests": "request-count cap", "tokens": "per-step token budget", "kv_cache": "KV cache (token budget)"}


class Scrape(BaseModel):
    """One /metrics scrape of the step: the gauges the verdict reads (None: not served)."""

    t_ns: int
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None


class Raise(BaseModel):
    """The flag that raises a cap, as the release data knows it at the version served."""

    model_config = ConfigDict(frozen=True)

    flag: str | None = Field(description="None: no flag known at the version served (status unknown, note says why)")
    status: Literal["present", "absent", "unknown"]
    url: str | None = None
    note: str = ""


class StepLimit(BaseModel):
    """What limited one step of one endpoint: the binding cap, and its out-of-memory answers."""

    endpoint: str
    bucket: str
    step: int
    repeat: int
    load: str = Field(description="concurrency or rate of the step, as shown in the step table")
    binding: Binding
    detail: str
    scrapes: int = Field(description="Scrapes inside the step")
    waiting_scrapes: int = Field(default=0, description="Scrapes with requests waiting")
    shares: dict[str, float] = Field(default_factory=dict, description="binding -> share of the waiting scrapes")
    running_max: float | None = None
    waiting_max: float | None = None
    kv_usage_max: float | None = None
    request_cap: int | None = None
    request_cap_source: str | None = Field(
        default=None,
        description="where the cap came from (cited), or why the one the endpoint reported was not used "
        "('not read: ...'); None: none reported (the cap is inferred)",
    )
    raise_flag: Raise | None = None
    requests: int = 0
    oom: int = Field(default=0, description="Answers carrying an engine's out-of-memory text (bench/oom.py)")
    engine_dead: int = Field(default=0, description="Answers saying the engine process died (cause not in the answer)")
    oom_texts: list[str] = Field(default_factory=list)
    series: dict[str, str] = Field(
        default_factory=dict,
        description="intent -> the series the verdict read and what the release data says of it at the version served",
    )

    @property
    def oom_rate(self) -> float | None:
        return self.oom / self.requests if self.requests else None


class Candidate(BaseModel):
    """A profile intent whose flag may raise a binding."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    intent: str
    kind: str | None = Field(default=None, description="the flag must take this kind of value (float: a fraction)")


class NotRaising(BaseModel):
    """An intent an engine has that does not raise a binding there, read in its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: str
    binding: str
    intent: str
    versions: str = Field(description="release range it holds for (PEP 440 specifier set; llama.cpp: build numbers)")
    read_at: str
    why: str
    source: str

    @field_validator("source")
    @classmethod
    def _cited(cls, value: str) -> str:
        if not value.startswith("https://"):
            raise ValueError("an engine fact cites its source as a URL at a release")
        return value


class CapRaises(BaseModel):
    """engines/data/matrix/cap_raises.yaml: which intents raise which binding."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bindings: dict[str, list[Candidate]]
    not_raising: list[NotRaising] = Field(default_factory=list)


@cache
def cap_raises() -> CapRaises:
    """The packaged binding -> intent data, validated."""
    from switchover.engines.matrixfile import packaged, validated

    return validated(CapRaises, packaged("cap_raises.yaml"), "cap_raises.yaml")


@lru_cache(maxsize=256)  # keyed by the version an engine reports: bounded, whatever a server says it is
def cap_flag(engine: str, version: str | None, binding: str) -> Raise | None:
    """The flag that raises `binding` as `engine`'s profile has it at `version` (status "unknown" when the profile has
    none for the binding's intents, or at a release the data on it was not read for); None: no flag raises it, or
    the engine has no profile."""
    from switchover.engines.names import ENGINES
    from switchover.engines.profile import in_range, load_profile
    from switchover.errors import BadInput

    candidates = cap_raises().bindings.get(binding)
    if engine not in ENGINES or not candidates:
        return None
    try:
        profile = load_profile(engine, version)
    except BadInput as exc:
        return Raise(flag=None, status="unknown", note=exc.message)
    for cand in candidates:
        spec = profile.flag(cand.intent)
        if spec is None or spec.flag is None or (cand.kind is not None and spec.kind != cand.kind):
            continue
        for nr in cap_raises().not_raising:
            if (nr.engine, nr.binding, nr.intent) != (engine, binding, cand.intent):
                continue
            if version is None or in_range(nr.versions, version):
                return None
            return Raise(
                flag=spec.flag, status="unknown", note=f"whether {spec.flag} raises it was read at {nr.read_at} only"
            )
        return Raise(flag=spec.flag, status="present")
    at = f"at {version}" if version else "at the newest release it covers"
    intents = ", ".join(c.intent for c in candidates)
    return Raise(flag=None, status="unknown", note=f"the {engine} profile has no launch flag for {intents} {at}")


def raise_flag(engine: str | None, version: str | None, binding: str) -> Raise | None:
    """The flag that raises `binding` on `engine` (cap_flag: the profile's at `version`), checked in the release data
    at `version`."""
    if engine is None:
        return None
    choice = cap_flag(engine, version, binding)
    if choice is None or choice.flag is None or choice.status != "present":
        return choice
    flag = choice.flag
    from switchover.engines.releases import view

    v = view(engine, version)
    if v is None:
        return Raise(flag=flag, status="unknown", note=f"no release data for {engine}")
    look = v.option(flag)
    return Raise(
        flag=flag,
        status=look.status,
        url=look.url,
        note=(v.resolution.note or "") if look.status == "present" else (look.reason or ""),
    )


def advice(limits: Iterable[StepLimit], engines: Mapping[str, str | None]) -> list[str]:
    """One line per endpoint and binding: "on <engine> at <load> the <cap> bound: raise <flag>" (the lowest load
    at which it bound), with what the release data says of the flag."""
    seen: set[tuple[str, str]] = set()
    lines = []
    for lim in sorted(limits, key=lambda x: (x.endpoint, x.step)):
        if lim.binding not in WORDS or (lim.endpoint, lim.binding) in seen:
            continue
        seen.add((lim.endpoint, lim.binding))
        engine = engines.get(lim.endpoint) or lim.endpoint
        flag = lim.raise_flag
        if flag is None:
            todo = "no flag known for it in this engine"
        elif flag.flag is None:
            todo = f"unknown ({flag.note})"
        elif flag.status == "present":
            where = "; ".join(x for x in (flag.url, flag.note) if x)
            todo = f"raise {flag.flag}" + (f" ({where})" if where else "")
        else:
            todo = f"{flag.flag} is {flag.status} at the version served ({flag.note})"
        lines.append(f"on {engine} at {lim.load} the {WORDS[lim.binding]} bound: {todo}")
    return lines
