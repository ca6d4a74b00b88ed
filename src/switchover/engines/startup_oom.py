"""Out of memory at an engine's start-up: the messages each engine prints when the weights, the KV cache or the
activations do not fit (data/startlog_oom.yaml, cited to the engine's source at a release), found in a start-up's
log lines, each with what ran out and what to change."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, Field, model_validator

from switchover.engines.logline import ANSI, Evidence, compiled, excerpt

Stage = Literal["weights", "kv_cache", "activations", "unknown"]


class OomPattern(BaseModel):
    """One out-of-memory message an engine prints at start-up: what ran out and what to change, cited."""

    id: str
    regex: str
    detail: str | None = Field(
        default=None,
        description="a second regex on the same line: a figure the engine names (the maximum length that fits)",
    )
    stage: Stage
    change: str
    sources: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _compiles(self) -> OomPattern:
        for rx in (self.regex, self.detail):
            if rx is not None:
                try:
                    re.compile(rx)
                except re.error as exc:
                    raise ValueError(f"oom pattern {self.id}: bad regex: {exc}") from None
        return self


class OomData(BaseModel):
    engines: dict[str, list[OomPattern]]


@cache
def load_oom() -> OomData:
    """data/startlog_oom.yaml, validated; a malformed file fails loudly (a packaging bug)."""
    text = resources.files("switchover").joinpath("data/startlog_oom.yaml").read_text(encoding="utf-8")
    return OomData.model_validate(yaml.safe_load(text))


class OutOfMemory(BaseModel):
    """The engine ran out of memory at start-up: the line, what ran out, the figure it names, what to change."""

    stage: Stage
    value: str | None = Field(default=None, description="the size or length the message names")
    detail: str | None = Field(default=None, description="a second figure on the line (the length that fits)")
    change: str
    evidence: Evidence
    sources: list[str]


def find_oom(lines: list[str], patterns: list[OomPattern], *, offset: int = 0) -> list[OutOfMemory]:
    """Every out-of-memory message in a start-up's lines, once per pattern (workers repeat the traceback)."""
    out: list[OutOfMemory] = []
    seen: set[str] = set()
    for n, raw in enumerate(lines, offset + 1):
        line = ANSI.sub("", raw)
        for p in patterns:
            if p.id in seen:
                continue
            m = compiled(p.regex).search(line)
            if not m:
                continue
            seen.add(p.id)
            d = compiled(p.detail).search(line) if p.detail else None
            value = m.group("value") if "value" in m.re.groupindex else None
            out.append(
                OutOfMemory(
                    stage=p.stage,
                    value=value,
                    detail=d.group("value") if d else None,
                    change=p.change,
                    sources=p.sources,
                    evidence=Evidence(line=n, text=excerpt(line, m), pattern=p.id, source=p.sources[0]),
                )
            )
            break
    return out


def oom_hint(oom: list[OutOfMemory]) -> str | None:
    """One sentence per out-of-memory message: where it was and what to change."""
    return (
        " ".join(
            f"out of memory at start-up (line {o.evidence.line}, {o.stage.replace('_', ' ')}"
            + (f", the engine estimates {o.detail} fits" if o.detail else "")
            + f"): {o.change}."
            for o in oom
        )
        or None
    )
