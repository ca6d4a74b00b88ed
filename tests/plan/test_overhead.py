"""The overhead model: version bands, the sampler/forward activation peak, non-torch by TP, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from switchover.engines import load_profile
from switchover.errors import BadInput
from switchover.model import card_from_config
from switchover.plan.capacity import capacity
from switchover.plan.overhead import (
    allocator_rounding_bytes,
    band_for,
    dense_rank_blocks,
    model_overheads,
    newest_known,
    parse_version,
    resolve_version,
    sampler_bytes_per_seq_vocab,
    version_matches,
    weight_load_overhead,
)
from tests.plan import configs as C

H100 = 79.18
BENCH = Path(__file__).resolve().parents[2] / "bench" / "data"


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("0.11.2rc1", (0, 11, 2)), ("vLLM 0.33.0 (PyPI wheel)", (0, 33, 0)), ("", None), ("main", None)],
)
def test_versions_are_parsed_from_their_leading_number(text: str, parsed: tuple[int, ...] | None) -> None:
    assert parse_version(text) == parsed


def test_version_specs_compare_numerically_not_as_text() -> None:
    assert version_matches(">=0.8,<0.21", (0, 11, 0))
    assert not version_matches(">=0.8,<0.21", (0, 21))
    assert version_matches("<0.8", (0, 7, 3))
    with pytest.raises(ValueError):
        version_matches("~=0.8", (0, 8))


def test_vllm_bands_pick_v0_v1_and_graph_estimate_by_version() -> None:
    vllm = load_profile("vllm")
    v0, _ = band_for(vllm, "0.6.4")
    v1, _ = band_for(vllm, "0.11.0")
    graphs, _ = band_for(vllm, "0.25.1")
    latest, label = band_for(vllm, None)  # the newest release known
    assert v0 is not None and v0.activation is not None
    assert v0.activation.profile_tokens == "max_model_len_unless_chunked"
    assert v1 is not None and not v1.cuda_graph_subtracted and v1.default_fraction == 0.9
    assert graphs is not None and graphs.cuda_graph_subtracted
    assert latest is not None and latest.default_fraction == 0.92 and label == newest_known(vllm)


def test_the_newest_known_release_is_the_newest_read_else_the_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    from switchover.engines import compat
    from switchover.engines.releases import EngineReleases

    vllm = load_profile("vllm")
    monkeypatch.setattr(compat, "load_releases", lambda engine: None)
    assert newest_known(vllm) == "0.33.0"  # version_read: '0.33.0 (PyPI wheel, ...)'
    assert newest_known(load_profile("trtllm")) is None  # read from mixed commits: no release to name
    read = EngineReleases.model_construct(releases=[type("R", (), {"version": v})() for v in ("0.6.3", "0.34.0")])
    monkeypatch.setattr(compat, "load_releases", lambda engine: read)
    assert newest_known(vllm) == "0.34.0"
    said = resolve_version(vllm, None)
    assert said.version == "0.34.0"
    assert "no vllm version given: 0.34.0, the newest known, is assumed" in (said.note or "")
    newer = resolve_version(vllm, "0.40.0")
    assert newer.band == ">=0.32" and "newer than the newest release known (0.34.0)" in (newer.note or "")
    with pytest.raises(BadInput, match="vllm version"):
        resolve_version(vllm, "latest")


def test_sampler_coefficient_interpolates_in_log_space_and_clamps() -> None:
    table = {256: 16.0, 1024: 36.0}
    assert sampler_bytes_per_seq_vocab(table, 512) == pytest.approx(26.0)
    assert sampler_bytes_per_seq_vocab(table, 8) == 16.0
    assert sampler_bytes_per_seq_vocab(table, 4096) == 36.0


def test_v011_activation_scales_with_vocab_not_model_size() -> None:
    """llm-d H100 logs: Qwen3-0.6B and Qwen3-32B both ~5.6 GiB (vocab 151,936), Llama-3.1-8B 4.76 (128,256)."""
    vllm = load_profile("vllm")
    args = dict(version="0.11.0", tp=1, seqs=1024, batched_tokens=8192, max_model_len=16000)
    small = model_overheads(vllm, card_from_config(C.QWEN3_06B), **args)
    big = model_overheads(
        vllm,
        card_from_config({**C.QWEN3_06B, "num_hidden_layers": 64, "hidden_size": 5120, "intermediate_size": 25600}),
        **args,
    )
    llama = model_overheads(vllm, card_from_config(C.LLAMA_8B), **args)
    assert small and big and llama
    assert small.activation_gib == pytest.approx(5.56, abs=0.1) and big.activation_gib == pytest.approx(5.64, abs=0.1)
    assert llama.activation_gib == pytest.approx(4.76, abs=0.05)
    assert llama.non_torch_gib == 0.13 and llama.cuda_graph_gib == 0.0


def test_v0_activation_grows_with_max_model_len_until_chunked_prefill() -> None:
    """vllm#10517: 2.07 GiB at 20,000 tokens, 2.99 at 29,000; above 32K chunked prefill caps the profile."""
    vllm = load_profile("vllm")
    card = card_from_config(C.LLAMA_8B)
    at = {
        mml: model_overheads(vllm, card, version="0.6.4", tp=1, seqs=256, batched_tokens=None, max_model_len=mml)
        for mml in (20000, 29000, 35000)
    }
    assert at[20000] and at[29000] and at[35000]
    assert at[20000].activation_gib == pytest.approx(2.07, rel=0.05)
    assert at[29000].activation_gib == pytest.approx(2.99, rel=0.05)
    assert at[35000].activation_gib < at[20000].activation_gib


def test_non_torch_memory_grows_past_tp1() -> None:
    vllm = load_profile("vllm")
    card = card_from_config(C.LLAMA_8B)
    one = model_overheads(vllm, card, version="0.11.0", tp=1, seqs=1024, batched_tokens=8192, max_model_len=8192)
    eight = model_overheads(vllm, card, version="0.11.0", tp=8, seqs=1024, batched_tokens=8192, max_model_len=8192)
    assert one and eight and eight.non_torch_gib > one.non_torch_gib


def test_eager_mode_subtracts_no_cuda_graph_estimate() -> None:
    vllm = load_profile("vllm")
    card = card_from_config(C.LLAMA_8B)
    graphs = model_overheads(vllm, card, version="0.25.0", tp=1, seqs=1024, batched_tokens=8192, max_model_len=8192)
    eager = model_overheads(
        vllm, card, version="0.25.0", tp=1, seqs=1024, batched_tokens=8192, max_model_len=8192, eager=True
    )
    assert graphs and eager and graphs.cuda_graph_gib > 0 and eager.cuda_graph_gib == 0


def test_blind_llama8b_h100_v011_reproduces_the_logged_pool() -> None:
    res = capacity(
        card_from_config(C.LLAMA_8B),
        load_profile("vllm"),
        H100,
        gpu_name="H100-80G",
        max_model_len=16000,
        engine_version="0.11.0",
    )
    assert res.instance.kv_pool_gib == pytest.approx(51.38, rel=0.01)
    assert res.overhead_model is not None and res.overhead_model.sampler_seqs == 1024
    assert "estimated" in res.weights_source


def test_vllm_refuses_when_one_request_does_not_fit_the_pool() -> None:
    """llm-d: Qwen3-32B at max_model_len 32000 on one H100 fails; at 16000 it starts."""
    card = card_from_config(
        {
            **C.QWEN3_06B,
            "num_hidden_layers": 64,
            "num_attention_heads": 64,
            "hidden_size": 5120,
            "intermediate_size": 25600,
            "tie_word_embeddings": False,
        }
    )
    ok = capacity(card, load_profile("vllm"), H100, gpu_name="H100-80G", max_model_len=16000, engine_version="0.11")
    no = capacity(card, load_profile("vllm"), H100, gpu_name="H100-80G", max_model_len=32000, engine_version="0.11")
    assert ok.instance.starts
    assert not no.instance.starts and "refuses to start" in (no.instance.problem or "")


def test_sglang_does_not_refuse_a_small_pool_it_caps_requests() -> None:
    card = card_from_config(C.LLAMA_8B)
    res = capacity(card, load_profile("sglang"), 24.0, max_model_len=131072, weights_gib=14.99)
    assert res.instance.starts and res.kv_concurrency < 1


def test_sglang_free_memory_defaults_to_total_less_the_cuda_context() -> None:
    card = card_from_config(C.LLAMA_8B)
    sglang = load_profile("sglang")
    default = capacity(card, sglang, H100, max_model_len=8192, weights_gib=14.99)
    given = capacity(card, sglang, H100, max_model_len=8192, weights_gib=14.99, free_gib=H100 - 10)
    assert default.instance.free_at_start_gib == pytest.approx(H100 - 0.61)
    assert given.instance.kv_pool_gib < default.instance.kv_pool_gib


def test_gpu_memory_without_a_name_warns_that_the_tier_is_assumed() -> None:
    res = capacity(card_from_config(C.LLAMA_8B), load_profile("vllm"), 79.15, max_model_len=8192)
    assert any("name it with --gpu" in w for w in res.warnings)
    named = capacity(card_from_config(C.LLAMA_8B), load_profile("vllm"), 79.15, gpu_name="A100-80G", max_model_len=8192)
    assert not any("name it with --gpu" in w for w in named.warnings)
    assert named.limits["max_num_seqs"] == 256  # A100 sits in vLLM's 'other' tier


def test_calibration_and_evaluation_points_stay_apart() -> None:
    """Every point a band was fitted on is marked calibration, and no evaluation point was fitted on."""
    points = yaml.safe_load((BENCH / "plan_points.yaml").read_text())["points"]
    by_id = {p["id"]: p for p in points}
    assert len(by_id) == len(points), "duplicate point ids"
    fitted = {
        pid
        for name in ("vllm", "sglang", "trtllm")
        for band in load_profile(name).memory.overhead_model
        for pid in band.fitted_on
    }
    assert fitted <= set(by_id), f"fitted on unknown points: {sorted(fitted - set(by_id))}"
    assert {pid for pid in fitted if by_id[pid]["set"] != "calibration"} == set()
    derived = {p["id"] for p in points if p.get("calibrates")}
    assert {p["id"] for p in points if p["set"] == "calibration"} == fitted | derived
    assert all(by_id[pid]["set"] == "calibration" for pid in derived)
    for p in points:
        assert p["link"].startswith("https://"), p["id"]
        assert p["set"] in ("calibration", "evaluation"), p["id"]


def test_a_pool_without_evaluated_points_says_its_range_is_not_measured() -> None:
    from switchover.plan.uncertainty import residual_key

    card = card_from_config(C.LLAMA_8B)
    measured = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "src" / "switchover" / "plan" / "data" / "accuracy.yaml").read_text()
    )["engines"]
    assert residual_key("trtllm", True) not in measured  # no blind TensorRT-LLM point in the evaluation set
    trtllm = capacity(card, load_profile("trtllm"), H100, max_model_len=8192, weights_gib=14.99)
    assert trtllm.range is None and "not measured" in (trtllm.range_missing or "")
    vllm = capacity(card, load_profile("vllm"), H100, gpu_name="H100-80G", max_model_len=8192)
    assert vllm.range is not None and vllm.range_missing is None


def test_an_explicit_pool_has_no_range_and_says_why() -> None:
    from switchover.plan.capacity import Knobs

    res = capacity(
        card_from_config(C.LLAMA_8B), load_profile("vllm"), H100, max_model_len=8192, knobs=Knobs(kv_pool_gib=10.0)
    )
    assert res.range is None and "explicitly" in (res.range_missing or "")


def test_an_engine_version_without_an_overhead_band_is_said_not_ignored() -> None:
    res = capacity(
        card_from_config(C.LLAMA_8B),
        load_profile("sglang"),
        H100,
        max_model_len=8192,
        weights_gib=14.99,
        engine_version="0.3.6",
    )
    assert res.overhead_model is None
    assert any("no overhead model" in w for w in res.warnings)


def test_a_band_without_activation_or_non_torch_data_warns_instead_of_a_silent_zero() -> None:
    vllm = load_profile("vllm")
    bands = [b.model_copy(update={"activation": None, "non_torch_gib_by_tp": {}}) for b in vllm.memory.overhead_model]
    bare = vllm.model_copy(update={"memory": vllm.memory.model_copy(update={"overhead_model": bands})})
    res = capacity(
        card_from_config(C.LLAMA_8B), bare, H100, gpu_name="H100-80G", max_model_len=8192, engine_version="0.11.0"
    )
    assert res.overheads.activation_peak_gib == 0 and res.overheads.non_torch_gib == 0
    assert any("activation_peak overhead is not modelled" in w for w in res.warnings)
    assert any("non_torch overhead is not modelled" in w for w in res.warnings)


def test_a_version_of_thousands_of_digits_is_no_version_not_a_crash() -> None:
    assert parse_version("1" * 5000) is None
    assert parse_version("vllm " + "9" * 20 + " build 0.11.2") == (0, 11, 2)


def test_an_overhead_band_whose_version_spec_cannot_be_read_is_refused_when_the_profile_loads() -> None:
    from pydantic import ValidationError

    from switchover.engines.profile import OverheadBand

    with pytest.raises(ValidationError, match="bad version clause"):
        OverheadBand(versions="~=0.8", source="x")


@pytest.mark.parametrize(("mib", "held_mib"), [(12.5, 1.5), (17.5, 0.5), (135.0, 1.0), (136.0, 0.0), (8.0, 0.0)])
def test_the_caching_allocator_rounds_large_parameter_blocks_to_2_mib(mib: float, held_mib: float) -> None:
    """Blocks of 10 MiB or more are rounded up to 2 MiB; smaller ones share segments (not counted)."""
    assert allocator_rounding_bytes([int(mib * 2**20)], 2, 10) == pytest.approx(held_mib * 2**20)
    assert allocator_rounding_bytes([int(mib * 2**20)], 0, 10) == 0


def test_rank_blocks_exist_for_dense_16_bit_layouts_only() -> None:
    blocks = dense_rank_blocks(card_from_config(C.QWQ_32B), 4)
    assert blocks is not None and len(blocks) == 64 * 4 + 2
    assert blocks[:4] == [(10 + 2 * 2) * 128 * 5120 * 2, 5120 * 10 * 128 * 2, 2 * 6912 * 5120 * 2, 5120 * 6912 * 2]
    assert dense_rank_blocks(card_from_config(C.QWEN3_235B), 4) is None  # MoE: other tensors


def test_sglang_04_weight_load_remainder_is_the_mean_over_its_calibration_logs() -> None:
    """The band's fitted remainder is reproduced from the logs it names: logged weight-load drop minus the
    parameter bytes, the fp32 rotary cache and the allocator rounding."""
    band = band_for(load_profile("sglang"), "0.4.3.post4")[0]
    assert band is not None and band.weight_load is not None and band.fitted_on
    points = {p["id"]: p for p in yaml.safe_load((BENCH / "plan_points.yaml").read_text())["points"]}
    configs = yaml.safe_load((BENCH / "model_configs.yaml").read_text())
    bare = band.weight_load.model_copy(update={"base_gib": 0.0})
    remainders = []
    for pid in band.fitted_on:
        point = points[pid]
        card = card_from_config(configs[point["model"]], name=point["model"])
        _, _, modelled, _ = weight_load_overhead(bare, card, point["tp"])
        params = card.weights.per_rank_bytes(point["tp"]) / 2**30
        remainders.append(point["logged"]["weights_gib"] - params - modelled)
    assert band.weight_load.base_gib == pytest.approx(sum(remainders) / len(remainders), abs=0.002)


def test_sglang_04_sizes_from_its_own_baseline_not_the_vllm_context() -> None:
    card = card_from_config(C.QWQ_32B)
    old = capacity(card, load_profile("sglang"), 22.05, tp=4, max_model_len=8192, engine_version="0.4.3.post4")
    assert old.instance.free_at_start_gib == pytest.approx(22.05 - 0.37)
    assert old.overhead_model is not None and old.overhead_model.weight_load_gib > 0.2  # TP4 rounding + rope
    assert not any("activation_peak overhead is not modelled" in w for w in old.warnings)
    new = capacity(card, load_profile("sglang"), 22.05, tp=4, max_model_len=8192)
    assert new.overhead_model is None and new.instance.free_at_start_gib == pytest.approx(22.05 - 0.61)
