"""What the clients send, through the gateway to the real engines: vLLM CPU (old) and a llama-server (new) answer,
and every request row carries the client's sampling fields (never its text); the client mix then names the
defaults the unset requests get differently on llama.cpp."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest

from switchover.rollout.client_defaults import ClientMixCounter, client_mix
from tests.engines.test_gateway_engines import gateway, new_arm, settle  # noqa: F401 - new_arm is a fixture

pytestmark = pytest.mark.engines
ENDING = " Reply in one short plain sentence, no markdown, no lists, no code blocks please."


async def _chat(h: aiohttp.ClientSession, url: str, model: str, tenant: str, **extra: Any) -> int:
    body = {
        "model": model,
        "max_tokens": 4,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": f"Question {tenant}." + ENDING},
        ],
        **extra,
    }
    async with h.post(
        url + "/v1/chat/completions",
        data=orjson.dumps(body),
        headers={"x-tenant-id": tenant, "Content-Type": "application/json"},
        timeout=aiohttp.ClientTimeout(total=60),
    ) as r:
        await r.read()
        return r.status


async def test_ledger_rows_carry_the_client_sampling_fields_from_both_real_arms(bed, new_arm, tmp_path):  # noqa: F811
    async with (
        gateway(tmp_path, bed.old_url, new_arm.url, weight=50, shadow={"percent": 0}) as (gw, url, _, _),
        aiohttp.ClientSession() as h,
    ):
        tenants = [f"client-{i}" for i in range(12)]
        for i, t in enumerate(tenants):
            extra: dict[str, Any] = {"temperature": 0.2, "stop": ["\n\n"], "seed": 3} if i % 3 == 0 else {}
            assert await _chat(h, url, bed.model, t, **extra) == 200
        rows = await settle(gw, len(tenants))
    assert {r.arm for r in rows} == {"old", "new"}  # both real engines answered
    by_tenant = {r.tenant: r for r in rows}
    assert len(by_tenant) == len(tenants) and all(r.client is not None for r in rows)
    set_ = [r for r in rows if r.client is not None and "temperature" in r.client.set]
    assert len(set_) == 4 and all(
        r.client.temperature == 0.2 and r.client.stop == 1 and r.client.seed for r in set_ if r.client is not None
    )
    assert len({r.client.user_suffix for r in rows if r.client is not None}) == 1  # one fixed ending, one hash
    ledger = b"".join(p.read_bytes() for p in gw.run_dir.glob("ledger-*.jsonl"))
    assert b"markdown" not in ledger and b"terse" not in ledger  # the text never reaches the ledger
    counter = ClientMixCounter()
    for r in rows:
        counter.add(r)
    mix = client_mix(counter, "vllm", "llamacpp")
    temp = next(f for f in mix.findings if f.field == "temperature")
    assert temp.share == pytest.approx(8 / 12) and mix.suffixes[0].share == 1.0
