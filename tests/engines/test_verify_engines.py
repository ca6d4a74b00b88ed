"""`verify` against the real bed: vLLM CPU (old) vs llama-server (new).

The tiny bed checks the long-input boundary against each server's real limit; the SmolLM2 bed (its own, started
here, ~3.5 GB and 30-60 s for vLLM) shows real greedy divergences between vLLM bf16 and llama.cpp Q4_1
(reference/testbed.md §7: 8 of 10 prompts matched exactly).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest

from switchover.probe import Target
from switchover.testbed import processes
from switchover.testbed.install import installed
from switchover.testbed.layout import Layout
from switchover.testing import missing as absent
from switchover.verify import BUILTIN, VerifyOptions, run_verify

pytestmark = pytest.mark.engines


@pytest.fixture(scope="module")
def smollm2_bed() -> Iterator[tuple[str, str, str]]:
    """Both engines on SmolLM2-135M-Instruct, on free ports, stopped afterwards."""
    layout = Layout.default()
    missing = installed(layout, with_smollm2=True)
    if missing:
        absent(f"SmolLM2 bed missing: {missing}")
    name = f"verify-smollm2-{os.getpid()}"
    state, _ = processes.up(
        layout,
        model="smollm2",
        name=name,
        old_port=processes.free_port(),
        new_port=processes.free_port(),
        timeout_s=600,
    )
    try:
        yield state.url("old"), state.url("new"), state.engines[0].served_name
    finally:
        processes.down(layout, name=name)


def test_long_input_boundary_matches_each_servers_real_context(bed: Any) -> None:
    r = asyncio.run(
        run_verify(
            Target(bed.old_url, bed.model), Target(bed.new_url, bed.model), BUILTIN[:2], VerifyOptions(structured=2)
        )
    )
    assert not r.partial and len(r.greedy) == 2
    old, new = r.long_inputs
    assert old.context == 2048 and new.context == 1024  # vLLM --max-model-len 2048; llama.cpp 4096 ctx / 4 slots
    for side in (old, new):
        assert [c.status for c in side.checks[:2]] == ["ok", "ok"]
        assert 0.55 * side.context <= side.checks[0].prompt_tokens <= 0.75 * side.context
        b = side.boundary
        assert b is not None and b.longest_ok_prompt_tokens is not None
        # the longest prompt that worked is just below the context, and the next step up failed with 400
        assert 0.95 * side.context <= b.longest_ok_prompt_tokens < side.context
        assert b.failure is not None and "HTTP 400" in b.failure
    assert all(s.total == 2 for s in r.structured)
    for side in r.structured:  # both engines take json_schema: every answer is valid JSON for its schema, or cut
        assert all(
            c.status == "valid" or (c.status == "invalid" and (c.reason or "").endswith("(hit max_tokens)"))
            for c in side.cases
        ), side.cases  # short by max_tokens (vLLM's grammar allows long whitespace)
        assert side.valid >= 1, side.cases  # greedy on the bed: at least the yes/no schema comes back valid


def test_smollm2_vllm_vs_llamacpp_shows_real_divergences(smollm2_bed: tuple[str, str, str]) -> None:
    old, new, model = smollm2_bed
    r = asyncio.run(
        run_verify(Target(old, model), Target(new, model), BUILTIN, VerifyOptions(structured=0, long_inputs=False))
    )
    s = r.summary
    assert s is not None and s.prompts == len(BUILTIN) and s.failed == 0
    # same weights, bf16 vs Q4_1: most prompts agree exactly, some diverge (near-ties flip)
    assert 0 < s.identical < s.prompts
    diverged = [d for d in r.greedy if not d.identical]
    assert all(d.first_char is not None and d.first_token is not None for d in diverged)
    assert s.token_agreement_mean is not None and 0.2 < s.token_agreement_mean < 1.0
    assert s.logprob_delta_mean is not None and s.logprob_delta_mean > 0  # logprobs from both engines
    print(
        "\n"
        + "\n".join(
            f"{d.id}: identical={d.identical} first_char={d.first_char} first_token="
            f"{d.first_token} agreement={d.token_agreement} flags={d.flags}"
            for d in r.greedy
        )
    )
    print(s.model_dump())


def test_an_engine_killed_mid_verify_gives_a_partial_report(bed: Any, tmp_path: Any) -> None:
    """A real llama-server of this test's own, SIGKILLed once the second prompt starts."""
    import signal
    import subprocess
    import time

    from switchover.testbed.layout import bed_models
    from switchover.wire.readiness import check_ready

    model = bed_models(bed.layout)[bed.key]
    port = processes.free_port()
    log = (tmp_path / "llama.log").open("wb")
    proc = subprocess.Popen(
        processes.llama_command(bed.layout, model, port, threads=1),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not asyncio.run(check_ready(url, max_ms=5000, connect_timeout_s=1)).ready:
            assert proc.poll() is None and time.monotonic() < deadline, f"llama-server did not start; see {log.name}"
            time.sleep(0.25)  # a bounded poll
        seen: list[str] = []

        def progress(msg: str) -> None:
            seen.append(msg)
            if msg.startswith("greedy") and len(seen) == 2:  # the second prompt is about to go out
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

        r = asyncio.run(
            run_verify(
                Target(bed.old_url, bed.model),
                Target(url, model.served_name),
                BUILTIN[:4],
                VerifyOptions(structured=0, long_inputs=False),
                on_progress=progress,
            )
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    assert r.partial and r.partial_reason and "went away" in r.partial_reason, r.partial_reason
    assert len(r.greedy) == 1 and r.summary is not None and r.summary.prompts == 1  # what was measured is kept
