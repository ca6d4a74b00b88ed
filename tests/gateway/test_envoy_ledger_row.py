"""The Envoy plane's ledger rows (typed: ledger_record.RequestRow / ShadowRow) write the same JSON as the dict rows
the plane wrote before them: golden rows captured at 098ef5e (accesslog.to_row's dicts, MirrorJoin's dict shadow
rows) from access-log lines of every kind, fed through EnvoyPlane.take_line as the running plane feeds them (no Envoy
process needed). Only the shadow row's wall-clock `ts` is reduced to its type. The capture is self-contained, so it
can be rerun on old code: `PYTHONPATH=<old src> python -m tests.gateway.test_envoy_ledger_row >
tests/gateway/data/envoy_ledger_rows_golden.json`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from switchover.config import load_migration
from switchover.gateway.envoy.plane import EnvoyPlane
from switchover.gateway.ledger import ledger_files
from switchover.ledger_record import ShadowResult
from tests.gateway.test_envoy_accesslog import line
from tests.gateway.test_ledger_row import assert_schema_order

GOLDEN = Path(__file__).parent / "data" / "envoy_ledger_rows_golden.json"
SEED = b"k" * 32


_line = line  # the access-log line of tests/gateway/test_envoy_accesslog.py


_NEW = {"cluster": "new_then_old", "host": "127.0.0.1:2"}
_LUA = {
    "tenant_hash": "00000000000004d2",
    "bucket": 1234,
    "usage": True,
    "completion_tokens": 11,
    "prompt_tokens": 3,
    "finish_reason": "stop",
    "ttft_ms": 10.5,
}
_MIRROR = ShadowResult(
    upstream="new", dropped=False, status=200, ttft_ms=4.0, tpot_ms=1.5, e2e_ms=20.0, completion_tokens=4
)

# (name, access-log line fields; "_mirror": "before" / "after" the primary's line, the mirror's result arrives)
SCENARIOS: list[tuple[str, dict[str, Any]]] = [
    ("ok_old_json", {}),
    ("ok_new", _NEW),
    ("fallback_retried", {"cluster": "new_then_old", "attempts": 2}),
    ("fallback_connect", {"cluster": "new_then_old", "attempts": 2, "flags": "UF"}),
    ("kill_switch", {"route": "kill_switch"}),
    ("error_new_503", {"status": 503, "flags": "UF,URX", **_NEW}),
    ("error_new_502", {"status": 502, **_NEW}),
    ("not_allowed_404", {"route": "not_allowed", "status": 404, "cluster": "-", "host": "-"}),
    ("too_large_413", {"status": 413, "host": "-"}),
    ("client_disconnected", {"flags": "DC", "status": 0}),
    ("mid_stream", {"flags": "UPE", "content_type": "text/event-stream"}),
    ("no_request_ms", {"request_ms": "-"}),
    ("lua_stream", {"content_type": "text/event-stream", "duration_ms": 112, **_LUA}),
    ("lua_not_usage", {**_LUA, "usage": None}),
    ("raw_tenant", {"tenant_hash": "not-a-hash", "bucket": 12}),
    ("anonymous", {"tenant": "-"}),
    ("shadow_result_first", {"content_type": "text/event-stream", **_LUA, "_mirror": "before"}),
    ("shadow_primary_first", {**_LUA, "_mirror": "after"}),
    ("shadow_of_new_dropped", {**_NEW, "_mirror": "before"}),
]


def _plane(tmp: Path) -> EnvoyPlane:
    cfg = tmp / "switchover.yaml"
    cfg.write_text(
        "old: {url: 'http://127.0.0.1:1', engine: vllm}\nnew: {url: 'http://127.0.0.1:2', engine: vllm}\n"
        "gateway: {data_plane: envoy, listen: {port: 9}, run_dir: run}\n"
    )
    plane = EnvoyPlane(load_migration(cfg), cfg)
    plane.seed = SEED
    return plane


def _one(tmp: Path, name: str, over: dict[str, Any]) -> list[dict[str, Any]]:
    plane = _plane(tmp)
    over = {"request_id": f"req-{name}", **over}
    when = over.pop("_mirror", None)
    if when == "before":
        plane.mirrors._done(over["request_id"], _MIRROR)
    plane.take_line(_line(**over))
    if when == "after":
        plane.mirrors._done(over["request_id"], _MIRROR)
    plane.ledger.close()
    rows = [orjson.loads(ln) for f in ledger_files(plane.run_dir) for ln in f.read_bytes().splitlines() if ln]
    for row in rows:
        if row.get("kind") == "shadow":
            row["ts"] = type(row["ts"]).__name__  # the time the mirror's row was written
    return rows


def capture(tmp: Path) -> dict[str, Any]:
    """Every scenario's ledger rows, by scenario name."""
    out: dict[str, Any] = {}
    for i, (name, over) in enumerate(SCENARIOS):
        d = tmp / f"s{i}"
        d.mkdir()
        out[name] = _one(d, name, over)
    return out


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return capture(tmp_path_factory.mktemp("envoy-rows"))


@pytest.mark.parametrize("name", [s[0] for s in SCENARIOS])
def test_the_envoy_planes_typed_rows_write_the_same_json_as_its_dict_rows_did(name: str, captured: dict) -> None:
    golden = orjson.loads(GOLDEN.read_bytes())
    assert captured[name] == golden[name]


def test_the_envoy_planes_rows_are_in_schema_order(captured: dict[str, Any]) -> None:
    assert_schema_order(captured)


def test_the_envoy_golden_file_covers_both_shadow_orders_and_every_outcome_envoy_logs() -> None:
    golden = orjson.loads(GOLDEN.read_bytes())
    outcomes = {row["outcome"] for rows in golden.values() for row in rows}
    assert outcomes >= {"ok", "fallback_ok", "error", "failed_mid_stream", "bad_request", "client_disconnected"}
    assert [r.get("kind") for r in golden["shadow_result_first"]] == ["shadow", None]
    assert golden["shadow_result_first"][1]["shadowed"] is True
    assert [r.get("kind") for r in golden["shadow_primary_first"]] == [None, "shadow"]
    assert [r.get("kind") for r in golden["shadow_of_new_dropped"]] == [None]


if __name__ == "__main__":  # capture the golden rows with whatever switchover is importable
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        sys.stdout.write(orjson.dumps(capture(Path(d)), option=orjson.OPT_INDENT_2).decode() + "\n")
