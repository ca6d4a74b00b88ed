"""Which cap binds, on a real engine: a short `bench sweep` of llama-server with -np 1 (the helper also builds
vLLM CPU's --max-num-seqs 1 launch), at concurrency 1 and 4, so the request cap binds at 4; the verdict comes
from the engine's /metrics.
Uses its own engines on free ports (the shared bed's are left alone). The tiny model answers 4 requests of 48 tokens
in about 0.4 s on vLLM CPU, so the steps generate 128 tokens a request: long enough for 0.1 s scrapes to see the
queue."""

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
        cmd = [*processes.vllm_command(layout, model, port), "--max-num-seqs", "{cap}"]
    return model.served_name, f"http://127.0.0.1:{port}", cmd


# vLLM CPU is left out: on this shared 2-core host its /metrics scrapes took up to 2 s during a c=4 step and read
# running 0-1, waiting 0 (the queue formed before the engine core), so the verdict there was "none" in one run and
# "requests" (23 of 25 scrapes) in another; the verdict logic is the same for both engines (tests/bench).
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
        requests=16,
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
