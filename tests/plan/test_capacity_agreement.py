"""One capacity model: `plan capacity`, `plan canary`, `plan choose`, `check`'s plan part and `doctor` give the same
KV pool for the same inputs (engine and release, model, GPU, TP, context), over a table of inputs.

`python tests/plan/test_capacity_agreement.py` prints the table (verb x input -> pool tokens).
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

if __name__ == "__main__":  # run as a script from the repository root: make `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from switchover.check.parts import plan_part
from switchover.cli.app import app
from switchover.config import Migration
from switchover.config.check import CheckSection
from switchover.plan.choose_models import builtin_models
from tests.plan import configs as C


@dataclass(frozen=True)
class Case:
    """One set of planning inputs, as every verb is given them."""

    name: str
    config: dict[str, Any]
    engine: str
    version: str | None
    gpu: str
    tp: int
    context: int
    gguf: bool = False  # the checkpoint is one GGUF file (llama.cpp's format), not a config.json folder

    @property
    def ref(self) -> str:
        return f"{self.engine}@{self.version}" if self.version else self.engine


def _section(m: Migration) -> CheckSection:
    assert m.check is not None
    return m.check


def _builtin(key: str) -> dict[str, Any]:
    config: dict[str, Any] = builtin_models()[key]["config"]
    return config


CASES = [
    Case("Llama-3.1-8B", C.LLAMA_8B, "vllm", None, "H100-80G", 1, 8192),
    Case("Llama-3.1-8B", C.LLAMA_8B, "vllm", "0.6.3", "A100-80G", 1, 8192),
    Case("Llama-3.1-8B", C.LLAMA_8B, "vllm", "0.11.0", "H100-80G", 2, 16384),
    Case(
        "Llama-3.3-70B-FP8 (quantized)",
        _builtin("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic"),
        "vllm",
        "0.19.0",
        "H100-80G",
        2,
        8192,
    ),
    Case("Qwen3-235B-A22B (MoE)", C.QWEN3_235B, "vllm", "0.11.0", "H100-80G", 8, 32768),
    Case("gpt-oss-120b (MoE, mxfp4)", _builtin("openai/gpt-oss-120b"), "vllm", None, "H100-80G", 1, 8192),
    Case("Llama-3.1-8B", C.LLAMA_8B, "sglang", "0.4.6", "H100-80G", 1, 8192),
    Case("Qwen3-32B", _builtin("Qwen/Qwen3-32B"), "sglang", None, "A100-80G", 2, 32768),
    Case("Llama-3.1-8B", C.LLAMA_8B, "trtllm", None, "H100-80G", 1, 8192),
    Case("Mistral-Small-24B", C.MISTRAL_SMALL_3, "tgi", None, "A100-80G", 1, 8192),
    Case("Llama-3.1-8B (GGUF)", C.LLAMA_8B, "llamacpp", "b3216", "L4-24G", 1, 8192, gguf=True),
]
VERBS = ("plan capacity", "plan canary", "plan choose", "check plan part", "doctor")


def _cli(*argv: str) -> Any:
    res = CliRunner().invoke(app, list(argv))
    assert res.exit_code in (0, 1), (argv, res.output, res.exception)
    return json.loads(res.stdout)


def _model_dir(root: Path, case: Case) -> Path:
    """A model folder with the case's config.json, or a GGUF file with its shape (and one small tensor)."""
    folder = root / case.name.split(" ")[0]
    folder.mkdir(exist_ok=True)
    if not case.gguf:
        (folder / "config.json").write_text(json.dumps(case.config))
        return folder
    import gguf
    import numpy as np

    path, cfg = folder / "model.gguf", case.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tensor("token_embd.weight", np.zeros((16, cfg["hidden_size"]), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _check_pool(model: Path, case: Case) -> int | None:
    """`check`'s plan part: the new engine as the migration file pins it, TP and context from the old launch."""
    new: dict[str, Any] = {"url": "http://127.0.0.1:8002", "engine": case.engine}
    if case.version:
        new["engine_version"] = case.version
    launch = f"vllm serve m --tensor-parallel-size {case.tp} --max-model-len {case.context}"
    m = Migration.model_validate(
        {
            "old": {"url": "http://127.0.0.1:8001", "engine": "vllm"},
            "new": new,
            "check": {"plan": {"model_dir": str(model), "gpu": case.gpu, "old_launch": launch}},
        }
    )
    ev = plan_part(m, _section(m), model.parent)
    return ev.capacity.tokens if ev.capacity is not None else None


def pools(case: Case, root: Path) -> dict[str, int | None]:
    """Pool tokens each verb reports for the case."""
    model_path = _model_dir(root, case)
    model = str(model_path)
    common = ("-m", model, "-e", case.ref, "--gpu", case.gpu)
    cap = _cli("plan", "capacity", *common, "--tp", str(case.tp), "--max-model-len", str(case.context), "--json")
    canary = _cli(
        "plan",
        "canary",
        *common,
        "--tp",
        str(case.tp),
        "--max-model-len",
        str(case.context),
        "--context",
        str(case.context),
        "--json",
    )
    choose = _cli(
        "plan",
        "choose",
        "-m",
        model,
        "-e",
        case.ref,
        "--gpu",
        case.gpu,
        "--gpus",
        str(case.tp),
        "--context",
        str(case.context),
        "--json",
    )
    (doctor,) = _cli(
        "doctor",
        "p99-up-qps-flat",
        *common,
        "--tp",
        str(case.tp),
        "--context",
        str(case.context),
        "--max-model-len",
        str(case.context),
        "--json",
    )
    (chosen,) = [c for c in choose["engines"] if c["engine"] == case.engine]
    return {
        "plan capacity": cap["tokens"],
        "plan canary": canary["single_tokens"],
        "plan choose": chosen["capacity"]["kv_tokens"] if chosen["capacity"] else None,
        "check plan part": _check_pool(model_path, case),
        "doctor": doctor["canary"]["single_tokens"] if doctor["canary"] else None,
    }


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.ref}-{c.name.split(' ')[0]}-{c.gpu}-tp{c.tp}")
def test_every_verb_prices_the_same_pool_for_the_same_inputs(case: Case, tmp_path: Path) -> None:
    found = pools(case, tmp_path)
    assert found["plan capacity"], found
    assert found == {verb: found["plan capacity"] for verb in VERBS}


def main() -> None:
    """Print the agreement table as Markdown."""
    with tempfile.TemporaryDirectory() as tmp:
        print("| input | " + " | ".join(VERBS) + " |")
        print("|---|" + "---:|" * len(VERBS))
        for case in CASES:
            found = pools(case, Path(tmp))
            label = f"{case.name}, {case.ref}, {case.gpu}, TP={case.tp}, {case.context:,} tokens"
            print(f"| {label} | " + " | ".join(f"{found[v]:,}" if found[v] is not None else "-" for v in VERBS) + " |")


if __name__ == "__main__":
    main()
