"""Fault matrix (bounded): random faults on both arms; every request gets exactly one ledger row, none hangs.
The 10,000-request version is bench/gateway_reliability.py."""

from __future__ import annotations

from switchover.gateway.fault_matrix import fault_matrix


async def test_random_faults_give_exactly_one_ledger_outcome_each_and_nothing_hangs(tmp_path):
    r = await fault_matrix(tmp_path / "run", n=400, concurrency=32, seed=7)
    assert r["rows"] == r["requests"] == 400
    assert r["missing"] == 0 and r["duplicates"] == 0
    assert r["max_duration_s"] < r["bound_s"] + 2 * r["max_loop_lag_s"]  # timeouts, plus CPU starvation
    assert -1 not in r["client_statuses"] and -2 not in r["client_statuses"]  # no transport errors, no hangs
    assert r["fallbacks"] > 0 and r["outcomes"].get("failed_mid_stream", 0) > 0  # the faults really happened
    assert r["outcomes"].get("fallback_ok", 0) > 0 and r["outcomes"].get("ok", 0) > 0
