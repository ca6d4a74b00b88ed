"""Memory an engine spends outside weights and KV, from what drives it (issue 12 §2-3).

The coefficients are data in the engine profile (`memory.overhead_model`, one band per range of versions), each
fitted on logged start-up points that are kept apart from the accuracy set (bench/data/plan_points.yaml):

* activation peak of the start-up profiling pass: the larger of the sampler warm-up (max_num_seqs x vocab logits
  and their sort/softmax copies) and the dummy forward (batched tokens x (hidden + 3 x MLP width / TP));
* non-torch memory (NCCL and custom all-reduce buffers, cuBLAS workspaces) by TP;
* the CUDA-graph estimate where the version subtracts it before sizing the KV pool.
"""

from __future__ import annotations

import itertools
import math

from pydantic import BaseModel, Field

from switchover.engines import EngineProfile
from switchover.engines.profile import OverheadBand
from switchover.engines.versions import parse_version, version_matches
from switchover.model.card import ModelCard

GIB = 2**30


def band_for(profile: EngineProfile, version: str | None) -> tuple[OverheadBand | None, str]:
    """The overhead band for an engine version (default: the version the profile was read from)."""
    wanted = parse_version(version) or parse_version(profile.version_read)
    if wanted is None:
        return None, "no version"
    label = ".".join(map(str, wanted))
    for band in profile.memory.overhead_model:
        if version_matches(band.versions, wanted):
            return band, label
    return None, label


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
    sources: dict[str, str] = Field(default_factory=dict)


def model_overheads(profile: EngineProfile, card: ModelCard, *, version: str | None, tp: int, seqs: int | None,
                    batched_tokens: int | None, max_model_len: int, eager: bool = False) -> ModelledOverheads | None:
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
    keys = sorted(k for k in band.non_torch_gib_by_tp if k <= tp)
    non_torch = band.non_torch_gib_by_tp[keys[-1]] if keys else 0.0
    graph = band.cuda_graph_gib if band.cuda_graph_subtracted and not eager else 0.0
    cite = f"{profile.name} {band.versions} overhead model ({band.source})"
    missing = f"not modelled by the {profile.name} {band.versions} overhead band: counted as 0"
    return ModelledOverheads(
        band=band.versions, version=label, default_fraction=band.default_fraction,
        activation_gib=round(activation, 3), non_torch_gib=non_torch, cuda_graph_gib=graph, profile_tokens=tokens,
        sampler_seqs=seq_count, sampler_gib=round(sampler, 3), forward_gib=round(forward, 3),
        sources={"activation_peak": f"{cite}: max(sampler {sampler:.2f}, forward {forward:.2f}) + base at "
                                    f"{seq_count} seqs x {card.vocab_size} vocab, {tokens} tokens"
                 if act is not None else missing,
                 "non_torch": f"{cite}: TP={tp}" if keys else missing,
                 "cuda_graph": f"{cite}: " + ("estimate subtracted" if graph else
                                              "not subtracted by this version" if not band.cuda_graph_subtracted
                                              else "eager mode, no graphs")})
