"""Pipeline placement: which decoder layers each pipeline stage holds, which stage holds the token embedding and
which the final norm and lm_head (and a tied lm_head's copy), and so the weight bytes of every stage and the
heaviest one, which is the stage that must fit (engine rules in plan/data/pipeline.yaml, cited per release)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationError

from switchover.engines.versions import release_key
from switchover.model.card import ModelCard

GIB = 2**30
EDGE_BYTES_PER_PARAM = 2  # embedding and lm_head as loaded: quantization schemes keep them in 16 bits by default

Split = Literal["remainder_before_last", "remainder_on_last", "remainder_on_last_stages"]


class PlacementRule(BaseModel):
    """One engine's placement rule for a set of releases, as read in its source."""

    versions: str
    read_at: str
    split: Split
    partition_env: str | None = None
    embedding: Literal["first"]
    head: Literal["last"]
    tied: Literal["copy", "unknown"]
    sources: list[str] = Field(min_length=1)


class StageWeights(BaseModel):
    """One pipeline stage: its decoder layers, what else it holds, and its weight bytes on each GPU."""

    stage: int
    first_layer: int
    last_layer: int = Field(description="inclusive")
    layers: int
    holds: list[str] = Field(default_factory=list, description="embedding, final norm, lm_head, tied lm_head copy")
    weights_gib_per_gpu: float


class PipelinePlacement(BaseModel):
    """Every stage of a PP x TP layout, the heaviest one, the rule used and where it was read."""

    engine: str
    pp: int
    tp: int
    stages: list[StageWeights]
    heaviest_stage: int
    rule: str = Field(description="the placement rule in words")
    sources: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def heaviest_gib(self) -> float:
        """Weight GiB on a GPU of the heaviest stage: what every GPU of the layout must hold."""
        return self.stages[self.heaviest_stage].weights_gib_per_gpu


@cache
def rules() -> dict[str, list[PlacementRule]]:
    """The placement rules by engine, validated (a malformed data file is a bug, raised at first use)."""
    text = resources.files("switchover.plan").joinpath("data").joinpath("pipeline.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)["engines"]
    try:
        return {engine: [PlacementRule.model_validate(r) for r in entries] for engine, entries in raw.items()}
    except ValidationError as exc:  # pragma: no cover - the data test loads every entry
        raise RuntimeError(f"plan/data/pipeline.yaml: {exc}") from exc


def rule_for(engine: str, version: str | None) -> tuple[PlacementRule | None, str | None]:
    """The rule holding at this release, else the newest read one with a note saying so; (None, note) when the
    engine has no rule at all."""
    from packaging.specifiers import SpecifierSet

    entries = rules().get(engine, [])
    if not entries:
        return None, (
            f"{engine}: where its pipeline stages put the embedding and lm_head is not in the data; "
            "layers and edges are priced evenly across stages"
        )
    newest = max(entries, key=lambda r: release_key(r.read_at))
    if version is None:
        return newest, None
    for entry in entries:
        try:
            if SpecifierSet(entry.versions).contains(version, prereleases=True):
                return entry, None
        except ValueError:  # a llama.cpp build number is not PEP 440: no entry covers it
            break
    return newest, (
        f"{engine} {version}: pipeline placement not read at this release; the rule read at {newest.read_at} is used"
    )


def stage_layers(n_layers: int, pp: int, split: Split) -> list[int]:
    """Decoder layers per stage under the engine's split rule."""
    base, left = divmod(n_layers, pp)
    parts = [base] * pp
    if split == "remainder_on_last":
        parts[-1] += left
    elif split == "remainder_on_last_stages":
        for i in range(pp - left, pp):
            parts[i] += 1
    else:  # remainder_before_last: the second-to-last backwards (vLLM get_pp_indices)
        for i in range(2, left + 2):
            parts[-i] += 1
    return parts


def _edges(card: ModelCard, tp: int) -> tuple[float, float, list[str]]:
    """(embedding bytes, untied lm_head bytes) on one TP rank (both are split over the vocabulary), with notes."""
    if not card.vocab_size:
        return (
            0.0,
            0.0,
            [
                "config.json has no vocab_size: the embedding and lm_head are priced as part of the "
                "layers, evenly across stages"
            ],
        )
    matrix = card.vocab_size * card.hidden_size * EDGE_BYTES_PER_PARAM / tp
    return matrix, (0.0 if card.tied_embeddings else matrix), []


def placement(card: ModelCard, engine: str, version: str | None, tp: int, pp: int) -> PipelinePlacement:
    """Weights of every stage on one GPU: its layers' share of the body, plus the embedding on the first stage and
    the final norm and lm_head on the last (a tied lm_head priced where the engine keeps its copy)."""
    rule, note = rule_for(engine, version)
    notes = [note] if note else []
    embed, head, edge_notes = _edges(card, tp)
    notes += edge_notes
    rank_total = card.weights.per_rank_bytes(tp)
    body = max(rank_total - embed - head, 0.0)
    per_layer = body / card.num_layers
    parts = stage_layers(card.num_layers, pp, rule.split if rule else "remainder_on_last")
    if card.moe is not None:
        notes.append("expert and dense layers are priced at the average layer size")
    tied_copy = bool(pp > 1 and card.tied_embeddings and rule is not None and rule.tied == "copy")
    if pp > 1 and card.tied_embeddings and not tied_copy and embed:
        notes.append(
            f"whether {engine} keeps a copy of the tied embedding on the last stage is not in the data: "
            f"the last stage may hold {embed / GIB:.2f} GiB more"
        )
    stages, start = [], 0
    for i, n in enumerate(parts):
        holds, extra = [], 0.0
        if i == 0:
            holds.append("embedding")
            extra += embed
        if i == pp - 1:
            holds += ["final norm", "lm_head" + (" (tied to the embedding)" if card.tied_embeddings else "")]
            extra += head + (embed if tied_copy else 0.0)
            if tied_copy:
                holds.append("a copy of the embedding for the tied lm_head")
        stages.append(
            StageWeights(
                stage=i,
                first_layer=start,
                last_layer=start + n - 1,
                layers=n,
                holds=holds,
                weights_gib_per_gpu=round((n * per_layer + extra) / GIB, 3),
            )
        )
        start += n
    heaviest = max(range(pp), key=lambda i: (stages[i].weights_gib_per_gpu, -i))
    words = {
        "remainder_before_last": "leftover layers one each to the stages before the last",
        "remainder_on_last": "leftover layers all on the last stage",
        "remainder_on_last_stages": "leftover layers one each to the last stages",
    }
    rule_text = (
        (
            f"{engine}: {words[rule.split]}; embedding on the first stage; final norm and lm_head on the last"
            + ("; a tied lm_head keeps its own copy of the embedding on the last stage" if rule.tied == "copy" else "")
            + (f" (override: {rule.partition_env})" if rule.partition_env else "")
            + f"; read at {rule.read_at}"
        )
        if rule
        else f"{engine}: no placement rule in the data"
    )
    return PipelinePlacement(
        engine=engine,
        pp=pp,
        tp=tp,
        stages=stages,
        heaviest_stage=heaviest,
        rule=rule_text,
        sources=rule.sources if rule else [],
        notes=notes,
    )
