"""translate, third pass: intents that cross engines by rules read at releases — MiniMax-M2 parser names, multi-node
launches (node count, rank, the head node's address, worker-only nodes), an environment switch (ModelScope) read
per release, and TGI's batch-size cap carried one way — proven on launches written for the test."""

from __future__ import annotations

import pytest

from switchover.engines.extract import Extracted
from switchover.engines.releases import EngineReleases, ParserRules
from switchover.plan.translate import translate
from tests.plan.records import after, outcomes
from tests.plan.release_data import releases_of

# no engine has release data unless a test adds it (conftest.no_release_data)
pytestmark = pytest.mark.usefixtures("no_release_data")

# ---- MiniMax-M2 parsers: vLLM minimax_m2 / minimax_m2_append_think, SGLang minimax-m2 / minimax / ---------------
# minimax-append-think (vLLM 0.11.1 vllm/reasoning/minimax_m2_reasoning_parser.py; SGLang 0.5.4.post1
# python/sglang/srt/parser/reasoning_parser.py: "minimax" is Qwen3Detector with reasoning forced on)


@pytest.mark.parametrize(
    ("source", "target", "flag", "word"),
    [
        ("vllm serve m --tool-call-parser minimax_m2", "sglang", "--tool-call-parser", "minimax-m2"),
        ("vllm serve m --reasoning-parser minimax_m2", "sglang", "--reasoning-parser", "minimax"),
        (
            "vllm serve m --reasoning-parser minimax_m2_append_think",
            "sglang",
            "--reasoning-parser",
            "minimax-append-think",
        ),
        (
            "python -m sglang.launch_server --model-path m --tool-call-parser minimax-m2",
            "vllm",
            "--tool-call-parser",
            "minimax_m2",
        ),
        (
            "python -m sglang.launch_server --model-path m --reasoning-parser minimax",
            "vllm",
            "--reasoning-parser",
            "minimax_m2",
        ),
    ],
)
def test_minimax_m2_parser_names_cross_between_vllm_and_sglang(source: str, target: str, flag: str, word: str) -> None:
    engine = "vllm" if source.startswith("vllm") else "sglang"
    assert after(translate(engine, source, target), flag) == word


def test_a_minimax_parser_is_lost_where_the_target_release_has_none(no_release_data: dict[str, EngineReleases]) -> None:
    no_release_data["sglang"] = releases_of(
        "sglang",
        {
            "0.5.4": Extracted(
                parser=ParserRules(abbrev=True, source="server_args.py"),
                files=["server_args.py"],
                flags={
                    "--model-path": {"path": "server_args.py", "takes_value": True},
                    "--reasoning-parser": {
                        "path": "server_args.py",
                        "takes_value": True,
                        "choices": ["deepseek-r1", "qwen3"],
                    },
                },
            )
        },
    )
    tr = translate("vllm", "vllm serve m --reasoning-parser minimax_m2", "sglang", target_version="0.5.4")
    rec = outcomes(tr)["--reasoning-parser"]
    assert (
        rec.outcome == "lost"
        and "--reasoning-parser" not in tr.argv
        and "'minimax' is not a choice" in (rec.detail or "")
    )


# ---- multi-node ---------------------------------------------------------------------------------------------------


def test_a_sglang_multi_node_launch_becomes_vllm_nodes_with_the_head_address_split() -> None:
    # SGLang 0.3.0 README-style second node: --nccl-init-addr HOST:PORT --nnodes 2 --node-rank 1
    tr = translate(
        "sglang",
        "python -m sglang.launch_server --model-path m --tp 16 --nccl-init-addr 10.1.2.3:20000 "
        "--nnodes 2 --node-rank 1",
        "vllm",
        source_version="0.3.0",
        target_version="0.11.1",
    )
    assert after(tr, "--nnodes") == "2" and after(tr, "--node-rank") == "1"
    assert after(tr, "--master-addr") == "10.1.2.3" and after(tr, "--master-port") == "20000"
    assert outcomes(tr)["--nccl-init-addr"].rendered == ["--master-addr", "10.1.2.3", "--master-port", "20000"]
    # rank 1 serves no HTTP in SGLang: vLLM runs that node's workers headless (cli/serve.py at v0.11.1)
    assert "--headless" in tr.argv and any(d.what == "headless" for d in tr.derived)


def test_the_head_node_gets_no_headless_switch() -> None:
    tr = translate(
        "sglang",
        "python -m sglang.launch_server --model-path m --tp 16 --dist-init-addr h:5000 --nnodes 2 --node-rank 0",
        "vllm",
        source_version="0.5.0",
        target_version="0.12.0",
    )
    assert "--headless" not in tr.argv and after(tr, "--node-rank") == "0"


def test_vllm_before_0_11_1_has_no_node_options_so_they_are_lost_with_why() -> None:
    tr = translate(
        "sglang",
        "python -m sglang.launch_server --model-path m --dist-init-addr h:5000 --nnodes 2 --node-rank 0",
        "vllm",
        source_version="0.5.0",
        target_version="0.10.0",
    )
    out = outcomes(tr)
    assert out["--nnodes"].outcome == "lost" and "Ray" in (out["--nnodes"].detail or "")
    assert out["--dist-init-addr"].outcome == "lost" and "--master-addr" not in tr.argv


def test_vllm_master_address_and_port_join_into_sglangs_one_option() -> None:
    tr = translate(
        "vllm",
        "vllm serve m -tp 16 --nnodes 2 --node-rank 0 --master-addr 10.0.0.9 --master-port 1234",
        "sglang",
        source_version="0.12.0",
    )
    assert after(tr, "--dist-init-addr") == "10.0.0.9:1234"
    assert outcomes(tr)["--master-addr"].outcome == outcomes(tr)["--master-port"].outcome == "translated"
    only_host = translate("vllm", "vllm serve m --nnodes 2 --master-addr 10.0.0.9", "sglang", source_version="0.12.0")
    assert after(only_host, "--dist-init-addr") == "10.0.0.9:29501"  # vLLM's default port


# ---- ModelScope downloads: an environment switch read differently by release -----------------------------------


@pytest.mark.parametrize(
    ("launch", "version", "on"),
    [
        ("SGLANG_USE_MODELSCOPE=true python -m sglang.launch_server --model-path q/Q", "0.5.0", True),
        ("SGLANG_USE_MODELSCOPE=false python -m sglang.launch_server --model-path q/Q", "0.5.0", False),
        # before 0.3.6.post2 SGLang only tested that the variable exists (utils.py at v0.3.0)
        ("SGLANG_USE_MODELSCOPE=false python -m sglang.launch_server --model-path q/Q", "0.3.0", True),
    ],
)
def test_sglang_modelscope_switch_becomes_vllms_as_each_release_reads_it(launch: str, version: str, on: bool) -> None:
    tr = translate("sglang", launch, "vllm", source_version=version, target_version="0.13.0")
    rec = outcomes(tr)["SGLANG_USE_MODELSCOPE"]
    if on:
        # vLLM before 0.28.0 reads only 'true' (envs.py at v0.4.2): a 1 would leave it off
        assert tr.env.get("VLLM_USE_MODELSCOPE") == "true" and rec.outcome == "translated"
    else:
        assert "VLLM_USE_MODELSCOPE" not in tr.env and rec.outcome == "default_matches"


def test_vllms_modelscope_1_is_on_from_0_28_0_only() -> None:
    old = translate("vllm", "VLLM_USE_MODELSCOPE=1 vllm serve q/Q", "sglang", source_version="0.20.0")
    assert "SGLANG_USE_MODELSCOPE" not in old.env
    new = translate("vllm", "VLLM_USE_MODELSCOPE=1 vllm serve q/Q", "sglang", source_version="0.28.0")
    assert new.env.get("SGLANG_USE_MODELSCOPE") == "true"


def test_an_engine_switch_variable_is_checked_in_the_engines_environment_table(
    no_release_data: dict[str, EngineReleases],
) -> None:
    no_release_data["sglang"] = releases_of(
        "sglang",
        {
            v: Extracted(
                parser=ParserRules(abbrev=True, source="server_args.py"),
                files=["server_args.py"],
                flags={"--model-path": {"path": "server_args.py", "takes_value": True}},
                environment=env,
            )
            for v, env in (("0.3.0", {"SGLANG_USE_MODELSCOPE": {"path": "utils.py"}}), ("0.5.0", {}))
        },
    )
    read = translate(
        "sglang",
        "SGLANG_USE_MODELSCOPE=1 python -m sglang.launch_server --model-path q/Q",
        "vllm",
        source_version="0.3.0",
    )
    assert outcomes(read)["SGLANG_USE_MODELSCOPE"].input.validity == "ok"
    gone = translate(
        "sglang",
        "SGLANG_USE_MODELSCOPE=1 python -m sglang.launch_server --model-path q/Q",
        "vllm",
        source_version="0.5.0",
    )
    assert outcomes(gone)["SGLANG_USE_MODELSCOPE"].input.validity == "refused"


# ---- TGI --max-batch-size: a running-batch cap where TGI applies it (backends/v3/src/backend.rs at v3.1.1) ------


def test_tgi_max_batch_size_becomes_the_targets_concurrency_cap_with_where_tgi_applied_it() -> None:
    tr = translate("tgi", "text-generation-launcher --model-id m --max-batch-size 256", "vllm", source_version="3.1.1")
    rec = outcomes(tr)["--max-batch-size"]
    assert after(tr, "--max-num-seqs") == "256" and rec.outcome == "translated" and "chunk" in (rec.detail or "")
    assert (
        after(
            translate(
                "tgi", "text-generation-launcher --model-id m --max-batch-size 256", "sglang", source_version="3.1.1"
            ),
            "--max-running-requests",
        )
        == "256"
    )


def test_a_concurrency_cap_is_not_given_to_tgi_which_does_not_always_apply_it() -> None:
    tr = translate("vllm", "vllm serve m --max-num-seqs 64", "tgi", target_version="3.1.1")
    rec = outcomes(tr)["--max-num-seqs"]
    assert rec.outcome == "lost" and "--max-batch-size" not in tr.argv and "chunk" in (rec.detail or "")
