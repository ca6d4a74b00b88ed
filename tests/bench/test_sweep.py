"""bench sweep: parameter parsing, command rendering, and a whole sweep relaunching a zero-work server."""

from __future__ import annotations

import shlex
import sys

import pytest

from switchover.bench.sweep import SweepPoint, commands, parse_params, run_sweep
from switchover.errors import BadInput
from switchover.evidence.bench import BenchPlan, EndpointSpec
from switchover.testbed.processes import free_port


def test_params_parse_and_every_combination_is_rendered():
    params = parse_params(["bs=16,32", "mode=a"])
    assert params == {"bs": ["16", "32"], "mode": ["a"]}
    cmds = commands("serve --block-size {bs} --mode {mode}", params)
    assert [c for _, c in cmds] == [
        ["serve", "--block-size", "16", "--mode", "a"],
        ["serve", "--block-size", "32", "--mode", "a"],
    ]


@pytest.mark.parametrize("spec", ["bs", "bs=", "=1,2", "b s=1"])
def test_bad_param_is_bad_input(spec):
    with pytest.raises(BadInput, match="--param"):
        parse_params([spec])


def test_placeholder_missing_from_launch_is_bad_input():
    with pytest.raises(BadInput, match=r"does not contain \{bs\}"):
        commands("serve", {"bs": ["1"]})


async def test_sweep_relaunches_benches_and_stops_each_engine(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    launch = f"{sys.executable} -m switchover.testing zero --port {port} --itl-ms {{itl}}"
    plan = BenchPlan(
        endpoints=[EndpointSpec(label="target", url=url)],
        buckets=[24],
        output_tokens=8,
        concurrency=[1, 2, 3],
        requests=4,
        calibrate=False,
        scrape_interval_s=0,
    )
    res = await run_sweep(launch, {"itl": ["1", "3"]}, plan, url, tmp_path, ready_timeout_s=60)
    assert [p.params for p in res.points] == [{"itl": "1"}, {"itl": "3"}]
    assert all(p.error is None and p.run_dir for p in res.points)
    assert all(set(p.tpot_p99_ms) == {"1", "2", "3"} for p in res.points)
    assert (tmp_path / res.run_dir.split("/")[-1] / "sweep.html").exists()


async def test_an_engine_that_dies_for_memory_during_its_bench_is_marked_in_the_sweep(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # a stand-in engine that serves, then dies with PyTorch's out-of-memory text in its log 3 s after launch
    script = tmp_path / "engine.sh"
    script.write_text(
        f"{sys.executable} -m switchover.testing zero --port {port} --itl-ms $1 & pid=$!; sleep 3; "
        "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB'; kill $pid; exit 1\n"
    )
    plan = BenchPlan(
        endpoints=[EndpointSpec(label="target", url=url)],
        buckets=[24],
        output_tokens=8,
        concurrency=[1],
        requests=60,
        calibrate=False,
        scrape_interval_s=0,
        timeout_s=5,
    )
    res = await run_sweep(
        f"sh {shlex.quote(str(script))} {{itl}}", {"itl": ["20"]}, plan, url, tmp_path, ready_timeout_s=60
    )
    (pt,) = res.points
    assert pt.engine_oom and pt.engine_end and "CUDA out of memory" in pt.engine_end
    assert "engine gone" in pt.line()
    html = (tmp_path / res.run_dir.split("/")[-1] / "sweep.html").read_text()
    assert "engine killed for memory" in html and "OOM rate against the parameter" in html


def test_a_points_line_says_where_a_cap_bound_and_where_oom_answers_came() -> None:
    p = SweepPoint(params={"np": "1"}, run_dir="x", caps={"1": "none", "4": "requests"}, oom={"1": 0, "4": 3})
    assert p.line() == "cap bound at 4: requests; OOM answers at 4: 3"
    assert SweepPoint(params={}, run_dir=None).line() == ""


def _point_limits(tmp_path, load: int, verdicts: list[tuple[str, str, int, int]]) -> SweepPoint:
    """A sweep point's caps and OOM figures from a bench report with one step per (bucket, verdict, requests, OOM)
    at one concurrency."""
    from switchover.bench.sweep import _limits
    from switchover.evidence.bench import BenchReport, EndpointInfo, StepLimit, StepSummary

    ep = EndpointInfo(engine="vllm", url="http://127.0.0.1:9", label="new", output_control="ignore_eos", model="m")
    step = dict(endpoint="new", duration_s=1.0, req_per_s=1.0, chunks_per_s=1.0, out_tok_per_s=1.0, error_rate=0.0)
    steps = [
        StepSummary(**step, step=0, bucket=b, concurrency=load, warmup=False, ok=n, failed=0, requests=n)
        for b, _, n, _ in verdicts
    ]
    limits = [
        StepLimit(
            endpoint="new",
            bucket=b,
            step=0,
            repeat=0,
            load=str(load),
            binding=cap,
            detail="",
            scrapes=9,
            requests=n,
            oom=oom,
        )
        for b, cap, n, oom in verdicts
    ]
    report = BenchReport(
        name="r",
        created_wall=0.0,
        plan=BenchPlan(endpoints=[], requests=10),
        endpoints=[ep],
        steps=steps,
        limits=limits,
        run_dir=str(tmp_path),
    )
    p = SweepPoint(params={}, run_dir=str(tmp_path))
    _limits(p, report, [])
    return p


def test_two_prompt_buckets_at_one_load_keep_one_cap_verdict_each_and_the_oom_rate_pools_them(tmp_path) -> None:
    p = _point_limits(tmp_path, 8, [("short", "requests", 10, 0), ("long", "tokens", 30, 3)])
    assert p.caps == {"short@8": "requests", "long@8": "tokens"}  # before: {"8": "tokens"}, short's verdict lost
    assert p.oom == {"8": 3} and p.oom_rate == {"8": 0.075}  # 3 of 40 requests, not 3 of the last bucket's 30


def test_a_run_with_one_prompt_bucket_keys_its_caps_by_load_alone(tmp_path) -> None:
    p = _point_limits(tmp_path, 4, [("32", "requests", 10, 0)])
    assert p.caps == {"4": "requests"}
