"""LoRA on the real engines: a rank-4 PEFT adapter for the bed's tiny-llama is written here (q_proj/v_proj, zero B
so outputs do not change), converted to GGUF with the bed's llama.cpp convert_lora_to_gguf.py, and mounted. The
`lora.adapters` probe reads what each engine has mounted, and the run-time semantics of engines/data/matrix/lora.yaml
are exercised: vLLM mounts a second adapter through /v1/load_lora_adapter (VLLM_ALLOW_RUNTIME_LORA_UPDATING=1) and
serves a request that names it; llama-server only changes the scale of an adapter it loaded at start-up."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from switchover.probe.catalog.lora import adapters
from switchover.probe.context import ProbeContext
from switchover.subproc import stop
from switchover.testbed import processes
from switchover.testbed.install import installed
from switchover.testbed.layout import Layout, bed_models
from switchover.testing import missing
from switchover.wire import EngineClient
from switchover.wire.readiness import check_ready

pytestmark = pytest.mark.engines
RANK = 4


def _peft_adapter(folder: Path, hf_dir: Path) -> Path:
    """A PEFT LoRA adapter for the model in `hf_dir`: lora_A random, lora_B zero (a no-op on the outputs)."""
    cfg = json.loads((hf_dir / "config.json").read_text())
    hidden, heads, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or hidden // heads
    rng = np.random.default_rng(0)
    tensors: dict[str, np.ndarray] = {}
    for i in range(cfg["num_hidden_layers"]):
        p = f"base_model.model.model.layers.{i}.self_attn."
        for proj, out in (("q_proj", heads * head_dim), ("v_proj", kv * head_dim)):
            tensors[f"{p}{proj}.lora_A.weight"] = (rng.standard_normal((RANK, hidden)) * 0.01).astype(np.float32)
            tensors[f"{p}{proj}.lora_B.weight"] = np.zeros((out, RANK), np.float32)
    folder.mkdir(parents=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(
        json.dumps(
            {
                "peft_type": "LORA",
                "r": RANK,
                "lora_alpha": 2 * RANK,
                "target_modules": ["q_proj", "v_proj"],
                "lora_dropout": 0.0,
                "bias": "none",
                "task_type": "CAUSAL_LM",
                "base_model_name_or_path": str(hf_dir),
                "fan_in_fan_out": False,
                "use_rslora": False,
            }
        )
    )
    return folder


def _ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"engine exited {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        if asyncio.run(check_ready(url, max_ms=20000, connect_timeout_s=0.5)).ready:
            return
        time.sleep(0.5)
    pytest.fail(f"engine not ready in {timeout_s:.0f} s: {log.read_text(errors='replace')[-2000:]}")


async def _probe(url: str, model: str) -> Any:
    async with EngineClient(url) as client:
        return await adapters(ProbeContext(client=client, model=model))


async def _request(url: str, method: str, path: str, body: Any = None) -> tuple[int | None, Any]:
    async with EngineClient(url) as client:
        res = await client.request(method, path, json_body=body, timeout=60)
        try:
            return res.status, res.json()
        except ValueError:
            return res.status, res.body[:200]


@pytest.fixture(scope="module")
def layout() -> Layout:
    lay = Layout.default()
    gaps = installed(lay)
    if gaps:
        missing(f"test bed missing: {'; '.join(gaps)}")
    return lay


def test_llama_server_lists_its_start_up_adapter_and_only_rescales_it(layout: Layout, tmp_path: Path) -> None:
    model = bed_models(layout)["tiny"]
    peft = _peft_adapter(tmp_path / "tiny-sql", model.hf_dir)
    gguf = tmp_path / "tiny-sql.gguf"
    conv = subprocess.run(
        [
            str(layout.vllm_python),
            str(layout.llama_src / "convert_lora_to_gguf.py"),
            str(peft),
            "--base",
            str(model.hf_dir),
            "--outfile",
            str(gguf),
            "--outtype",
            "f32",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert conv.returncode == 0 and gguf.is_file(), conv.stderr[-2000:]
    port = processes.free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "llama.log"
    cmd = [*processes.llama_command(layout, model, port), "--lora-scaled", f"{gguf}:0.5"]
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    try:
        _ready(url, proc, 60, log)
        obs = asyncio.run(_probe(url, model.served_name))
        assert obs.status == "observed" and obs.value == ["tiny-sql"], obs
        assert obs.detail["listing"] == "/lora-adapters" and obs.detail["scales"] == {"tiny-sql": 0.5}
        status, _ = asyncio.run(_request(url, "POST", "/lora-adapters", [{"id": 0, "scale": 0.0}]))
        assert status == 200
        status, body = asyncio.run(_request(url, "GET", "/lora-adapters"))
        assert status == 200 and body[0]["scale"] == 0.0  # a scale changes at run time; no route loads a new file
        status, _ = asyncio.run(
            _request(url, "POST", "/v1/load_lora_adapter", {"lora_name": "x", "lora_path": str(gguf)})
        )
        assert status != 200
    finally:
        stop(proc, grace_s=15)


def test_vllm_lists_adapters_and_mounts_one_at_run_time_when_allowed(layout: Layout, tmp_path: Path) -> None:
    model = bed_models(layout)["tiny"]
    first = _peft_adapter(tmp_path / "tiny-sql", model.hf_dir)
    second = _peft_adapter(tmp_path / "tiny-sql-b", model.hf_dir)
    port = processes.free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "vllm.log"
    cmd = [
        *processes.vllm_command(layout, model, port),
        "--enable-lora",
        "--lora-modules",
        f"tiny-sql={first}",
        "--max-lora-rank",
        "8",
        "--max-loras",
        "2",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"}
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
    try:
        _ready(url, proc, 600, log)
        obs = asyncio.run(_probe(url, model.served_name))
        assert obs.status == "observed" and obs.value == ["tiny-sql"], obs
        assert obs.detail["listing"] == "/v1/models" and obs.detail["parents"] == [model.served_name]
        status, body = asyncio.run(
            _request(url, "POST", "/v1/load_lora_adapter", {"lora_name": "tiny-sql-b", "lora_path": str(second)})
        )
        assert status == 200, body
        assert asyncio.run(_probe(url, model.served_name)).value == ["tiny-sql", "tiny-sql-b"]
        status, body = asyncio.run(
            _request(url, "POST", "/v1/completions", {"model": "tiny-sql-b", "prompt": "Hello", "max_tokens": 2})
        )
        assert status == 200 and body["model"] == "tiny-sql-b", body
    finally:
        stop(proc, grace_s=30)
