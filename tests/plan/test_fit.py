"""`plan capacity` says in one line whether the model fits, and when it does not, which single change would make it
fit; each suggestion's figures are what `plan capacity` itself prints with that change."""

from __future__ import annotations

import json
import shlex

import pytest
from typer.testing import CliRunner

from switchover.cli.app import app

LLAMA = "builtin:meta-llama/Llama-3.1-8B-Instruct"
QWEN = "builtin:Qwen/Qwen3-32B"


def _capacity(args: str) -> tuple[int, dict]:
    res = CliRunner().invoke(app, ["plan", "capacity", *shlex.split(args), "--json"])
    return res.exit_code, json.loads(res.stdout)


def test_a_model_that_fits_says_how_many_requests_run_at_once() -> None:
    code, out = _capacity(f"-m {LLAMA} --gpu H100-80G --context 8192")
    assert code == 0
    assert out["fit"]["fits"] is True and out["fit"]["options"] == []
    assert out["fit"]["verdict"] == f"fits: {out['max_concurrency']} requests of 8,192 tokens at once (binding: kv)"


@pytest.mark.parametrize(
    ("args", "expected_flag"),
    [
        (f"-m {QWEN} --gpu L4-24G", "--tp 4"),  # 61 GiB of weights on a 22 GiB card
        (f"-m {LLAMA} --gpu L4-24G --max-model-len 131072 --context 131072", "--max-model-len 34944"),
    ],
)
def test_each_suggestion_is_what_plan_capacity_gives_with_that_change(args: str, expected_flag: str) -> None:
    code, out = _capacity(args)
    assert code == 1
    fit = out["fit"]
    assert fit["fits"] is False and fit["verdict"].startswith("does not fit: ")
    flags = [o["flags"] for o in fit["options"]]
    assert expected_flag in flags, flags
    for option in fit["options"]:
        extra = option["flags"]
        if extra.startswith("--max-model-len"):
            extra += f" --context {extra.split()[1]}"
        again_code, again = _capacity(f"{args} {extra}")
        assert again_code == 0, option
        assert again["tokens"] == option["tokens"] and again["max_concurrency"] == option["concurrency"], option


def test_a_model_no_single_change_can_fit_says_so() -> None:
    # 61 GiB of weights on 4 GiB cards: 8-way TP still leaves 7.6 GiB per GPU, a 4-bit copy 15 GiB
    res = CliRunner().invoke(app, ["plan", "capacity", "-m", QWEN, "--gpu-mem-gib", "4"])
    assert res.exit_code == 1
    assert "DOES NOT FIT" in res.stdout
    assert "to make it fit: no single change" in " ".join(res.stdout.split())
    assert "to make it fit: tensor" not in res.stdout
