"""Memory an engine spends outside weights and KV, from what drives it (issue 12 §2-3).

The coefficients are data in the engine profile (`memory.overhead_model`, one band per range of versions), each
fitted on logged start-up points that are kept apart from the accuracy set (bench/data/plan_points.yaml):

* activation peak of the start-up profiling pass: the larger of the sampler warm-up (max_num_seqs x vocab logits
  and their sort/softmax copies) and the dummy forward (batched tokens x (hidden + 3 x MLP width / TP));
* non-torch memory (NCCL and custom all-reduce buffers, cuBLAS workspaces) by TP;
* the CUDA-graph estimate where the version subtracts it before sizing the KV pool;
* where the engine sizes its pool from the memory free when it starts (SGLang), what the process holds at that
  baseline (`baseline_held_gib_by_tp`) and what the weight load holds beyond the parameter bytes (`weight_load`:
  the rotary cos/sin cache, the caching allocator's rounding of each parameter block, a fitted remainder).
"""

from __future__ import annotations

import itertools
import math

from pydantic import BaseModel, Field

from switchover.engines import EngineProfile
from switchover.engines.compat import in_range, newest_release
from switchover.engines.profile import LoadOverheadModel, OverheadBand
from switchover.engines.versions import parse_version, release_key, version_matches
from switchover.errors import BadInput
from switchover.model.card import ModelCard

GIB = 2**30
MIB = 2**20

__all__ = [
    "EngineVersion",
    "ModelledOverheads",
    "band_for",
    "default_fraction",
    "model_overheads",
    "newest_known",
    "parse_version",
    "resolve_version",
    "version_matches",
]


class EngineVersion(BaseModel):
    """The engine release a plan is for: the one asked for, else the newest known, and what the user is told."""

    engine: str
    asked: str | None = Field(description="the release the user named (None: not named)")
    version: str | None = Field(
        description="the release planned for: as asked, else the newest known; None when "
        "no release of this engine is known"
    )
    band: str | None = Field(default=None, description="the profile's overhead band that covers it (None: none)")
    note: str | None = Field(
        default=None, description="how the version was chosen, or what the data does not cover at it"
    )

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}" if self.version else f"{self.engine} (release unknown)"


def newest_known(profile: EngineProfile) -> str | None:
    """The newest release of the engine the data knows (engines.compat.newest_release): the newest release read from
    source, else the release the profile was read at when its `version_read` starts with one; None otherwise."""
    return newest_release(profile.name, profile.version_read)


def band_for(profile: EngineProfile, version: str | None) -> tuple[OverheadBand | None, str]:
    """The overhead band for an engine release (None: the newest known), and the release it was looked up at."""
    wanted = version or profile.resolved_version or newest_known(profile)
    if wanted is None:
        return None, "no version"
    for band in profile.memory.overhead_model:
        if in_range(band.versions, wanted):
            return band, wanted
    return None, wanted


def resolve_version(profile: EngineProfile, asked: str | None) -> EngineVersion:
    """The release to plan for (asked, else the profile's resolved release, else the newest known) and the note
    that says how it was chosen or what the overhead data does not cover there; BadInput for a malformed release."""
    if asked is not None:
        try:
            release_key(asked)
        except ValueError as exc:
            raise BadInput(f"{profile.name} version: {exc}") from None
    stated = asked or profile.resolved_version
    newest = newest_known(profile)
    version = stated or newest
    if version is None:
        return EngineVersion(
            engine=profile.name,
            asked=None,
            version=None,
            note=f"no {profile.name} version given and no release of it is known (profile read "
            f"at {profile.version_read[:80]}): version-banded data is not applied",
        )
    band, _ = band_for(profile, version)
    notes = [] if stated else [f"no {profile.name} version given: {version}, the newest known, is assumed"]
    if stated and newest is not None and release_key(stated) > release_key(newest):
        notes.append(
            f"{profile.name} {stated} is newer than the newest release known ({newest}): what the data "
            f"says of {newest} is assumed to still hold"
        )
    if band is None and profile.memory.overhead_model:
        bands = ", ".join(b.versions for b in profile.memory.overhead_model)
        notes.append(
            f"the {profile.name} profile has no overhead model for {version} (its bands: {bands}): its "
            "flat overhead defaults apply, not a model fitted at this version"
        )
    return EngineVersion(
        engine=profile.name,
        asked=stated,
        version=version,
        band=band.versions if band is not None else None,
        note="; ".join(notes) or None,
    )


def default_fraction(profile: EngineProfile, version: str | None) -> float | None:
    """The memory fraction the engine uses when none is given: its version band's, else the profile's."""
    band, _ = band_for(profile, version)
    if band is not None and band.default_fraction is not None:
        return band.default_fraction
    return profile.memory.default_fraction


def sampler_bytes_per_seq_vocab(table: dict[int, float], seqs: int) -> float:
    """Log-linear interpolation between calibrated max_num_seqs values, clamped at the ends."""
    if not table:
        return 0.0
    keys = sorted(table)
    if seqs <= keys[0]:
        return table[keys[0]]
    if seqs >= keys[-1]:
        return table[keys[-1]]
    for lo, hi in itertools.pairwise(keys):
        if lo <= seqs <= hi:
            t = (math.log(seqs) - math.log(lo)) / (math.log(hi) - math.log(lo))
            return table[lo] + t * (table[hi] - table[lo])
    return table[keys[-1]]


def dense_rank_blocks(card: ModelCard, tp: int) -> list[int] | None:
    """Bytes of the large parameter tensors one TP rank allocates for a dense 16-bit model (merged QKV, output,
    merged gate/up and down projections per layer; embedding and LM head), or None where the layout is not that
    (MoE, MLA, recurrent layers, quantized weights)."""
    w = card.weights
    if card.moe is not None or card.family != "dense" or w.quantization or not w.params:
        return None
    elem = round(w.total_bytes / w.params)
    if elem != 2:
        return None
    a, tp = card.attention, max(tp, 1)
    heads, kv = a.num_heads / tp, max(a.num_kv_heads / tp, 1)
    inter = card.mlp_width / tp
    h = card.hidden_size
    layer = [
        int((heads + 2 * kv) * a.head_dim * h * elem),
        int(h * heads * a.head_dim * elem),
        int(2 * inter * h * elem),
        int(h * inter * elem),
    ]
    vocab = [int((card.vocab_size or 0) / tp * h * elem)] * 2
    return layer * card.num_layers + vocab


def allocator_rounding_bytes(blocks: list[int], round_mib: float, large_mib: float) -> float:
    """What the caching allocator holds beyond `blocks`: each block of at least `large_mib` is rounded up to a
    multiple of `round_mib`, and the remainder stays inside a segment the parameter keeps alive."""
    if round_mib <= 0:
        return 0.0
    unit, large = round_mib * MIB, large_mib * MIB
    return float(sum(math.ceil(b / unit) * unit - b for b in blocks if b >= large))


def weight_load_overhead(model: LoadOverheadModel, card: ModelCard, tp: int) -> tuple[float, float, float, str]:
    """(rotary cache GiB, allocator rounding GiB, total GiB, how) for one rank."""
    rope = (card.max_position_embeddings or 0) * card.attention.head_dim * model.rope_cache_bytes_per_element / GIB
    blocks = dense_rank_blocks(card, tp)
    rounding = (
        allocator_rounding_bytes(blocks, model.allocator_round_mib, model.allocator_large_mib) / GIB
        if blocks is not None
        else 0.0
    )
    how = (
        f"rotary cache {rope:.3f} + allocator rounding {rounding:.3f}"
        + ("" if blocks is not None else " (not modelled: not a dense 16-bit layout)")
        + f" + {model.base_gib:g} GiB fitted"
    )
    return rope, rounding, rope + rounding + model.base_gib, how


class ModelledOverheads(BaseModel):
    """Overheads from the profile's model, with the drivers and the band that produced them."""

    band: str
    version: str
    default_fraction: float | None
    activation_gib: float
    non_torch_gib: float
    cuda_graph_gib: float
    profile_tokens: int
    sampler_seqs: int
    sampler_gib: float
    forward_gib: float
    baseline_held_gib: float | None = Field(
        default=None,
        description="held when the engine takes its free-memory "
        "baseline (context, distributed init); None: the profile's CUDA context",
    )
    weight_load_gib: float = Field(
        default=0.0, description="held by the weight load beyond the parameter bytes (included in non_torch_gib)"
    )
    sources: dict[str, str] = Field(default_factory=dict)


def model_overheads(
    profile: EngineProfile,
    card: ModelCard,
    *,
    version: str | None,
    tp: int,
    seqs: int | None,
    batched_tokens: int | None,
    max_model_len: int,
    eager: bool = False,
) -> ModelledOverheads | None:
    """Activation, non-torch and CUDA-graph memory for one instance, or None when the profile has no model."""
    band, label = band_for(profile, version)
    if band is None:
        return None
    act = band.activation
    tokens = batched_tokens or 2048
    sampler = forward = activation = 0.0
    seq_count = 0
    if act is not None:
        if act.profile_tokens == "max_model_len_unless_chunked":
            chunked = act.chunked_above is not None and max_model_len > act.chunked_above
            tokens = (act.chunked_tokens or tokens) if chunked else max(max_model_len, batched_tokens or 0)
        seq_count = min(seqs or 256, tokens)
        vocab = card.vocab_size or 0
        sampler = sampler_bytes_per_seq_vocab(act.sampler_bytes_per_seq_vocab, seq_count) * seq_count * vocab / GIB
        width = card.hidden_size + 3 * card.mlp_width / max(tp, 1)
        forward = act.forward_bytes_per_token_element * tokens * width / GIB
        activation = act.base_gib + (max(sampler, forward) if act.sampler_combines == "max" else sampler + forward)
    # a pool sized from free memory at start leaves activations outside it (SGLang): the profile's flat entry says so
    outside = act is None and profile.memory.budget == "fraction_of_free_at_start"
    flat_activation = profile.memory.overheads.get("activation_peak") if outside else None
    if flat_activation is not None:
        activation = flat_activation.gib
    keys = sorted(k for k in band.non_torch_gib_by_tp if k <= tp)
    non_torch = band.non_torch_gib_by_tp[keys[-1]] if keys else 0.0
    graph = band.cuda_graph_gib if band.cuda_graph_subtracted and not eager else 0.0
    cite = f"{profile.name} {band.versions} overhead model ({band.source})"
    missing = f"not modelled by the {profile.name} {band.versions} overhead band: counted as 0"
    held_keys = sorted(k for k in band.baseline_held_gib_by_tp if k <= tp)
    held = band.baseline_held_gib_by_tp[held_keys[-1]] if held_keys else None
    load, load_how = 0.0, ""
    if band.weight_load is not None:
        _, _, load, load_how = weight_load_overhead(band.weight_load, card, tp)
        load = round(load, 3)
    non_torch_source = (
        (f"{cite}: TP={tp}" if keys else missing)
        if band.weight_load is None
        else (f"{cite}: memory the weight load holds beyond the parameter bytes = {load_how}")
    )
    return ModelledOverheads(
        band=band.versions,
        version=label,
        default_fraction=band.default_fraction,
        activation_gib=round(activation, 3),
        non_torch_gib=round(non_torch + load, 3),
        cuda_graph_gib=graph,
        profile_tokens=tokens,
        sampler_seqs=seq_count,
        sampler_gib=round(sampler, 3),
        forward_gib=round(forward, 3),
        baseline_held_gib=held,
        weight_load_gib=load,
        sources={
            "activation_peak": f"{cite}: max(sampler {sampler:.2f}, forward {forward:.2f}) + base at "
            f"{seq_count} seqs x {card.vocab_size} vocab, {tokens} tokens"
            if act is not None
            else flat_activation.source
            if flat_activation is not None
            else missing,
            "non_torch": non_torch_source,
            "cuda_graph": f"{cite}: "
            + (
                "estimate subtracted"
                if graph
                else "not subtracted by this version"
                if not band.cuda_graph_subtracted
                else "eager mode, no graphs"
            ),
        },
    )
