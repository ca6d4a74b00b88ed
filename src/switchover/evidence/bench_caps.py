"""Which cap bound in a bench step, as summary.json keeps it (bench/capbind.py judges it), and the advice read
from it: the flag that raises the cap, as the release data knows it at the version served (plan translate and
bench's console both say it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, Field

Binding = Literal["requests", "tokens", "kv_cache", "none", "unknown"]
# the launch flag that raises each cap, per engine; each is looked up in the release data at the version served
RAISE: dict[str, dict[str, str]] = {
    "vllm": {
        "requests": "--max-num-seqs",
        "tokens": "--max-num-batched-tokens",
        "kv_cache": "--gpu-memory-utilization",
    },
    "sglang": {
        "requests": "--max-running-requests",
        "tokens": "--chunked-prefill-size",
        "kv_cache": "--mem-fraction-static",
    },
    "llamacpp": {"requests": "--parallel", "kv_cache": "--ctx-size"},
}
WORDS = {"requests": "request-count cap", "tokens": "per-step token budget", "kv_cache": "KV cache (token budget)"}


class Scrape(BaseModel):
    """One /metrics scrape of the step: the gauges the verdict reads (None: not served)."""

    t_ns: int
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None


class Raise(BaseModel):
    """The flag that raises a cap, as the release data knows it at the version served."""

    flag: str
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
    request_cap_source: str | None = Field(default=None, description="where the cap came from; None: inferred")
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


def raise_flag(engine: str | None, version: str | None, binding: str) -> Raise | None:
    """The flag that raises `binding` on `engine`, checked in the release data at `version`."""
    flag = RAISE.get(engine or "", {}).get(binding)
    if flag is None or engine is None:
        return None
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
        elif flag.status == "present":
            where = "; ".join(x for x in (flag.url, flag.note) if x)
            todo = f"raise {flag.flag}" + (f" ({where})" if where else "")
        else:
            todo = f"{flag.flag} is {flag.status} at the version served ({flag.note})"
        lines.append(f"on {engine} at {lim.load} the {WORDS[lim.binding]} bound: {todo}")
    return lines
