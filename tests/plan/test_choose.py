"""`plan choose`: the ranking logic over cited facts, the six documented scenarios through the CLI (offline:
builtin configs and a GGUF written here), probe evidence, API differences, and bad input (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from switchover.cli.app import app
from switchover.errors import SwitchoverError
from switchover.plan.choose import EngineChoice, Fact, Requirements, _rank_key, catalog_hardware, choose
from switchover.plan.choose_models import builtin_models, resolve_model


def _run(*args: str) -> tuple[int, Any]:
    """(exit code as `switchover` returns it, parsed JSON or the error line)."""
    res = CliRunner().invoke(app, list(args))
    if isinstance(res.exception, SwitchoverError):  # a JSON ranking printed before exit 1 is still the output
        out = json.loads(res.stdout) if "--json" in args and res.stdout.strip() else res.exception.message
        return int(res.exception.exit_code), out
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, json.loads(res.stdout) if "--json" in args else res.stdout


def _by_engine(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["engine"]: e for e in data["engines"]}


def _facts(engine: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [f for f in engine["facts"] if f["kind"] == kind]


# ---- ranking logic ----------------------------------------------------------------------------------------------


def _choice(
    name: str, oks: list[bool | None], verified: bool = True, conc: int | None = None, diffs: int = 0
) -> EngineChoice:
    from switchover.plan.choose import CapacitySummary

    c = EngineChoice(
        engine=name,
        display_name=name,
        profile_version="x",
        loads=True,
        facts=[
            Fact(kind="feature", what=f"f{i}", ok=ok, detail="d", source="s", verified=verified)
            for i, ok in enumerate(oks)
        ],
        api_differences=[f"d{i}" for i in range(diffs)],
    )
    if conc is not None:
        c.capacity = CapacitySummary(tp=1, kv_tokens=1, max_concurrency=conc, context=1, binding="kv", starts=True)
    return c


@pytest.mark.parametrize(
    ("choices", "order"),
    [
        # a blocker sinks an engine below any number of unknowns
        ([_choice("a", [False]), _choice("b", [None, None, None])], ["b", "a"]),
        # fewer blockers first among the blocked
        ([_choice("a", [False, False]), _choice("b", [False, True])], ["b", "a"]),
        # then fewer unknowns
        ([_choice("a", [True, None]), _choice("b", [True, True])], ["b", "a"]),
        # then fewer unverified facts
        ([_choice("a", [True], verified=False), _choice("b", [True])], ["b", "a"]),
        # then fewer API differences from the clients' engine
        ([_choice("a", [True], diffs=3), _choice("b", [True], diffs=1)], ["b", "a"]),
        # then more concurrency per replica
        ([_choice("a", [True], conc=4), _choice("b", [True], conc=9)], ["b", "a"]),
    ],
)
def test_rank_is_lexicographic_over_counted_facts(choices: list[EngineChoice], order: list[str]) -> None:
    assert [c.engine for c in sorted(choices, key=_rank_key)] == order


def test_gpt_oss_kernels_differ_between_h100_and_b200() -> None:
    card, qc = resolve_model("builtin:openai/gpt-oss-120b")
    req = Requirements(context=8192)
    h100 = {c.engine: c for c in choose(card, qc, catalog_hardware("H100-80G", 1), req).engines}
    b200 = {c.engine: c for c in choose(card, qc, catalog_hardware("B200", 1), req).engines}
    assert "Triton" in (h100["vllm"].kernel or "") and "FlashInfer" in (b200["vllm"].kernel or "")
    assert h100["llamacpp"].loads is False and h100["tgi"].loads is None  # no fact: unknown, kept
    assert b200["vllm"].capacity and h100["vllm"].capacity
    assert b200["vllm"].capacity.max_concurrency > h100["vllm"].capacity.max_concurrency


def test_every_known_fact_is_cited() -> None:
    card, qc = resolve_model("builtin:Qwen/Qwen3-32B")
    result = choose(
        card,
        qc,
        catalog_hardware("H100-80G", 1),
        Requirements(
            context=8192,
            features=["structured_output", "lora", "tool_calls"],
            api_fields=["seed", "n", "stream_options.include_usage"],
        ),
    )
    for c in result.engines:
        for f in c.facts:
            assert f.ok is None or f.source, (c.engine, f)


def test_builtin_configs_cite_their_source() -> None:
    table = builtin_models()
    assert table and all(e["source"].startswith("https://huggingface.co/") and e["config"] for e in table.values())


# ---- the six documented scenarios (docs/plan.md "## plan choose") -----------------------------------------------


def test_scenario_8b_bf16_on_one_l4() -> None:
    code, data = _run(
        "plan",
        "choose",
        "-m",
        "builtin:meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "L4",
        "--context",
        "8192",
        "--concurrency",
        "4",
        "--json",
    )
    assert code == 0
    e = _by_engine(data)
    assert data["format"] == "bf16" and data["hardware"]["sm"] == 89
    assert e["llamacpp"]["loads"] is False  # safetensors: GGUF only
    assert data["engines"][-1]["engine"] in ("llamacpp", "sglang")
    assert all(f["ok"] is not None for f in _facts(e["vllm"], "concurrency"))
    assert data["engines"][0]["rank"] == 1 and data["verdicts"][data["engines"][0]["engine"]].startswith("no blocker")


def test_scenario_70b_fp8_on_two_h100() -> None:
    code, data = _run(
        "plan",
        "choose",
        "-m",
        "builtin:RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic",
        "--gpu",
        "H100-80G",
        "--gpus",
        "2",
        "--context",
        "8192",
        "--json",
    )
    assert code == 0
    e = _by_engine(data)
    assert data["format"] == "fp8"
    assert "W8A8" in e["vllm"]["kernel"] and e["vllm"]["capacity"]["tp"] == 2
    assert e["llamacpp"]["loads"] is False


@pytest.mark.parametrize(("gpu", "kernel"), [("H100-80G", "Triton"), ("B200", "FlashInfer")])
def test_scenario_gpt_oss_120b_mxfp4_h100_vs_b200(gpu: str, kernel: str) -> None:
    code, data = _run(
        "plan", "choose", "-m", "builtin:openai/gpt-oss-120b", "--gpu", gpu, "--context", "8192", "--json"
    )
    assert code == 0
    e = _by_engine(data)
    assert data["format"] == "mxfp4" and kernel in e["vllm"]["kernel"]
    assert _facts(e["tgi"], "format")[0]["ok"] is None


def _tiny_gguf(path: Path) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_embedding_length(64)
    writer.add_head_count(8)
    writer.add_head_count_kv(2)
    writer.add_context_length(2048)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tensor("token_embd.weight", np.zeros((10, 64), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_scenario_gguf_on_cpu(tmp_path: Path) -> None:
    model = _tiny_gguf(tmp_path / "tiny.gguf")
    code, data = _run("plan", "choose", "-m", str(model), "--cpu", "--feature", "tool_calls", "--json")
    assert code == 0
    assert data["format"] == "gguf" and data["hardware"]["device"] == "cpu"
    first = data["engines"][0]
    assert first["engine"] == "llamacpp" and first["loads"] is True
    e = _by_engine(data)
    assert e["vllm"]["loads"] is False and e["trtllm"]["loads"] is False
    assert _facts(first, "capacity")[0]["ok"] is None  # not modelled on CPU: said, not invented


def test_scenario_structured_output_heavy_clients() -> None:
    code, data = _run(
        "plan",
        "choose",
        "-m",
        "builtin:Qwen/Qwen3-32B",
        "--gpu",
        "H100-80G",
        "--context",
        "8192",
        "--feature",
        "structured_output",
        "--api-field",
        "response_format.json_schema",
        "--api-field",
        "stop:6",
        "--from",
        "vllm",
        "--json",
    )
    assert code == 0
    e = _by_engine(data)
    tgi_so = next(f for f in e["tgi"]["facts"] if f["what"] == "structured_output")
    assert tgi_so["ok"] is False and tgi_so["source"]
    vllm_stop = next(f for f in e["vllm"]["facts"] if f["what"] == "stop:6")
    assert vllm_stop["ok"] is False and "4" in vllm_stop["detail"]
    assert e["vllm"]["api_differences"] == [] and e["sglang"]["api_differences"]
    ranks = {x["engine"]: x["rank"] for x in data["engines"]}
    assert ranks["sglang"] < ranks["vllm"] and ranks["sglang"] < ranks["tgi"]


def test_scenario_128k_context() -> None:
    code, data = _run(
        "plan",
        "choose",
        "-m",
        "builtin:meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "H100-80G",
        "--context",
        "131072",
        "--concurrency",
        "2",
        "--json",
    )
    assert code == 0
    e = _by_engine(data)
    assert e["vllm"]["capacity"]["context"] == 131072
    assert [f["ok"] for f in _facts(e["vllm"], "concurrency")] == [True]
    code, data = _run(
        "plan",
        "choose",
        "-m",
        "builtin:meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "L4",
        "--context",
        "131072",
        "--json",
    )
    assert code == 1  # no engine can hold one 128k request on an L4: every one is blocked
    assert all(any(f["ok"] is False for f in x["facts"]) for x in data["engines"])


def test_context_beyond_the_model_is_a_blocker_for_every_engine() -> None:
    code, data = _run(
        "plan",
        "choose",
        "-m",
        "builtin:meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "H100-80G",
        "--context",
        "200000",
        "--json",
    )
    assert code == 1
    assert all(_facts(x, "context")[0]["ok"] is False for x in data["engines"])


def test_rate_target_is_unknown_not_predicted() -> None:
    code, data = _run(
        "plan",
        "choose",
        "-m",
        "builtin:meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "H100-80G",
        "--context",
        "8192",
        "--rate",
        "5",
        "--json",
    )
    assert code == 0
    assert all(_facts(x, "rate")[0]["ok"] is None for x in data["engines"])


def test_probe_report_is_evidence_for_the_probed_engines(tmp_path: Path) -> None:
    obs = {"status": "observed", "value": 1}
    result = {
        "id": "stop.count",
        "title": "t",
        "category": "c",
        "request": "r",
        "observes": "o",
        "breaking": True,
        "breaks": "b",
        "old": obs,
        "new": obs,
        "verdict": "differs",
        "breaking_difference": True,
    }
    report = {
        "old": {"url": "http://127.0.0.1:1", "engine": "vllm"},
        "new": {"url": "http://127.0.0.1:2", "engine": "llamacpp"},
        "results": [result],
    }
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(report))
    code, data = _run(
        "plan",
        "choose",
        "-m",
        "builtin:meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "H100-80G",
        "--context",
        "8192",
        "--probe",
        str(path),
        "--json",
    )
    assert code == 0
    e = _by_engine(data)
    assert (
        _facts(e["llamacpp"], "probe")[0]["ok"] is False and "stop.count" in _facts(e["llamacpp"], "probe")[0]["detail"]
    )
    assert _facts(e["vllm"], "probe")[0]["ok"] is True and not _facts(e["sglang"], "probe")


def test_table_output_names_sources() -> None:
    code, text = _run("plan", "choose", "-m", "builtin:openai/gpt-oss-120b", "--gpu", "H100-80G", "--context", "8192")
    assert code == 0
    assert "vllm 0.32.0: fused_moe" in text and "(unverified)" in text


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--gpu", "H100-80G", "--cpu"], "name the hardware once"),
        (["--feature", "telepathy", "--gpu", "H100-80G"], "telepathy"),
        (["--api-field", "logit_bias", "--gpu", "H100-80G"], "logit_bias"),
        (["--api-field", "seed:3", "--gpu", "H100-80G"], "stop"),
        (["--api-field", "stop:\u00b2", "--gpu", "H100-80G"], "stop"),  # '²'.isdigit() is True, int('²') raises
        (["--fingerprint", "catalog:H100-80Gx\u00b2"], "GPU count"),
        (["--from", "ollama", "--gpu", "H100-80G"], "ollama"),
        (["--gpus", "2", "--cpu"], "--gpus"),
        (["--gpu", "H999"], "H999"),
    ],
)
def test_bad_input_is_exit_2_naming_the_value(argv: list[str], names: str) -> None:
    code, text = _run("plan", "choose", "-m", "builtin:meta-llama/Llama-3.1-8B-Instruct", *argv)
    assert code == 2 and names in text


def test_unknown_builtin_and_bad_probe_file_through_the_console_script(tmp_path: Path) -> None:
    bad = tmp_path / "probe.json"
    bad.write_text('{"old": 3}')
    for argv in (
        ["-m", "builtin:nope/none", "--cpu"],
        ["-m", "builtin:meta-llama/Llama-3.1-8B-Instruct", "--cpu", "--probe", str(bad)],
    ):
        res = subprocess.run(
            [sys.executable, "-m", "switchover", "plan", "choose", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr and ("builtin" in res.stderr or "--probe" in res.stderr)


def test_pinned_releases_rank_only_those_engines_with_their_own_rules(tmp_path: Path) -> None:
    """-e ENGINE@VERSION: vLLM 0.6.3 loads a bitsandbytes checkpoint (0.32 does not), at 0.6.3's overhead band."""
    from tests.plan import configs as C

    (tmp_path / "config.json").write_text(
        json.dumps({**C.LLAMA_8B, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}})
    )
    code, old = _run(
        "plan", "choose", "-m", str(tmp_path), "--gpu", "H100-80G", "--context", "8192", "-e", "vllm@0.6.3", "--json"
    )
    assert code == 0, old
    (vllm,) = old["engines"]
    assert vllm["loads"] is True and vllm["engine_version"]["version"] == "0.6.3"
    assert "0.6.3" in _facts(vllm, "format")[0]["detail"]
    _, new = _run(
        "plan",
        "choose",
        "-m",
        str(tmp_path),
        "--gpu",
        "H100-80G",
        "--context",
        "8192",
        "-e",
        "vllm",
        "-e",
        "sglang",
        "--json",
    )
    assert {e["engine"] for e in new["engines"]} == {"vllm", "sglang"}  # only the engines named
    latest = _by_engine(new)["vllm"]
    assert latest["loads"] is False and "newest known" in (latest["engine_version"]["note"] or "")
    code, err = _run("plan", "choose", "-m", str(tmp_path), "--gpu", "H100-80G", "-e", "vllm", "-e", "vllm@0.6.3")
    assert code == 2 and "twice" in err
