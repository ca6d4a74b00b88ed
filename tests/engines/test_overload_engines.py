"""The overload probe on both test-bed engines: past their limits, do they reject or make requests wait?

llama-server serves 4 slots (`-np 4` in the test bed) and defers what does not fit (its `requests_deferred` gauge);
vLLM has no overload status unless `--max-num-queued-reqs` is set (engine profiles). Bounded: concurrency 1-8,
two waves, 32 tokens each (30 requests per engine)."""

from __future__ import annotations

import pytest

from switchover.engines.profile import load_profile
from switchover.probe.overload import run_overload

pytestmark = pytest.mark.engines


async def test_llama_server_makes_requests_wait_past_its_slots_and_never_rejects(bed) -> None:  # type: ignore[no-untyped-def]
    r = await run_overload(
        bed.new_url,
        model=bed.model,
        profile=load_profile("llamacpp"),
        max_concurrency=8,
        waves=2,
        max_tokens=32,
        timeout_s=120,
    )
    print(
        "llama-server:",
        r.verdict,
        r.reason,
        [(s.concurrency, s.ok, s.rejected, s.waiting_max, s.ttft_p50_ms) for s in r.steps],
    )
    assert sum(s.rejected for s in r.steps) == 0 and all(s.ok == s.sent for s in r.steps)
    assert r.slots == 4
    assert r.verdict == "queues" and r.first_queue_at is not None and r.first_queue_at > r.slots // 2
    assert r.waiting_metric == "llamacpp:requests_deferred"


async def test_vllm_does_not_reject_without_a_queue_limit(bed) -> None:  # type: ignore[no-untyped-def]
    r = await run_overload(
        bed.old_url,
        model=bed.model,
        profile=load_profile("vllm"),
        max_concurrency=8,
        waves=2,
        max_tokens=32,
        timeout_s=120,
    )
    print(
        "vLLM:",
        r.verdict,
        r.reason,
        [(s.concurrency, s.ok, s.rejected, s.waiting_max, s.ttft_p50_ms, s.tpot_p50_ms) for s in r.steps],
    )
    assert sum(s.rejected for s in r.steps) == 0 and all(s.ok == s.sent for s in r.steps)
    assert r.verdict in ("queues", "slows", "neither") and r.waiting_metric == "vllm:num_requests_waiting"
    assert all(s.waiting_max is not None for s in r.steps)  # its gauge was read at every level
