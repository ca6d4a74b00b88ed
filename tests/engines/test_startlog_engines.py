"""`hw startlog` on the test bed's own start-up logs: vLLM CPU and llama-server name what they chose."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from switchover.engines.startlog import check_file
from switchover.subproc import stop
from switchover.testbed import processes
from switchover.testbed.layout import bed_models
from tests.engines.conftest import Bed

START_TIMEOUT_S = 60


def _bed_logs(bed: Bed) -> dict[str, str]:
    name = os.environ.get("SWITCHOVER_TESTBED_REUSE") or f"pytest-{os.getpid()}"
    state = processes.load_state(bed.layout, name)
    assert state is not None, f"no state for bed {name}"
    return {e.engine: e.log for e in state.engines}


def _fields(report) -> dict[str, tuple[str | None, str]]:
    return {f.field: (f.value, f.how) for f in report.findings}


def test_vllm_cpu_start_up_log_names_device_dtype_kv_and_eager(bed: Bed) -> None:
    r = check_file(
        _bed_logs(bed)["vllm"],
        "vllm",
        flags="--enforce-eager",
        expect=["attention_backend=CPU_ATTN", "kv_cache_dtype=auto", "quantization=none"],
    )
    got = _fields(r)
    assert got["device"] == ("cpu", "logged")
    assert got["attention_backend"] == ("CPU_ATTN", "inferred")  # vLLM CPU does not log it; cited code path
    assert got["dtype"][1] == "logged" and got["cuda_graphs"] == ("off", "logged")  # the bed runs --enforce-eager
    assert [e.status for e in r.expectations] == ["match"] * 4, r.expectations
    assert r.verdict == "ok" and not [f for f in r.fallbacks if f.severity == "downgrade"]
    wrong = check_file(_bed_logs(bed)["vllm"], "vllm", expect=["attention_backend=FLASH_ATTN"])
    assert wrong.verdict == "mismatch" and wrong.expectations[0].found == "CPU_ATTN"


def test_llama_server_default_log_says_the_choices_need_a_higher_verbosity(bed: Bed) -> None:
    r = check_file(_bed_logs(bed)["llamacpp"], "llamacpp", expect=["attention_backend=flash_attn"])
    assert r.hint and "-lv 4" in r.hint
    assert r.expectations[0].status == "unverified" and r.verdict == "mismatch"


def test_llama_server_at_lv4_names_flash_attention_kv_type_and_weights(bed: Bed, tmp_path: Path) -> None:
    """The bed's llama-server binary and model, started once more with -lv 4 (loopback, a free port, stopped as soon
    as it listens): the check names what that start-up chose."""
    model = bed_models(bed.layout)[bed.key]
    port = processes.free_port()
    cmd = [*processes.llama_command(bed.layout, model, port), "-lv", "4"]
    log = tmp_path / "llama-lv4.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "listening on" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "llama-server did not listen in time"
            time.sleep(0.2)  # a bounded poll
    finally:
        stop(proc)
    r = check_file(log, "llamacpp", flags="-fa on -ctk f16")
    got = _fields(r)
    assert got["device"] == ("cpu", "logged")
    assert got["attention_backend"] == ("flash_attn", "logged")
    assert got["kv_cache_dtype"] == ("f16", "logged")
    assert got["quantization"][1] == "logged" and got["quantization"][0]  # the GGUF's file type, e.g. BF16
    assert [e.status for e in r.expectations] == ["match", "match"] and r.verdict == "ok"
