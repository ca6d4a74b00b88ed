"""Compiled engines: a TensorRT-LLM engine directory is read as an engine built for one GPU architecture, `hw diff`
says a host of another architecture cannot run it (exit 1), and the format matrix knows no other engine loads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from switchover.cli.app import app
from switchover.engines.compiled import read_compiled_engine
from switchover.engines.formats import load_matrix, lookup
from switchover.errors import BadInput, SwitchoverError
from switchover.hardware.diff import compiled_findings
from switchover.hardware.fingerprint import HostFingerprint, fingerprint_from_catalog
from switchover.model import load_model_card
from tests.plan import configs as C

runner = CliRunner()


def _engine_dir(
    tmp: Path, tp: int = 1, pp: int = 1, ranks: list[int] | None = None, pretrained: dict[str, Any] | None = None
) -> Path:
    """A directory as trtllm-build writes it: config.json (version, pretrained_config, build_config), rankN.engine."""
    folder = tmp / "engine"
    folder.mkdir()
    cfg = {
        "version": "0.21.0",
        "pretrained_config": pretrained
        if pretrained is not None
        else {
            "architecture": "LlamaForCausalLM",
            "dtype": "bfloat16",
            "quantization": {"quant_algo": "FP8"},
            "mapping": {"world_size": tp * pp, "tp_size": tp, "pp_size": pp},
        },
        "build_config": {"max_batch_size": 64, "max_seq_len": 8192, "plugin_config": {}},
    }
    (folder / "config.json").write_text(json.dumps(cfg))
    for r in range(tp * pp) if ranks is None else ranks:
        (folder / f"rank{r}.engine").write_bytes(b"\0" * 16)
    return folder


def _code(argv: list[str]) -> tuple[int, str]:
    res = runner.invoke(app, argv)
    if isinstance(res.exception, SwitchoverError):
        return int(res.exception.exit_code), res.stdout + res.exception.message
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.stdout


def test_an_engine_directory_is_read_with_its_version_layout_and_ranks(tmp_path: Path) -> None:
    e = read_compiled_engine(_engine_dir(tmp_path, tp=2))
    assert e is not None and e.format == "trtllm-engine"
    assert (e.version, e.architecture, e.dtype, e.quant_algo) == ("0.21.0", "LlamaForCausalLM", "bfloat16", "FP8")
    assert (e.world_size, e.tp_size, e.pp_size) == (2, 2, 1)
    assert e.rank_files == ["rank0.engine", "rank1.engine"] and e.missing_ranks == []


def test_a_checkpoint_or_a_missing_path_is_not_a_compiled_engine(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(C.LLAMA_8B))
    assert read_compiled_engine(tmp_path) is None
    assert read_compiled_engine(tmp_path / "nope") is None
    assert read_compiled_engine("meta-llama/Llama-3.1-8B-Instruct") is None


def test_a_malformed_engine_config_is_bad_input_naming_the_field(tmp_path: Path) -> None:
    folder = tmp_path / "e"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"pretrained_config": [1], "build_config": {}}))
    with pytest.raises(BadInput, match="pretrained_config and build_config must be objects"):
        read_compiled_engine(folder)


@pytest.mark.parametrize(
    ("a", "b", "status", "words"),
    [
        ("H100-80G", "A100-80G", "fails", "built on A (sm90) does not run on B (sm80)"),
        ("A100-80G", "H100-80G", "fails", "(sm80) does not run on B (sm90)"),
        ("H100-80G", "H100-80G", "runs", "same GPU architecture (sm90)"),
    ],
)
def test_an_engine_runs_only_on_the_gpu_architecture_it_was_built_on(
    tmp_path: Path, a: str, b: str, status: str, words: str
) -> None:
    engine = read_compiled_engine(_engine_dir(tmp_path))
    assert engine is not None
    (finding,) = compiled_findings(engine, fingerprint_from_catalog(a, 1), fingerprint_from_catalog(b, 1))
    assert finding.status == status and words in finding.message
    assert any("support-matrix" in s for s in finding.sources) and any("builder.py" in s for s in finding.sources)


def test_missing_rank_files_fewer_gpus_and_no_gpu_fail(tmp_path: Path) -> None:
    engine = read_compiled_engine(_engine_dir(tmp_path, tp=2, pp=2, ranks=[0, 1, 3]))
    assert engine is not None and engine.missing_ranks == [2]
    found = compiled_findings(engine, fingerprint_from_catalog("H100-80G", 4), fingerprint_from_catalog("H100-80G", 2))
    messages = [f.message for f in found if f.status == "fails"]
    assert any("rank2.engine are missing" in m for m in messages)
    assert any("built for 4 GPU(s) (TP 2 x PP 2); B has 2" in m for m in messages)
    cpu = HostFingerprint(gpu_present=False, reason="no NVIDIA driver")
    assert any(
        f.status == "fails" and "no GPU" in f.message
        for f in compiled_findings(engine, fingerprint_from_catalog("H100-80G", 4), cpu)
    )


def test_hw_diff_exits_1_when_b_cannot_run_the_engine_and_0_when_it_can(tmp_path: Path) -> None:
    folder = _engine_dir(tmp_path)
    code, out = _code(["hw", "diff", "catalog:H100-80G", "catalog:A100-80G", "-m", str(folder)])
    assert code == 1 and "FAILS: compiled engine" in out and "rebuild it on" in out
    code, out = _code(["hw", "diff", "catalog:H100-80G", "catalog:H100-80Gx2", "-m", str(folder), "--json"])
    assert code == 0 and json.loads(out)["compiled"][0]["status"] == "runs"


def test_the_format_matrix_knows_compiled_engines_and_which_engines_load_them() -> None:
    spec = load_matrix().formats["trtllm-engine"]
    assert spec.compiled is not None and "rank<N>.engine" in spec.compiled.layout
    assert lookup("trtllm", "trtllm-engine", "cuda", 90).loads is True
    for engine in ("sglang", "llamacpp", "vllm"):
        verdict = lookup(engine, "trtllm-engine", "cuda", 90)
        assert verdict.loads is False and verdict.source
    assert lookup("tgi", "trtllm-engine", "cuda", 90).loads is None  # not in the data: unknown, never a guess


def test_planning_on_an_engine_directory_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="a compiled TensorRT-LLM engine, not a checkpoint"):
        load_model_card(_engine_dir(tmp_path))
