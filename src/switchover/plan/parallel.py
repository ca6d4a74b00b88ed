"""Parallel layouts: every TP x PP x DP (x EP) for N GPUs, why the illegal ones fail, the legal ones ranked by
KV capacity per replica (docs/plan.md, Parallel plans)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from switchover.engines import EngineProfile
from switchover.errors import BadInput
from switchover.model.card import LayerKind, ModelCard
from switchover.plan.capacity import capacity, weights_per_gpu_gib
from switchover.plan.interconnect import Interconnect, allreduce_bytes_per_token, tp_caveat
from switchover.plan.pipeline import PipelinePlacement, placement


class Layout(BaseModel):
    """One candidate layout and its verdict."""

    tp: int
    pp: int
    dp: int = Field(description="replicas from the GPUs left")
    ep: int = 1
    gpus_used: int
    legal: bool
    reasons: list[str] = Field(default_factory=list, description="why it is illegal, or caveats when legal")
    kv_tokens_per_replica: int | None = Field(
        default=None, description="Tokens the KV cache pool of one replica holds; None: the layout is illegal"
    )
    concurrency_per_replica: int | None = Field(
        default=None,
        description="Requests one replica runs at once, each "
        "of --context tokens (else max_model_len): "
        "the lowest of the KV pool's and the "
        "scheduler's caps",
    )
    total_concurrency: int | None = Field(default=None, description="concurrency_per_replica × dp")
    binding_limit: str | None = Field(
        default=None,
        description="Which cap sets the concurrency: kv, max_num_seqs or max_batched_tokens ('+' between ties)",
    )
    weights_gib_per_gpu: float | None = Field(
        default=None,
        description="Weight bytes on each GPU, GiB (with PP: on the heaviest stage's GPUs); None: the shape is illegal",
    )
    pipeline: PipelinePlacement | None = Field(
        default=None,
        description="PP > 1: each stage's layers, what else it "
        "holds (embedding first, final norm and lm_head last) and its weights",
    )
    tp_link: str | None = Field(default=None, description="nvlink | pcie | unknown: what the TP group all-reduces over")
    allreduce_kib_per_token: float | None = Field(
        default=None, description="TP all-reduce bytes each GPU sends per token (2 per layer, ring), KiB"
    )


def shape_problems(card: ModelCard, profile: EngineProfile, tp: int, pp: int, ep: int = 1) -> list[str]:
    """Every reason this TP/PP/EP cannot run this model on this engine (empty = legal)."""
    out: list[str] = []
    att = card.attention
    tp_flag = profile.flags.get("tensor_parallel_size")
    pp_flag = profile.flags.get("pipeline_parallel_size")
    if tp > 1 and (tp_flag is None or tp_flag.flag is None):
        out.append(f"{profile.display_name} has no tensor parallelism ({tp_flag.note if tp_flag else 'no flag'})")
    if pp > 1 and (pp_flag is None or pp_flag.flag is None or pp_flag.kind == "none"):
        out.append(f"{profile.display_name} has no pipeline parallelism")
    if att.num_heads % tp:
        out.append(f"TP={tp} does not divide the {att.num_heads} attention heads")
    if LayerKind.MLA not in card.layers:
        kv = att.num_kv_heads
        if kv % tp and tp % kv:
            out.append(f"TP={tp} neither divides nor is a multiple of the {kv} KV heads")
    if card.state is not None and card.state.num_heads % tp:
        out.append(f"TP={tp} does not divide the {card.state.num_heads} {card.state.kind} heads")
    if pp > card.num_layers:
        out.append(f"PP={pp} exceeds the {card.num_layers} layers")
    if ep > 1:
        if card.moe is None:
            out.append(f"EP={ep} on a dense model (no experts)")
        elif card.moe.num_experts % ep:
            out.append(f"EP={ep} does not divide the {card.moe.num_experts} experts")
    return out


def check_layout(card: ModelCard, profile: EngineProfile, tp: int, pp: int, ep: int = 1) -> None:
    """BadInput (exit 2) naming every reason a requested layout is impossible."""
    problems = shape_problems(card, profile, tp, pp, ep)
    if problems:
        raise BadInput(
            f"impossible layout TP={tp} PP={pp}" + (f" EP={ep}" if ep > 1 else "") + " for "
            f"{card.name} on {profile.name}: " + "; ".join(problems),
            hint="`switchover plan parallel` lists the legal layouts",
        )


def plan_layouts(
    card: ModelCard,
    profile: EngineProfile,
    gpus: int,
    gpu_total_gib: float,
    *,
    gpu_name: str | None = None,
    context: int | None = None,
    max_model_len: int | None = None,
    kv_dtype: str = "auto",
    overheads: dict[str, float] | None = None,
    interconnect: Interconnect | None = None,
    engine_version: str | None = None,
) -> list[Layout]:
    """All TP x PP (x EP for MoE) with TP*PP <= gpus; legal ones first, ranked by KV tokens per replica, except
    that with a known interconnect a layout whose TP group crosses PCIe ranks after every one that does not."""
    if gpus < 1:
        raise BadInput(f"--gpus must be >= 1, got {gpus}")
    out: list[Layout] = []
    for tp in range(1, gpus + 1):
        for pp in range(1, gpus // tp + 1):
            dp = gpus // (tp * pp)
            eps = [1]
            if card.moe is not None and tp * dp > 1:
                eps.append(tp * dp)  # EP spans TP x DP (vLLM --enable-expert-parallel; engines.md §1a)
            for ep in eps:
                problems = shape_problems(card, profile, tp, pp, ep)
                layout = Layout(
                    tp=tp, pp=pp, dp=dp, ep=ep, gpus_used=tp * pp * dp, legal=not problems, reasons=problems
                )
                if not problems:
                    _fill(
                        layout,
                        card,
                        profile,
                        gpu_total_gib,
                        gpu_name,
                        context,
                        max_model_len,
                        kv_dtype,
                        overheads,
                        gpus,
                        engine_version,
                    )
                    if layout.legal and tp > 1:
                        layout.tp_link, caveat = tp_caveat(card, interconnect, tp, pp)
                        layout.allreduce_kib_per_token = round(allreduce_bytes_per_token(card, tp) / 1024, 1)
                        if caveat:
                            layout.reasons.append(caveat)
                out.append(layout)
    legal = sorted(
        (x for x in out if x.legal),
        key=lambda x: (x.tp_link == "pcie", -(x.kv_tokens_per_replica or 0), -(x.total_concurrency or 0), x.tp * x.pp),
    )
    return legal + [x for x in out if not x.legal]


def _fill(
    layout: Layout,
    card: ModelCard,
    profile: EngineProfile,
    total: float,
    gpu_name: str | None,
    context: int | None,
    mml: int | None,
    kv_dtype: str,
    overheads: dict[str, float] | None,
    gpus: int,
    engine_version: str | None = None,
) -> None:
    weights = weights_per_gpu_gib(card, layout.tp, layout.pp)
    if card.moe is not None and layout.ep > 1:
        weights = card.weights.total_bytes / (layout.ep * layout.pp) / 2**30  # experts dominate MoE weights
    elif layout.pp > 1:  # the stage holding the embedding or lm_head weighs more than 1/PP: it must fit
        layout.pipeline = placement(card, profile.name, engine_version, layout.tp, layout.pp)
        weights = layout.pipeline.heaviest_gib
    res = capacity(
        card,
        profile,
        total,
        gpu_name=gpu_name,
        tp=layout.tp,
        pp=layout.pp,
        kv_dtype=kv_dtype,
        max_model_len=mml,
        context=context,
        weights_gib=weights,
        overheads=overheads,
        engine_version=engine_version,
    )
    layout.weights_gib_per_gpu = round(weights, 3)
    if not res.instance.starts:
        layout.legal = False
        layout.reasons.append(res.instance.problem or "does not fit")
        return
    layout.kv_tokens_per_replica = res.tokens
    layout.concurrency_per_replica = res.max_concurrency
    layout.total_concurrency = res.max_concurrency * layout.dp
    layout.binding_limit = res.binding_limit
    if layout.pipeline is not None:
        top = layout.pipeline.stages[layout.pipeline.heaviest_stage]
        layout.reasons.append(
            f"heaviest stage {top.stage} (layers {top.first_layer}-{top.last_layer}"
            + (f", {', '.join(top.holds)}" if top.holds else "")
            + f"): "
            f"{top.weights_gib_per_gpu:.2f} GiB weights per GPU"
        )
    if layout.gpus_used < gpus:
        layout.reasons.append(f"{gpus - layout.gpus_used} GPU(s) idle")
    layout.reasons.extend(n for n in res.layout.notes if "uneven" in n or "replicated" in n)
