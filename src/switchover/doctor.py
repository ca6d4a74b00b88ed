"""`switchover doctor`: symptom → likely cause → the switchover command that confirms it.

The table is data (data/doctor.yaml), each row citing where the diagnosis comes from (the project's docs, an
engine's source or docs at a release): the ways a canary gets slow or strange, the impact areas of a switch, batch
limits, API semantics, readiness and metric units, and hardware symptoms (NCCL hang, memory creep over hours, slower
on the new GPU, double residency on reload). Matching is fuzzy: words and aliases
are scored, so "p99 went up but qps is flat" finds the first row.
"""

from __future__ import annotations

import difflib
import re
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, Field, TypeAdapter

from switchover.errors import BadInput


class Cause(BaseModel):
    cause: str
    confirm: list[str] = Field(description="switchover commands that confirm or rule it out")
    fix: str
    source: str
    figures: Literal["canary"] | None = Field(
        default=None,
        description="the computation whose figures doctor "
        "prints for this cause when given a model, an engine and a GPU",
    )
    verdict: Literal["tune", "convert", "swap"] | None = Field(
        default=None,
        description="tune or swap?: tune the engine, convert the checkpoint, or swap engines "
        "(only missing operations metrics warrants a swap)",
    )


class CanaryFigures(BaseModel):
    """`plan canary`'s own figures for the inputs given: one copy alone, each of two resident copies, and the
    total the pair sustains at each canary percentage."""

    engine: str = Field(description="the engine release planned for")
    gpu: str
    context: int
    single_tokens: int
    copy_tokens: list[int] = Field(description="KV tokens of the old and the new copy, both resident")
    sustainable_total: dict[str, int] = Field(description="canary % -> concurrent requests the pair sustains")
    command: str = Field(description="the `plan canary` command that prints the same figures")
    notes: list[str] = Field(default_factory=list)


class Symptom(BaseModel):
    key: str
    symptom: str
    aliases: list[str] = Field(default_factory=list)
    causes: list[Cause]


class Diagnosis(BaseModel):
    query: str
    score: float
    symptom: Symptom
    canary: CanaryFigures | None = Field(
        default=None,
        description="`plan canary`'s figures for the inputs given, when a cause of this symptom is two resident copies",
    )

    @property
    def wants_canary(self) -> bool:
        return any(c.figures == "canary" for c in self.symptom.causes)


def _load() -> tuple[Symptom, ...]:
    """The table from data/doctor.yaml (packaged), validated; a malformed file fails loudly at import."""
    raw = yaml.safe_load(resources.files("switchover").joinpath("data/doctor.yaml").read_text(encoding="utf-8"))
    return tuple(TypeAdapter(list[Symptom]).validate_python(raw))


SYMPTOMS: tuple[Symptom, ...] = _load()


_WORD = re.compile(r"[a-z0-9]+")
_STOP = {
    "the",
    "a",
    "an",
    "is",
    "are",
    "got",
    "get",
    "with",
    "and",
    "or",
    "of",
    "to",
    "on",
    "at",
    "for",
    "but",
    "while",
    "went",
    "some",
    "few",
    "new",
    "old",
    "when",
    "after",
    "our",
    "my",
    "it",
    "its",
    "was",
    "were",
}


MAX_QUERY = 500
# The documented match threshold (docs/rollout.md, docs/cli.md): below it is no match, exit 2. Every symptom text,
# alias and documented example scores 0.41 or more; a sentence sharing one word with a row ("my cat ate the gpu",
# 0.34 against slower-on-new-gpu) stays below it.
MIN_SCORE = 0.4


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _score(query: str, s: Symptom) -> float:
    q = _words(query)
    texts = [s.symptom, s.key.replace("-", " "), *s.aliases]
    best = 0.0
    for t in texts:
        w = _words(t)
        overlap = len(q & w) / max(1, len(q)) if q else 0.0
        fuzzy = difflib.SequenceMatcher(None, query.lower(), t.lower()).ratio()
        near = sum(1 for x in q for y in w if x != y and difflib.SequenceMatcher(None, x, y).ratio() >= 0.85)
        best = max(best, 0.6 * overlap + 0.3 * fuzzy + 0.1 * min(1.0, near / max(1, len(q))))
    return round(best, 3)


def diagnose(query: str, *, limit: int = 3, min_score: float = MIN_SCORE) -> list[Diagnosis]:
    """Symptoms best matching the query, best first; an exact key wins outright."""
    query = query.strip()
    if not query:
        raise BadInput('describe the symptom, e.g. `switchover doctor "p99 up, qps flat"`')
    if len(query) > MAX_QUERY:  # the fuzzy match is quadratic in the query: a pasted log would run for minutes
        raise BadInput(
            f"describe the symptom in at most {MAX_QUERY} characters, got {len(query)}",
            hint='a few words are enough, e.g. `switchover doctor "p99 up, qps flat"`',
        )
    exact = [s for s in SYMPTOMS if s.key == query.lower()]
    if exact:
        return [Diagnosis(query=query, score=1.0, symptom=exact[0])]
    scored = sorted(((_score(query, s), s) for s in SYMPTOMS), key=lambda x: -x[0])
    return [Diagnosis(query=query, score=sc, symptom=s) for sc, s in scored[:limit] if sc >= min_score]
