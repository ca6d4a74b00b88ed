"""`hw startlog` on real log lines: the test bed's, and public GPU logs cited in each fixture."""

from __future__ import annotations

import sys
from pathlib import Path
from unittest.mock import patch

import orjson
import pytest

from switchover.cli.app import main
from switchover.engines.startlog import (
    check_file,
    check_text,
    engine_log,
    expectations_from_flags,
    load_data,
    parse_expect,
    startup_window,
)
from switchover.errors import BadInput

FIX = Path(__file__).parent / "fixtures"


def _fields(report) -> dict[str, tuple[str | None, str]]:
    return {f.field: (f.value, f.how) for f in report.findings}


@pytest.mark.parametrize(
    ("fixture", "engine", "told", "fallbacks", "verdict"),
    [
        (
            "vllm-cpu-testbed.log",
            "vllm",
            {
                "device": ("cpu", "logged"),
                "attention_backend": ("CPU_ATTN", "inferred"),
                "kv_cache_dtype": ("auto", "logged"),
                "dtype": ("bfloat16", "logged"),
                "quantization": ("none", "logged"),
                "cuda_graphs": ("off", "logged"),
                "quant_kernel": (None, "missing"),
            },
            [("note", "runner-v1")],
            "ok",
        ),
        ("vllm-gpu-flash-attn.log", "vllm", {"attention_backend": ("FLASH_ATTN", "logged")}, [], "ok"),
        (
            "vllm-t4-xformers.log",
            "vllm",
            {"attention_backend": ("XFORMERS", "logged")},
            [("downgrade", "fa2-refused")],
            "downgrade",
        ),
        (
            "vllm-turing-v0.log",
            "vllm",
            {"dtype": ("float16", "logged")},
            [("downgrade", "dtype-cast"), ("downgrade", "v1-to-v0")],
            "downgrade",
        ),
        (
            "vllm-gpu-fp8-marlin.log",
            "vllm",
            {"attention_backend": ("FLASHINFER", "logged"), "quant_kernel": ("Marlin (FP8 weight-only)", "logged")},
            [("downgrade", "fp8-marlin")],
            "downgrade",
        ),
        (
            "llamacpp-lv4-testbed.log",
            "llamacpp",
            {
                "device": ("cpu", "logged"),
                "attention_backend": ("flash_attn", "logged"),
                "kv_cache_dtype": ("f16", "logged"),
                "quantization": ("BF16", "logged"),
            },
            [],
            "ok",
        ),
        (
            "llamacpp-gpu-fa-disabled.log",
            "llama-server",
            {"attention_backend": ("standard", "logged"), "kv_cache_dtype": ("f16", "logged")},
            [("downgrade", "fa-device-mismatch")],
            "downgrade",
        ),
        (
            "tgi-flashinfer.log",
            "tgi",
            {"attention_backend": ("flashinfer", "logged"), "cuda_graphs": ("on", "logged")},
            [],
            "ok",
        ),
        (
            "sglang-b200.log",
            "sglang",
            {
                "kv_cache_dtype": ("bfloat16", "logged"),
                "quantization": ("none", "logged"),
                "cuda_graphs": ("on", "logged"),
                "attention_backend": (None, "missing"),
            },
            [("downgrade", "backend-instead")],
            "downgrade",
        ),
    ],
)
def test_real_logs_name_what_the_engine_chose(
    fixture: str, engine: str, told: dict, fallbacks: list, verdict: str
) -> None:
    r = check_file(FIX / fixture, engine)
    got = _fields(r)
    for field, want in told.items():
        assert got[field] == want, field
    assert [(f.severity, f.evidence.pattern) for f in r.fallbacks] == fallbacks
    assert r.verdict == verdict
    for f in r.findings:  # every logged value points at the line that says it and the source that prints it
        if f.how == "logged":
            assert f.evidence and f.evidence.source and f.evidence.line > 1
        if f.how == "inferred":
            assert f.source and "vllm/platforms/cpu.py" in f.source


def test_a_quiet_llama_server_log_says_what_is_missing_and_how_to_see_it() -> None:
    r = check_file(FIX / "llamacpp-lv3-testbed.log", "llamacpp")
    assert all(f.how == "missing" and "higher log verbosity" in (f.reason or "") for f in r.findings)
    assert r.hint and "-lv 4" in r.hint


@pytest.mark.parametrize(
    ("fixture", "engine", "expect", "flags", "statuses"),
    [
        (
            "vllm-cpu-testbed.log",
            "vllm",
            ["attention_backend=CPU_ATTN"],
            "--enforce-eager --dtype bfloat16",
            {"attention_backend": "match", "cuda_graphs": "match", "dtype": "match"},
        ),
        (
            "vllm-cpu-testbed.log",
            "vllm",
            ["attention_backend=FLASH_ATTN"],
            "--kv-cache-dtype=fp8",
            {"attention_backend": "mismatch", "kv_cache_dtype": "mismatch"},
        ),
        ("vllm-cpu-testbed.log", "vllm", ["quant_kernel=Marlin"], None, {"quant_kernel": "unverified"}),
        (
            "llamacpp-lv4-testbed.log",
            "llamacpp",
            [],
            "-fa on -ctk f16",
            {"attention_backend": "match", "kv_cache_dtype": "match"},
        ),
        (
            "llamacpp-lv4-testbed.log",
            "llamacpp",
            [],
            "--flash-attn off --cache-type-k q8_0",
            {"attention_backend": "mismatch", "kv_cache_dtype": "mismatch"},
        ),
        ("llamacpp-lv4-testbed.log", "llamacpp", [], "-fa auto", {}),  # auto asks for nothing
        ("sglang-b200.log", "sglang", [], "--kv-cache-dtype auto --dtype auto", {}),
        (
            "llamacpp-gpu-fa-disabled.log",
            "llamacpp",
            ["attention_backend=flash_attn"],
            None,
            {"attention_backend": "mismatch"},
        ),
        ("tgi-flashinfer.log", "tgi", [], "--cuda-graphs 0", {"cuda_graphs": "mismatch"}),
        (
            "sglang-b200.log",
            "sglang",
            [],
            "--disable-cuda-graph --kv-cache-dtype bfloat16",
            {"cuda_graphs": "mismatch", "kv_cache_dtype": "match"},
        ),
    ],
)
def test_expectations_from_expect_and_flags(
    fixture: str, engine: str, expect: list[str], flags: str | None, statuses: dict[str, str]
) -> None:
    r = check_file(FIX / fixture, engine, expect=expect, flags=flags)
    assert {e.field: e.status for e in r.expectations} == statuses
    if any(s != "match" for s in statuses.values()):
        assert r.verdict == "mismatch" and r.exit_code == 1


def test_fp8_means_fp8_e4m3_for_vllm() -> None:
    text = "(EngineCore pid=1) INFO [cache.py:362] Using fp8_e4m3 data type to store kv cache. It reduces the GPU\n"
    assert check_text(text, "vllm", expect=["kv_cache_dtype=fp8"]).expectations[0].status == "match"
    assert check_text(text, "vllm", expect=["kv_cache_dtype=fp8_e5m2"]).expectations[0].status == "mismatch"


def test_the_last_start_up_of_an_appended_log_is_read() -> None:
    one = (FIX / "vllm-cpu-testbed.log").read_text()
    second = (
        one.replace("enforce_eager=True", "enforce_eager=False")
        .replace("Enforce eager set", "Enforce-eager unset")
        .replace("'cudagraph_mode': <CUDAGraphMode.NONE", "'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE")
    )
    r = check_text(one + second, "vllm")
    assert r.start_line > one.count("\n")
    assert _fields(r)["cuda_graphs"] == ("on", "logged")
    assert _fields(check_text(second + one, "vllm"))["cuda_graphs"] == ("off", "logged")


def test_a_partial_gpu_offload_is_a_downgrade() -> None:
    line = "load_tensors: offloaded 20/33 layers to GPU\n"
    r = check_text("llama_server: initializing ...\n" + line, "llamacpp")
    assert _fields(r)["gpu_offload"] == ("20/33", "logged") and r.verdict == "downgrade"
    full = check_text("llama_server: initializing ...\n" + line.replace("20/33", "33/33"), "llamacpp")
    assert full.verdict == "ok"


def test_a_generic_fallback_line_is_caught_once_across_processes() -> None:
    lines = [
        f"({who} pid={n}) WARNING 07-04 [x.py:1] kernel Foo is not supported on this GPU; using Bar instead"
        for n, who in enumerate(("APIServer", "EngineCore", "Worker"))
    ]
    r = check_text("\n".join(["(APIServer pid=1) INFO [api.py:1] vLLM API server version 0.9.0", *lines]), "vllm")
    assert [(f.severity, f.evidence.pattern) for f in r.fallbacks] == [("downgrade", "not-supported-using")]


def test_startup_window_groups_nearby_markers() -> None:
    _, eng = engine_log("sglang")
    lines = [
        "noise",
        "Attention backend not specified. Use fa3 backend by default.",
        "x",
        "server_args=ServerArgs(attention_backend='fa3')",
        "The server is fired up and ready to roll!",
        "after",
    ]
    assert startup_window(lines, eng) == (0, 5)  # a few lines before the first marker belong to the start-up
    earlier = ["old start", "server_args=ServerArgs()", "The server is fired up and ready to roll!", "requests"] * 2
    assert startup_window(earlier + lines, eng) == (len(earlier) - 1, len(earlier) + 5)


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: parse_expect(["nokey"], load_data().fields), "expected KEY=VALUE"),
        (lambda: parse_expect(["colour=red"], load_data().fields), "unknown key"),
        (lambda: expectations_from_flags("--kv-cache-dtype", engine_log("vllm")[1]), "has no value"),
        (lambda: expectations_from_flags("--kv-cache-dtype --enforce-eager", engine_log("vllm")[1]), "has no value"),
        (lambda: expectations_from_flags("--x 'unclosed", engine_log("vllm")[1]), "cannot split"),
        (lambda: engine_log("trt-llm"), "unknown engine"),
        (lambda: check_text("hello\nworld\n", "vllm"), "no vLLM start-up line"),
    ],
)
def test_bad_input_is_one_clear_error(call, fragment: str) -> None:
    with pytest.raises(BadInput, match=fragment):
        call()


@pytest.mark.parametrize(
    ("fixture", "engine"),
    [("vllm-cpu-testbed.log", "vllm"), ("llamacpp-lv4-testbed.log", "llamacpp"), ("sglang-b200.log", "sglang")],
)
def test_the_engine_is_told_from_its_start_up_lines(fixture: str, engine: str) -> None:
    assert check_file(FIX / fixture, None).engine == engine


def test_a_log_without_one_engines_markers_needs_engine() -> None:
    with pytest.raises(BadInput, match="cannot tell the engine"):
        check_file(FIX / "vllm-gpu-flash-attn.log", None)  # an excerpt without a start line


def test_every_pattern_cites_a_source_and_engine_data_validates() -> None:
    data = load_data()
    assert set(data.engines) == {"vllm", "llamacpp", "tgi", "sglang"}
    for eng in data.engines.values():
        assert all(p.source for p in eng.patterns) and all(m.source for m in eng.start)
        assert eng.flags_source


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with patch.object(sys, "argv", ["switchover", "hw", "startlog", *args]), pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_cli_exit_codes_and_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = _cli(capsys, str(FIX / "vllm-cpu-testbed.log"), "--engine", "vllm", "--json")
    assert code == 0 and orjson.loads(out)["verdict"] == "ok"
    code, out, err = _cli(capsys, str(FIX / "vllm-gpu-fp8-marlin.log"), "-e", "vllm")
    assert code == 1 and "Marlin" in out and "downgrade" in err
    code, _, err = _cli(
        capsys, str(FIX / "vllm-cpu-testbed.log"), "-e", "vllm", "--expect", "attention_backend=FLASH_ATTN"
    )
    assert code == 1 and "attention_backend" in err
    code, _, err = _cli(capsys, str(tmp_path / "missing.log"), "-e", "vllm")
    assert code == 2 and "Traceback" not in err
    code, _, err = _cli(capsys, str(FIX / "vllm-cpu-testbed.log"), "-e", "nope")
    assert code == 2 and "unknown engine" in err
    markup = tmp_path / "markup.log"
    markup.write_text("llama_server: initializing\nload_tensors: offloaded 1/2 layers to GPU [/INST] [bold]\n")
    code, out, _ = _cli(capsys, str(markup), "-e", "llamacpp")
    assert code == 1 and "[/INST]" in out


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ({"id": "x", "regex": "Using (\\w+)", "field": "device", "source": "a.py"}, "value"),
        ({"id": "x", "regex": "Using (", "field": "device", "value": "cpu", "source": "a.py"}, "bad regex"),
        ({"id": "x", "regex": "Using", "source": "a.py"}, "tells nothing"),
        ({"id": "x", "regex": "Using", "fallback": "note", "source": " "}, "no source"),
        ({"id": "x", "regex": "Using", "field": "colour", "value": "red", "source": "a.py"}, "unknown fields"),
    ],
)
def test_a_malformed_pattern_fails_validation(pattern: dict, fragment: str) -> None:
    from pydantic import ValidationError

    from switchover.engines.startlog import StartlogData

    data = {
        "fields": {"device": "d"},
        "common_fallbacks": [],
        "engines": {"e": {"display_name": "E", "start": [{"regex": "x", "source": "s"}], "patterns": [pattern]}},
    }
    with pytest.raises(ValidationError, match=fragment):
        StartlogData.model_validate(data)


def test_a_secret_on_an_evidence_line_is_masked() -> None:
    text = (
        "llama_server: initializing\n"
        "load_tensors: offloaded 1/2 layers to GPU (api_key=sk-abcdefghijklmnopqrstuvwxyz123456)\n"
    )
    r = check_text(text, "llamacpp")
    assert "sk-abcdefghijklmnop" not in r.model_dump_json() and r.fallbacks


def test_against_an_old_hosts_log_every_choice_it_made_is_expected() -> None:
    """Seed 004 §1: FlashAttention on the old GPU, XFormers on the new pre-Ampere one, and no error."""
    r = check_file(FIX / "vllm-t4-xformers.log", "vllm", against=FIX / "vllm-gpu-flash-attn.log")
    (e,) = r.expectations
    assert (e.field, e.expected, e.found, e.status) == ("attention_backend", "FLASH_ATTN", "XFORMERS", "mismatch")
    assert e.origin.endswith("vllm-gpu-flash-attn.log line 3")
    same = check_file(FIX / "vllm-cpu-testbed.log", None, against=FIX / "vllm-cpu-testbed.log")
    assert same.expectations and all(x.status == "match" for x in same.expectations)
    assert any(x.origin.endswith("(inferred)") for x in same.expectations)
    explicit = check_file(
        FIX / "vllm-t4-xformers.log",
        "vllm",
        against=FIX / "vllm-gpu-flash-attn.log",
        expect=["attention_backend=XFORMERS"],
    )
    assert explicit.expectations[0].status == "match"  # --expect overrides what the old log said
    with pytest.raises(BadInput, match="engines name their choices differently"):
        check_file(FIX / "vllm-cpu-testbed.log", None, against=FIX / "llamacpp-lv4-testbed.log")


def test_a_log_of_many_start_ups_is_read_in_linear_time() -> None:
    # every start-up a separate one (a ready line between markers): the grouping must not compare each marker with
    # every ready line (40,000 start-ups took ~10 s that way, a 64 MiB log hours)
    import time

    eng = engine_log("vllm")[1]
    lines = ["vLLM API server version 1", "Starting vLLM API server"] * 40_000
    t0 = time.perf_counter()
    assert startup_window(lines, eng) == (len(lines) - 2, len(lines))
    assert time.perf_counter() - t0 < 2.0


def test_a_long_lines_excerpt_never_shows_part_of_a_secret_cut_from_its_name() -> None:
    pad = "x" * 400
    secret = "sk-verysecretvalue12345678901234567890abcdef"
    line = (
        f"[2025-04-14 15:27:25] server_args=ServerArgs(model_path='m', tokenizer_path='{pad}', dtype='auto', "
        f"api_key='{secret}', kv_cache_dtype='fp8_e5m2', quantization=None, device='cuda', other='{pad}')"
    )
    r = check_text(line + "\n", "sglang")
    texts = [f.evidence.text for f in r.findings if f.evidence]
    assert texts and all(secret[-12:] not in t for t in texts), texts
    assert {f.field: f.value for f in r.findings}["kv_cache_dtype"] == "fp8_e5m2"


def test_an_absurd_layer_count_is_not_a_fraction_and_not_a_crash() -> None:
    text = "main: build = 1\nload_tensors: offloaded " + "9" * 5000 + "/1 layers to GPU\n"
    r = check_text(text, "llamacpp")
    assert not [f for f in r.fallbacks if f.severity == "downgrade"]
    partial = check_text("main: build = 1\nload_tensors: offloaded 3/33 layers to GPU\n", "llamacpp")
    assert partial.verdict == "downgrade"
    assert len(_fields(r)["gpu_offload"][0]) <= 81  # the 5,001-character value is cut, not reported whole


def test_a_logged_value_holding_a_secret_is_masked() -> None:
    text = (
        "(APIServer pid=1) INFO [api.py:1] vLLM API server version 0.9.0\n"
        "INFO Initializing a V1 LLM engine (v0.9) with config: quantization=sk-abcdefghijklmnopqrstuvwxyz12345\n"
    )
    r = check_text(text, "vllm")
    assert _fields(r)["quantization"][1] == "logged" and "sk-abcdefghijklmnop" not in r.model_dump_json()


def test_an_expected_value_may_carry_the_engines_type_prefix() -> None:
    log = (FIX / "vllm-cpu-testbed.log").read_text()
    plain = check_text(log, "vllm", expect=["dtype=bfloat16"])
    prefixed = check_text(log, "vllm", expect=["dtype=torch.bfloat16"])
    assert [e.status for e in plain.expectations] == [e.status for e in prefixed.expectations] == ["match"]
    assert check_text(log, "vllm", expect=["dtype=torch.float16"]).verdict == "mismatch"
