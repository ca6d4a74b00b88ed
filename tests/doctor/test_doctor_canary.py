"""`doctor`'s canary diagnosis agrees with `plan canary`: what it says of canary percentages is what the capacity
model computes, and given a model, an engine and a GPU it prints `plan canary`'s own figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from switchover.cli.app import app
from switchover.doctor import diagnose
from switchover.engines import load_profile
from switchover.errors import BadInput
from switchover.model import card_from_config
from switchover.plan.canary import canary_plan
from tests.plan import configs as C


def test_the_canary_cause_says_what_plan_canary_computes_of_20_and_50_percent() -> None:
    """Issue 21: doctor said 20 % and 50 % canaries need the same capacity; `plan canary` says otherwise."""
    plan = canary_plan(card_from_config(C.LLAMA_8B), load_profile("vllm"), 79.18, context=8192)
    rows = {r.canary_percent: r for r in plan.table}
    assert rows[20].old_concurrency == rows[50].old_concurrency  # the same pool per copy at both ...
    assert rows[20].sustainable_total != rows[50].sustainable_total  # ... not the same capacity
    (cause, *_) = diagnose("p99-up-qps-flat")[0].symptom.causes
    assert "same capacity" not in cause.cause
    assert "same pool" in cause.cause and "sustain" in cause.cause


@pytest.fixture()
def llama_dir(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(C.LLAMA_8B))
    return tmp_path


def test_given_a_model_engine_and_gpu_doctor_prints_plan_canarys_figures(llama_dir: Path) -> None:
    args = ["-m", str(llama_dir), "-e", "vllm@0.11.0", "--gpu", "H100-80G", "--context", "8192"]
    res = CliRunner().invoke(app, ["doctor", "p99 up, qps flat", *args, "--json"])
    assert res.exit_code == 0, res.output
    (found,) = json.loads(res.stdout)
    figures = found["canary"]
    plan = json.loads(CliRunner().invoke(app, ["plan", "canary", *args, "--json"]).stdout)
    assert figures["single_tokens"] == plan["single_tokens"]
    assert figures["copy_tokens"] == [c["tokens"] for c in plan["copies"]]
    assert figures["sustainable_total"] == {
        str(int(r["canary_percent"])): r["sustainable_total"] for r in plan["table"] if 0 < r["canary_percent"] < 100
    }
    text = CliRunner().invoke(app, ["doctor", "p99 up, qps flat", *args]).stdout
    assert "vllm 0.11.0" in text and f"{plan['single_tokens']:,} tokens" in text


def test_figures_need_the_model_and_the_gpu(llama_dir: Path) -> None:
    res = CliRunner().invoke(app, ["doctor", "p99 up, qps flat", "-m", str(llama_dir)])
    assert isinstance(res.exception, BadInput) and res.exception.exit_code == 2 and "--gpu" in res.exception.message
