"""The typed ledger row (ledger_record.RequestRow / ShadowRow) writes the same JSON as the untyped dict rows the gateway
wrote before it: golden rows captured from the gateway at 7b0a914 (a dict per request, changed in place) for one
request of each kind, compared field by field with what the gateway writes now. Only the values that differ on every
run (time stamps, timings, the hashes keyed by a fresh deployment seed) are reduced to their type. The capture is
self-contained (no helper newer than the golden file), so it can be rerun on the old code: `PYTHONPATH=<old src>
python -m tests.gateway.test_ledger_row > tests/gateway/data/ledger_rows_golden.json`."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml

from switchover.config import load_migration
from switchover.gateway.app import Gateway
from switchover.gateway.server import running
from switchover.testing import FakeEngine

GOLDEN = Path(__file__).parent / "data" / "ledger_rows_golden.json"
VOLATILE = {"ts", "ttft_ms", "tpot_ms", "e2e_ms", "tenant", "bucket"}  # differ on every run: kept as their type
SEEDED = {"system_suffix", "user_suffix"}  # hashes keyed by the deployment's fresh seed: kept as their type
MODEL = "client-model"


def _chat(stream: bool = False, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": stream, "max_tokens": 4, **extra}


# (name, gateway config overrides, path, body (bytes: sent as is), headers)
SCENARIOS: list[tuple[str, dict[str, Any], str, Any, dict[str, str]]] = [
    ("ok_old_json", {"weight": 0}, "/v1/chat/completions", _chat(temperature=0.5, seed=1, stop=["x"]), {}),
    ("ok_new_stream", {"weight": 100}, "/v1/chat/completions", _chat(True), {}),
    ("ok_completions", {"weight": 0}, "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 3}, {}),
    ("status_500_old", {"weight": 0}, "/v1/chat/completions", _chat(), {"X-Fault": "status:500"}),
    ("fallback", {"weight": 100}, "/v1/chat/completions", _chat(), {"X-Fault": "status:503", "X-Fault-Arm": "new"}),
    ("mid_stream", {"weight": 0}, "/v1/chat/completions", _chat(True), {"X-Fault": "die_mid:1"}),
    ("no_usage", {"weight": 0}, "/v1/chat/completions", _chat(True), {"X-Fault": "no_usage"}),
    ("json_mode", {"weight": 0}, "/v1/chat/completions", _chat(response_format={"type": "json_object"}), {}),
    ("path_404", {"weight": 0}, "/v2/other", _chat(), {}),
    ("bad_json", {"weight": 0}, "/v1/chat/completions", b"{not json", {}),
    ("bad_field", {"weight": 0}, "/v1/chat/completions", _chat(max_tokens="4"), {}),
    ("override", {"weight": 0}, "/v1/chat/completions", _chat(), {"x-switchover-route": "new"}),
    ("shadowed", {"weight": 0, "shadow": {"percent": 100}}, "/v1/chat/completions", _chat(True), {}),
    ("prompt_logged", {"weight": 0, "_log_prompts": True}, "/v1/chat/completions", _chat(), {}),
    ("models_get", {"weight": 0}, "/v1/models", None, {}),
]


def _normalised(line: bytes) -> dict[str, Any]:
    row = orjson.loads(line)
    for key in VOLATILE & row.keys():
        row[key] = type(row[key]).__name__
    if isinstance(row.get("shadow"), dict):
        for key in VOLATILE & row["shadow"].keys():
            row["shadow"][key] = type(row["shadow"][key]).__name__
    if isinstance(row.get("client"), dict):
        for key in SEEDED & row["client"].keys():
            row["client"][key] = type(row["client"][key]).__name__
    return row


async def _one(tmp: Path, name: str, over: dict[str, Any], path: str, body: Any, headers: dict[str, str]) -> Any:
    over = dict(over)
    log_prompts = over.pop("_log_prompts", False)
    old, new = FakeEngine("old", model=MODEL), FakeEngine("new", model="engine-new-name")
    async with old.running() as ourl, new.running() as nurl:
        config = {
            "old": {"url": ourl, "engine": "vllm"},
            "new": {"url": nurl, "engine": "llamacpp"},
            "gateway": {"run_dir": str(tmp / "run"), "fallback": {"on_timeout_ms": 500}, **over},
        }
        cfg = tmp / "switchover.yaml"
        cfg.write_text(yaml.safe_dump(config))
        gw = Gateway(load_migration(cfg), cfg, log_prompts=log_prompts)
        async with running(gw, port=0) as url, aiohttp.ClientSession() as http:
            h = {"x-tenant-id": "team-a", "x-request-id": f"req-{name}", **headers}
            data = body if isinstance(body, bytes) else orjson.dumps(body)
            method = http.get if body is None else http.post
            async with method(url + path, data=None if body is None else data, headers=h) as r:
                await r.read()
            for _ in range(200):  # the mirror's row is written when the mirror ends
                if gw.ledger.shadows_written or "shadow" not in over:
                    break
                await asyncio.sleep(0.02)
        lines = [ln for f in sorted((tmp / "run").glob("ledger-*.jsonl")) for ln in f.read_bytes().splitlines()]
    return [_normalised(ln) for ln in lines if ln]


async def capture(tmp: Path) -> dict[str, Any]:
    """Every scenario's ledger lines, normalised, by scenario name."""
    out: dict[str, Any] = {}
    for i, (name, over, path, body, headers) in enumerate(SCENARIOS):
        d = tmp / f"s{i}"
        d.mkdir()
        out[name] = await _one(d, name, over, path, body, headers)
    return out


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return asyncio.run(capture(tmp_path_factory.mktemp("rows")))


@pytest.mark.parametrize("name", [s[0] for s in SCENARIOS])
def test_typed_rows_write_the_same_json_as_the_dict_rows_did(name: str, captured: dict[str, Any]) -> None:
    golden = orjson.loads(GOLDEN.read_bytes())
    assert captured[name] == golden[name]


def assert_schema_order(captured: dict[str, Any]) -> None:
    """Every captured row's keys (less kind) in the order of its typed row's fields."""
    from switchover.ledger_record import RequestRow, ShadowRow

    order = {f.name: i for i, f in enumerate(fields(RequestRow))}
    shadow_order = {f.name: i for i, f in enumerate(fields(ShadowRow))}
    for rows in captured.values():
        for row in rows:
            keys = [k for k in row if k != "kind"]
            rank = shadow_order if row.get("kind") == "shadow" else order
            assert keys == sorted(keys, key=rank.__getitem__), keys


def test_request_rows_are_written_in_schema_order(captured: dict[str, Any]) -> None:
    assert_schema_order(captured)


def test_the_typed_rows_hold_exactly_the_ledger_schemas_fields() -> None:
    from switchover.ledger_record import LedgerRecord, RequestRow, ShadowRecord, ShadowRow

    # a request row leaves `kind` out, and no writer embeds `shadow` any more (older ledgers did)
    assert [f.name for f in fields(RequestRow)] == [k for k in LedgerRecord.model_fields if k not in ("kind", "shadow")]
    assert [f.name for f in fields(ShadowRow)] == [k for k in ShadowRecord.model_fields if k != "kind"]


def test_a_typed_row_reads_back_as_the_readers_model_with_nothing_lost() -> None:
    from switchover.ledger_files import parse_row
    from switchover.ledger_record import LedgerRecord, RequestRow, ShadowRecord, ShadowResult, ShadowRow

    row = RequestRow(ts=1.5, request_id="r", path="/v1/completions", outcome="ok", status=200, stream=True)
    row.client, row.ttft_ms, row.arm = {"set": ["seed"], "seed": True, "top_p": None}, 2.5, "new"
    back = parse_row(row.to_json())
    assert isinstance(back, LedgerRecord) and back.client is not None
    assert back.model_dump(exclude_none=True, exclude={"kind", "client"}) == {
        k: v for k, v in row.as_dict().items() if v is not None and k != "client"
    }
    assert (back.client.set, back.client.seed, back.client.top_p) == (["seed"], True, None)
    shadow = ShadowRow.of(row)
    shadow.ts, shadow.shadow = 2.0, ShadowResult(upstream="new", status=500, error="status_500")
    again = parse_row(shadow.to_json())
    assert isinstance(again, ShadowRecord) and again.shadow.error == "status_500" and again.arm == "new"


def test_the_golden_file_covers_every_outcome_the_fake_can_produce_here() -> None:
    golden = orjson.loads(GOLDEN.read_bytes())
    outcomes = {row["outcome"] for rows in golden.values() for row in rows}
    assert outcomes >= {"ok", "fallback_ok", "error", "failed_mid_stream", "bad_request"}
    assert any(row.get("kind") == "shadow" for rows in golden.values() for row in rows)


if __name__ == "__main__":  # capture the golden rows with whatever switchover is importable
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        sys.stdout.write(orjson.dumps(asyncio.run(capture(Path(d))), option=orjson.OPT_INDENT_2).decode() + "\n")
