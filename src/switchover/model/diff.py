"""`diff-model`: tokenizer, chat template, generation defaults and weights of two models, and the verdict: hot
switch possible, or dual-track required, with the reasons (docs/diff-model.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field

from switchover.model.generation import GenerationDiff, diff_generation, load_generation
from switchover.model.source import gguf_fields, read_json, resolve
from switchover.model.template import TemplateDiff, diff_templates, load_template
from switchover.model.tokenizer import TokenizerDiff, diff_tokenizers, load_tokenizer
from switchover.model.weights import WeightsFingerprint, weights_hash

PARAM_SCALE_LIMIT = 1.5  # more than 1.5x the parameters: another memory/concurrency budget (docs/diff-model.md)

Weights = Annotated[
    WeightsFingerprint | None,
    Field(
        description="The model's weights fingerprint (old's or new's, as the field is named): a content hash over "
        "every tensor; None: the weights were not hashed (--no-weights)"
    ),
]


class ModelFacts(BaseModel):
    """What decides whether two models can share budgets, caches and capacity."""

    source: str = Field(description="The model read: an HF directory or a .gguf file")
    context: int | None = Field(
        default=None,
        description="Context length: max_position_embeddings of config.json (or "
        "of its text_config), or the GGUF's "
        "<architecture>.context_length; None: not stated",
    )
    quantization: str | None = Field(
        default=None,
        description="quantization_config.quant_method, else the most common "
        "weight dtype (e.g. BF16, Q4_1), upper case; None: not "
        "known",
    )
    params: int | None = Field(
        default=None, description="Parameter count, from the weights; None: not hashed (--no-weights)"
    )


class Reason(BaseModel):
    blocking: bool = Field(description="True: dual-track required")
    what: str
    why: str
    action: str


class ModelDiff(BaseModel):
    old: ModelFacts
    new: ModelFacts
    tokenizer: TokenizerDiff
    template: TemplateDiff
    generation: GenerationDiff
    weights_old: Weights = None
    weights_new: Weights = None
    weights_same: bool | None = Field(
        default=None, description="The two weights hashes are equal; None: not hashed (--no-weights)"
    )
    verdict: str = Field(description="'hot switch possible', or 'dual-track required' when a reason is blocking")
    reasons: list[Reason] = Field(default_factory=list)


def facts(path: str | Path, weights: WeightsFingerprint | None) -> ModelFacts:
    kind, p = resolve(path)
    f = ModelFacts(source=str(p), params=weights.params if weights else None)
    if weights and weights.dtypes:
        f.quantization = max(weights.dtypes.items(), key=lambda kv: kv[1])[0].upper()
    if kind == "gguf":
        meta = gguf_fields(p)
        arch = meta.get("general.architecture")
        ctx = meta.get(f"{arch}.context_length")
        f.context = int(ctx) if isinstance(ctx, int) else None
    else:
        cfg: dict[str, Any] = read_json(p / "config.json") or {}
        ctx = cfg.get("max_position_embeddings") or (cfg.get("text_config") or {}).get("max_position_embeddings")
        f.context = int(ctx) if isinstance(ctx, int) else None
        q = (cfg.get("quantization_config") or {}).get("quant_method")
        if q:
            f.quantization = str(q).upper()
    return f


def judge(d: ModelDiff) -> tuple[str, list[Reason]]:
    """Hot switch only when budgets, caches and template can be shared (docs/diff-model.md, Verdict)."""
    r: list[Reason] = []
    t = d.tokenizer
    if not t.same:
        shift = f"; token counts x{t.total_ratio} over the corpus" if t.total_ratio else ""
        r.append(
            Reason(
                blocking=True,
                what="tokenizer changed",
                why=f"vocabulary {t.old.vocab_size} -> {t.new.vocab_size}, {t.only_new_count} new tokens"
                f"{shift}: every token budget, truncation and max_tokens setting is off",
                action="recompute budgets; run both in parallel (dual-track) or take a maintenance window",
            )
        )
    if not d.template.same_renders:
        changed = [x.conversation for x in d.template.renders if not x.same]
        r.append(
            Reason(
                blocking=True,
                what="chat template changed",
                why=f"renders differ for {', '.join(changed)}: role markers / system placement change, and "
                "prefix caches keyed on the old rendering miss or, worse, collide",
                action="put the template hash in cache keys; evaluate the new model with its own template",
            )
        )
    if d.old.quantization and d.new.quantization and d.old.quantization != d.new.quantization:
        r.append(
            Reason(
                blocking=True,
                what="quantization changed",
                why=f"{d.old.quantization} -> {d.new.quantization}: output distributions differ, A/B is "
                "not like-for-like",
                action="treat as a new model and evaluate it on its own",
            )
        )
    if d.old.context and d.new.context and d.old.context != d.new.context:
        r.append(
            Reason(
                blocking=True,
                what="context length changed",
                why=f"{d.old.context} -> {d.new.context}: KV pool and capacity plan change",
                action="re-plan capacity first, then switch",
            )
        )
    if d.old.params and d.new.params:
        ratio = max(d.old.params, d.new.params) / min(d.old.params, d.new.params)
        if ratio > PARAM_SCALE_LIMIT:
            r.append(
                Reason(
                    blocking=True,
                    what="parameter scale changed",
                    why=f"{d.old.params:,} -> {d.new.params:,} parameters ({ratio:.1f}x): memory and "
                    "concurrency are another budget",
                    action="new instance group; no hot switch",
                )
            )
    for note in d.generation.notes[:3]:
        r.append(
            Reason(
                blocking=False,
                what="generation defaults differ",
                why=note,
                action="pin sampling fields in requests or align generation_config",
            )
        )
    if d.weights_same is False:
        r.append(
            Reason(
                blocking=False,
                what="weights changed (expected)",
                why="KV and answer caches from the old weights are invalid for the new ones",
                action="include the weights hash in every cache key (switchover cachekey)",
            )
        )
    verdict = "dual-track required" if any(x.blocking for x in r) else "hot switch possible"
    return verdict, r


def diff_models(
    old: str | Path,
    new: str | Path,
    *,
    corpus: list[tuple[str, str]] | None = None,
    budget: int | None = None,
    old_engine: str | None = None,
    new_engine: str | None = None,
    hash_weights: bool = True,
) -> ModelDiff:
    """Everything that changes between two models (HF directories or GGUF files)."""
    wa = weights_hash(old) if hash_weights else None
    wb = weights_hash(new) if hash_weights else None
    d = ModelDiff(
        old=facts(old, wa),
        new=facts(new, wb),
        tokenizer=diff_tokenizers(load_tokenizer(old), load_tokenizer(new), corpus, budget),
        template=diff_templates(load_template(old), load_template(new)),
        generation=diff_generation(load_generation(old), load_generation(new), old_engine, new_engine),
        weights_old=wa,
        weights_new=wb,
        weights_same=(wa.hash == wb.hash) if wa and wb else None,
        verdict="",
    )
    d.verdict, d.reasons = judge(d)
    return d
