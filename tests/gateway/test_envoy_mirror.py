"""The Envoy plane's mirror join (gateway/envoy/mirror.py): a mirrored copy and its primary's row meet by request id
in either order; copies of new-routed primaries are dropped; the shadow row has ShadowRecord's schema."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from switchover.config.gateway import ShadowConfig
from switchover.gateway.envoy.mirror import MirrorJoin
from switchover.gateway.ledger import Ledger, ledger_files
from switchover.ledger_record import Arm, RequestRow, ShadowRecord
from switchover.testing import FakeEngine

BODY = orjson.dumps({"prompt": "hi", "max_tokens": 4})
CFG = ShadowConfig(percent=100)


def _row(rid: str, routed: Arm) -> RequestRow:
    return RequestRow(
        ts=1.0,
        request_id=rid,
        path="/v1/completions",
        routed=routed,
        arm=routed,
        outcome="ok",
        status=200,
        stream=False,
    )


def _shadow_rows(run_dir: Path) -> list[dict]:
    rows = [orjson.loads(line) for f in ledger_files(run_dir) for line in f.read_bytes().splitlines()]
    return [r for r in rows if r.get("kind") == "shadow"]


async def test_copies_pair_with_primaries_in_either_order_and_new_routed_ones_are_dropped(tmp_path: Path) -> None:
    new = FakeEngine("new", model="new")
    async with new.running() as url:
        ledger = Ledger(tmp_path, 1 << 20, flush_interval_s=0.01)
        join = MirrorJoin(ledger)
        assert join.primary(_row("first-primary", "old")) is False  # no copy yet
        assert join.copy(CFG, url, None, "/v1/completions", "first-primary", BODY, 1.0) == "started"
        assert join.copy(CFG, url, None, "/v1/completions", "first-copy", BODY, 1.0) == "started"
        assert join.primary(_row("first-copy", "old")) is True  # its copy is running: shadowed
        join.primary(_row("to-new", "new"))
        assert join.copy(CFG, url, None, "/v1/completions", "to-new", BODY, 1.0) == "primary went to new"
        assert join.copy(CFG, url, None, "/v1/embeddings", "emb", BODY, 1.0) == "not a generation path"
        assert join.copy(CFG, url, None, "/v1/completions", "bad", b"not json", 1.0) == "not JSON"
        for _ in range(200):
            if join.written == 2:
                break
            await asyncio.sleep(0.02)  # a bounded poll: the mirrors run on the fake engine
        await join.close()
        ledger.close()
    rows = _shadow_rows(tmp_path)
    assert sorted(r["request_id"] for r in rows) == ["first-copy", "first-primary"]
    for r in rows:
        rec = ShadowRecord.model_validate(r)
        assert rec.routed == "old" and rec.shadow.status == 200 and rec.shadow.upstream == "new"
    assert new.stats.requests == 2  # the new-routed primary's copy never reached new


async def test_a_running_copy_is_cancelled_when_its_primary_went_to_new(tmp_path: Path) -> None:
    new = FakeEngine("new", model="new")
    async with new.running() as url:
        ledger = Ledger(tmp_path, 1 << 20, flush_interval_s=0.01)
        join = MirrorJoin(ledger)
        new.script(sequence=["hang"])
        assert join.copy(CFG, url, None, "/v1/completions", "r1", BODY, 1.0) == "started"
        task = join.running["r1"]
        for _ in range(200):
            if new.stats.in_flight:
                break
            await asyncio.sleep(0.01)  # a bounded poll: the copy is on new, hanging
        assert new.stats.in_flight == 1
        assert join.primary(_row("r1", "new")) is False
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 5)  # cancelled, not left hanging
        assert join.written == 0 and not join.running
        await join.close()
        ledger.close()
    assert _shadow_rows(tmp_path) == []
