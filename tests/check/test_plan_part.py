"""`check`'s plan part sizes the new engine as the old launch ran: its TP, PP, max length and sequence cap, its memory
knob converted to the new engine's meaning, at the release the migration file pins, each input saying where it
came from (issue 21: TP 1 and the model's full context gave a spurious NO-GO)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from switchover.check.parts import plan_part
from switchover.config import Migration
from switchover.config.check import CheckSection
from switchover.engines import load_profile
from switchover.model import card_from_config
from switchover.plan.capacity import capacity
from tests.plan import configs as C

LLAMA_70B: dict[str, Any] = dict(  # meta-llama/Llama-3.3-70B-Instruct
    architectures=["LlamaForCausalLM"],
    model_type="llama",
    num_hidden_layers=80,
    num_attention_heads=64,
    num_key_value_heads=8,
    hidden_size=8192,
    intermediate_size=28672,
    vocab_size=128256,
    max_position_embeddings=131072,
    torch_dtype="bfloat16",
)


def _section(m: Migration) -> CheckSection:
    assert m.check is not None
    return m.check


def _migration(
    tmp_path: Path,
    config: dict[str, Any],
    launch: str | None,
    *,
    new: str = "sglang",
    version: str | None = None,
    gpu: str = "H100-80G",
) -> Migration:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps(config))
    new_side: dict[str, Any] = {"url": "http://127.0.0.1:8002", "engine": new}
    if version:
        new_side["engine_version"] = version
    plan: dict[str, Any] = {"model_dir": str(model), "gpu": gpu}
    if launch:
        plan["old_launch"] = launch
    return Migration.model_validate(
        {"old": {"url": "http://127.0.0.1:8001", "engine": "vllm"}, "new": new_side, "check": {"plan": plan}}
    )


def test_the_old_launchs_tp_and_max_length_size_the_new_engine(tmp_path: Path) -> None:
    """A 70B served with TP 4 at 8K: at TP 1 and 131K it cannot start (the spurious NO-GO); as launched it fits."""
    m = _migration(
        tmp_path,
        LLAMA_70B,
        "vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size 4 --max-model-len 8192",
    )
    ev = plan_part(m, _section(m), tmp_path)
    assert ev.capacity is not None
    assert (ev.capacity.tp, ev.capacity.max_model_len, ev.capacity.context) == (4, 8192, 8192)
    assert ev.capacity.instance.starts and ev.capacity.max_concurrency >= 1
    naive = capacity(card_from_config(LLAMA_70B), load_profile("sglang"), 79.18, gpu_name="H100-80G")
    assert not naive.instance.starts or naive.max_concurrency < 1  # what the part used to judge
    assert "old launch: --tensor-parallel-size" in ev.capacity.input_sources["tp"]
    assert "old launch: --max-model-len" in ev.capacity.input_sources["max_model_len"]
    assert any(n.startswith("capacity input tp: 4") for n in ev.notes)


def test_without_an_old_launch_the_part_says_its_sizes_are_defaults(tmp_path: Path) -> None:
    m = _migration(tmp_path, C.LLAMA_8B, None)
    ev = plan_part(m, _section(m), tmp_path)
    assert ev.capacity is not None and ev.capacity.tp == 1 and ev.capacity.max_model_len == 131072
    assert "no tensor parallelism" in ev.capacity.input_sources["tp"]
    assert "newest known" in ev.capacity.input_sources["engine release"]


def test_the_pinned_new_release_picks_its_overhead_band(tmp_path: Path) -> None:
    m = _migration(tmp_path, C.LLAMA_8B, "vllm serve m --max-model-len 16000", new="vllm", version="0.11.0")
    ev = plan_part(m, _section(m), tmp_path)
    assert ev.capacity is not None and ev.capacity.overhead_model is not None
    assert ev.capacity.overhead_model.band == ">=0.8,<0.19"
    assert ev.capacity.input_sources["engine release"] == "vllm 0.11.0 (new.engine_version)"


def test_a_same_engine_memory_knob_is_copied_and_another_engines_is_converted(tmp_path: Path) -> None:
    launch = "vllm serve m --gpu-memory-utilization 0.8 --max-model-len 8192"
    same = _migration(tmp_path, C.LLAMA_8B, launch, new="vllm")
    ev = plan_part(same, _section(same), tmp_path)
    assert ev.capacity is not None and ev.capacity.instance.fraction_used == pytest.approx(0.8)
    other = _migration(tmp_path, C.LLAMA_8B, launch, new="sglang")
    conv = plan_part(other, _section(other), tmp_path)
    assert conv.capacity is not None
    assert conv.capacity.instance.kv_pool_gib == pytest.approx(ev.capacity.instance.kv_pool_gib, rel=0.01)
    assert "gives the same in sglang" in conv.capacity.input_sources["memory knob"]
