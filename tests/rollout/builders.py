"""Builders for ledger rows and migration files used across the rollout tests."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Literal
from unittest.mock import patch

import numpy as np
import orjson
import pytest

from switchover.cli.app import main
from switchover.ledger_record import LedgerRecord, LedgerRow, ShadowRecord, ShadowResult

_ids = itertools.count()


class Clock:
    """A settable clock for Rollout(clock=...)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run `switchover rollout ARGS` in-process through the real entry point (errors → one line, exit code)."""
    capsys.readouterr()
    with patch.object(sys, "argv", ["switchover", "rollout", *args]), pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def at_five_percent_by_cli(config_file: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """Through the CLI (run from the config's folder): shadow, then forced past it to 5 %; the ledger folder."""
    ledger = config_file.parent / "gw"
    write_ledger(ledger, [])
    cli(capsys, "advance")
    cli(capsys, "advance", "--force", "-m", "skip shadow for this test")
    return ledger


def row(
    ts: float,
    routed: str = "old",
    *,
    arm: str | None = None,
    outcome: str = "ok",
    ttft: float | None = 50.0,
    tpot: float | None = 10.0,
    tokens: int | None = 20,
    finish: str | None = "stop",
    status: int = 200,
    shadow: ShadowResult | None = None,
    shadowed: bool | None = None,
) -> LedgerRecord:
    arm = arm or ("old" if outcome == "fallback_ok" else routed)
    return LedgerRecord(
        ts=ts,
        request_id=f"r{next(_ids)}",
        tenant="t",
        bucket=1,
        path="/v1/completions",
        routed=routed,
        route_reason="weight",
        arm=arm,
        outcome=outcome,
        status=status,
        stream=True,
        ttft_ms=ttft,
        tpot_ms=tpot,
        completion_tokens=tokens,
        tokens_source="usage" if tokens is not None else None,  # as the gateway writes rows
        finish_reason=finish,
        shadow=shadow,
        shadowed=shadowed,
    )


def shadow_row(primary: LedgerRecord, result: ShadowResult, ts: float | None = None) -> ShadowRecord:
    """The shadow row the gateway writes when `primary`'s mirror ends: the primary's fields, and the result."""
    fields = ShadowRecord.model_fields.keys() - {"kind", "ts", "shadow"}
    copied = {k: getattr(primary, k) for k in fields}
    return ShadowRecord(ts=primary.ts + 0.05 if ts is None else ts, shadow=result, **copied)


def traffic(
    ts0: float,
    n: int,
    *,
    new_share: float = 0.5,
    new_outcome: str = "ok",
    ttft_scale: float = 1.0,
    seed: int = 0,
    shadow: bool = False,
    shadow_ttft_scale: float = 1.0,
    shadow_as: Literal["rows", "embedded"] = "rows",
) -> list[LedgerRow]:
    """n requests one 0.1 s apart; a share routed to new; optional shadow results of old answers, as
    separate shadow rows (today's gateway) or embedded in the request row (older gateways)."""
    rng = np.random.default_rng(seed)
    rows: list[LedgerRow] = []
    for i in range(n):
        ts = ts0 + i * 0.1
        routed = "new" if rng.random() < new_share else "old"
        ttft = float(rng.lognormal(3.5, 0.3))
        tpot = float(rng.lognormal(2.0, 0.2))
        tokens = int(rng.integers(10, 60))
        sh = None
        if shadow and routed == "old":
            sh = ShadowResult(
                upstream="new",
                status=200,
                ttft_ms=float(rng.lognormal(3.5, 0.3)) * shadow_ttft_scale,
                tpot_ms=float(rng.lognormal(2.0, 0.2)),
                completion_tokens=int(rng.integers(10, 60)),
                finish_reason="stop",
            )
        if routed == "new":
            if new_outcome == "ok":
                rows.append(row(ts, "new", ttft=ttft * ttft_scale, tpot=tpot, tokens=tokens))
            else:
                rows.append(
                    row(
                        ts,
                        "new",
                        outcome=new_outcome,
                        status=200 if new_outcome == "fallback_ok" else 502,
                        ttft=None if new_outcome != "fallback_ok" else ttft,
                        tpot=None,
                        tokens=None,
                        finish=None,
                    )
                )
        elif sh is not None and shadow_as == "rows":
            primary = row(ts, "old", ttft=ttft, tpot=tpot, tokens=tokens, shadowed=True)
            rows += [primary, shadow_row(primary, sh)]
        else:
            rows.append(row(ts, "old", ttft=ttft, tpot=tpot, tokens=tokens, shadow=sh))
    return rows


def write_ledger(folder: Path, rows: list[LedgerRow], index: int = 0) -> Path:
    """Rows as the gateway writes them (None left out; request rows without `kind`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"ledger-{index:05d}.jsonl"
    with path.open("ab") as fh:
        for r in rows:
            data = r.model_dump(mode="json", exclude_none=True)
            if isinstance(r, LedgerRecord):
                del data["kind"]
            fh.write(orjson.dumps(data) + b"\n")
    return path


CONFIG = """\
# the migration (comments must survive the rollout's edits)
old:
  url: http://127.0.0.1:18001
  engine: vllm
new:
  url: http://127.0.0.1:18002
  engine: llamacpp
gateway:
  weight: 0      # percent of tenants on new
  rollback: false
  shadow:
    percent: 20
  run_dir: gw
rollout:
  stages: [shadow, 5, 20]
  window_s: 3600
  gates:
    min_samples: 30
  entry:
    enabled: false   # these tests judge the stage gates; the entry evidence is tested in test_entry*.py
"""


def never_run_config(tmp_path: Path) -> Path:
    """A migration with a rollout initialised whose gateway has never run: its run_dir (the ledger) is not there."""
    from tests.cli.runner import run_cli

    p = tmp_path / "switchover.yaml"
    p.write_text(
        "old: {url: 'http://127.0.0.1:9', engine: vllm}\n"
        "new: {url: 'http://127.0.0.1:10', engine: llamacpp}\n"
        "gateway:\n  run_dir: never-written\n"
    )
    code, _, err, _ = run_cli(["rollout", "init", "-c", str(p)])
    assert code == 0, err
    return p
