"""plan translate's advice from a bench run: the cap that bound on the target engine, with the flag to raise as
the target version has it."""

from __future__ import annotations

import orjson
import pytest

from switchover.errors import BadInput
from switchover.evidence.bench import BenchPlan, BenchReport, EndpointInfo, EndpointSpec
from switchover.evidence.bench_caps import StepLimit
from switchover.plan.translate import bench_advice, translate
from switchover.runs import RunDir


def _run(tmp_path, engine: str, binding: str) -> str:
    rd = RunDir.create(tmp_path, "bench")
    plan = BenchPlan(
        endpoints=[EndpointSpec(label="new", url="http://127.0.0.1:9", engine=engine)], calibrate=False, requests=4
    )
    limit = StepLimit(
        endpoint="new",
        bucket="128",
        step=1,
        repeat=0,
        load="c=8",
        binding=binding,  # type: ignore[arg-type]
        detail="",
        scrapes=5,
    )
    report = BenchReport(
        name="b",
        created_wall=0,
        plan=plan,
        limits=[limit],
        endpoints=[
            EndpointInfo(label="new", url="http://127.0.0.1:9", engine=engine, model="m", output_control="max_tokens")
        ],
    )
    rd.write_json("summary", report)
    return str(rd.path)


def test_a_bench_of_the_target_engine_adds_the_flag_to_raise_at_the_target_version(tmp_path) -> None:
    t = translate("vllm", "vllm serve M --max-num-seqs 4", "llamacpp", target_version="b11434")
    before = len(t.notes)
    bench_advice(t, _run(tmp_path, "llamacpp", "requests"))
    assert t.notes[before:] == [
        "on llamacpp at c=8 the request-count cap bound: raise --parallel "
        "(https://github.com/ggml-org/llama.cpp/blob/b11434/common/arg.cpp)"
    ]


def test_a_bench_of_another_engine_or_where_nothing_bound_adds_nothing(tmp_path) -> None:
    t = translate("vllm", "vllm serve M", "llamacpp")
    before = list(t.notes)
    bench_advice(t, _run(tmp_path / "a", "vllm", "requests"))
    bench_advice(t, _run(tmp_path / "b", "llamacpp", "none"))
    assert t.notes == before
    with pytest.raises(BadInput, match="no such run directory"):
        bench_advice(t, str(tmp_path / "missing"))


def test_plan_translate_bench_prints_the_advice_and_a_missing_run_is_exit_2(tmp_path) -> None:
    from typer.testing import CliRunner

    from switchover.cli.app import app

    run_dir = _run(tmp_path, "llamacpp", "requests")
    r = CliRunner().invoke(
        app,
        ["plan", "translate", "vllm serve M --max-num-seqs 4", "--to", "llamacpp@b11434", "--bench", run_dir, "--json"],
    )
    notes = orjson.loads(r.stdout)["notes"]
    assert any("the request-count cap bound: raise --parallel" in n for n in notes), r.stdout[-500:]
    r = CliRunner().invoke(
        app, ["plan", "translate", "vllm serve M", "--to", "llamacpp", "--bench", str(tmp_path / "missing")]
    )
    assert isinstance(r.exception, BadInput) and "no such run directory" in r.exception.message  # exit 2 in main
