"""Builders for ledger rows and migration files used across the rollout tests."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import orjson

from switchover.gateway.ledger_record import LedgerRecord, ShadowResult

_ids = itertools.count()


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
    )


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
) -> list[LedgerRecord]:
    """n requests one 0.1 s apart; a share routed to new; optional shadow results next to old answers."""
    rng = np.random.default_rng(seed)
    rows = []
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
        else:
            rows.append(row(ts, "old", ttft=ttft, tpot=tpot, tokens=tokens, shadow=sh))
    return rows


def write_ledger(folder: Path, rows: list[LedgerRecord], index: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"ledger-{index:05d}.jsonl"
    with path.open("ab") as fh:
        for r in rows:
            fh.write(orjson.dumps(r.model_dump(mode="json")) + b"\n")
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
"""
