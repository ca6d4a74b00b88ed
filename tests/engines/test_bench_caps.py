"""Which cap binds, on real engines: short `bench sweep`s whose verdicts come from the engine's /metrics.
- llama-server -np 1 at concurrency 1 and 4, 8 s steps: the request cap binds at 4.
- vLLM CPU 0.32 with --max-num-seqs 2 --max-num-batched-tokens 32, one server, concurrency 8: 32-token prompts leave
  2 requests running and 6 waiting (the request cap binds); 1,920-token prompts are prefilled in 32-token chunks
  (chunked prefill is on by default at v0.32.0), so one request's chunk takes the whole budget and the others wait
  with fewer than 2 running (the per-step token budget binds; while the first decodes its 16 tokens beside the
  next one's prefill, 2 run: those readings say the request cap). Concurrency 8, not 4: with 4, the tiny model
  finished the short requests faster than the client sent new ones, and as few as 9 of 74 readings had a queue.
Uses its own engines on free ports (the shared bed's are left alone). The vLLM steps are bounded by time (15 s), not
by a request count: on this shared 2-core host a /metrics scrape can take a second or more, so a step of a few
requests held as few as 2 scrapes; a verdict from fewer than MIN_SCRAPES is "unknown" (bench/capbind.py)."""

from __future__ import annotations

import shlex

import pytest

from switchover.bench.sweep import run_sweep
from switchover.evidence.bench import BenchPlan, BenchReport, EndpointSpec
from switchover.runs import RunDir
from switchover.testbed import processes
from switchover.testbed.install import OFFLINE_ENV, installed
from switchover.testbed.layout import Layout, bed_models
from switchover.testing import missing as absent

pytestmark = pytest.mark.engines


def _setup(engine: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, list[str]]:
    layout = Layout.default()
    missing = installed(layout)
    if missing:
        absent(f"test bed incomplete: {'; '.join(missing)}")
    model = bed_models(layout)["tiny"]
    port = processes.free_port()
    for k, v in OFFLINE_ENV.items():  # the sweep's engine inherits this process's environment
        monkeypatch.setenv(k, v)
    if engine == "llamacpp":
        cmd = processes.llama_command(layout, model, port)
        cmd[cmd.index("-np") + 1] = "{cap}"
    else:  # as the bed starts it: 1 GiB of KV cache, OpenMP on the first of the usable cores
        monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
        monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", str(processes.usable_cpus()[0]))
        cmd = [
            *processes.vllm_command(layout, model, port),
            "--max-num-seqs",
            "{cap}",
            "--max-num-batched-tokens",
            "32",
        ]
    return model.served_name, f"http://127.0.0.1:{port}", cmd


@pytest.mark.parametrize(("engine", "flag"), [("llamacpp", "--parallel")])
async def test_the_request_cap_binds_at_concurrency_4_with_one_sequence(
    tmp_path, monkeypatch, engine: str, flag: str
) -> None:
    served, url, cmd = _setup(engine, monkeypatch)
    launch = " ".join(w if w == "{cap}" else shlex.quote(w) for w in cmd)
    plan = BenchPlan(
        endpoints=[EndpointSpec(label="target", url=url, engine=engine, model=served)],
        buckets=[32],
        output_tokens=128,
        concurrency=[1, 4],
        duration_s=8,
        warmup_requests=1,
        scrape_interval_s=0.1,
        timeout_s=120,
        calibrate=False,
    )
    res = await run_sweep(launch, {"cap": ["1"]}, plan, url, tmp_path, ready_timeout_s=600)
    (pt,) = res.points
    print(f"{engine} caps: {pt.caps} oom: {pt.oom} advice: {pt.advice} end: {pt.engine_end}")
    if pt.run_dir:
        limits = RunDir.open(pt.run_dir).read_json("summary", BenchReport).limits
        print(
            "\n".join(f"{x.load}: {x.binding} ({x.detail}; {x.scrapes} scrapes, cap {x.request_cap})" for x in limits)
        )
    assert pt.error is None and pt.engine_end is None, pt.error or pt.engine_end
    assert pt.caps["4"] == "requests"  # 1 sequence running, 3 waiting: the request-count cap
    assert pt.oom == {"1": 0, "4": 0}  # nothing ran out of memory: counted, and zero
    (line,) = [a for a in pt.advice if "request-count cap" in a]
    assert line.startswith(f"on {engine} at c=4 the request-count cap bound: raise {flag} (https://github.com/")


async def test_vllm_cpu_reads_the_request_cap_on_short_prompts_and_the_token_budget_on_long_ones(
    tmp_path, monkeypatch
) -> None:
    served, url, cmd = _setup("vllm", monkeypatch)
    launch = " ".join(w if w == "{cap}" else shlex.quote(w) for w in cmd)
    plan = BenchPlan(
        endpoints=[EndpointSpec(label="target", url=url, engine="vllm", model=served)],
        buckets=[32, 1920],
        output_tokens=16,
        concurrency=[8],
        duration_s=15,
        warmup_requests=1,
        scrape_interval_s=0.1,
        timeout_s=120,
        calibrate=False,
    )
    res = await run_sweep(launch, {"cap": ["2"]}, plan, url, tmp_path, ready_timeout_s=600)
    (pt,) = res.points
    print(f"vllm advice: {pt.advice} end: {pt.engine_end} error: {pt.error}")
    assert pt.error is None and pt.engine_end is None and pt.run_dir, pt.error or pt.engine_end
    limits = {x.bucket: x for x in RunDir.open(pt.run_dir).read_json("summary", BenchReport).limits}
    for x in limits.values():
        print(f"bucket {x.bucket} {x.load}: {x.binding} ({x.detail}; {x.scrapes} scrapes, cap {x.request_cap})")
    short, long = limits["32"], limits["1920"]
    assert short.request_cap == 2 and short.request_cap_source == "the launch command"
    assert short.binding == "requests", short.detail  # 2 running, 6 waiting: the request-count cap
    assert long.binding == "tokens", long.detail  # 1 running (its chunk fills the budget), 7 waiting
    assert short.oom == long.oom == 0
    assert any(
        a.startswith("on vllm at c=8 the request-count cap bound: raise --max-num-seqs (https://") for a in pt.advice
    )
    assert any(
        a.startswith("on vllm at c=8 the per-step token budget bound: raise --max-num-batched-tokens (https://")
        for a in pt.advice
    )
