"""Ledger evidence for the gates and comparisons: bad lines are skipped and counted (never fatal), outcomes
that say nothing about an arm never count as its errors, shadow pairs come from shadow rows and from older
ledgers that embed the result."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from switchover.config import load_migration
from switchover.config.rollout import GateName, GateThresholds
from switchover.ledger_files import read_ledger_rows
from switchover.ledger_record import CLIENT_OUTCOMES, NOT_AN_ARM_OUTCOMES, LedgerRecord, ShadowRecord
from switchover.rollout.compare import compare_samples, samples_from_ledger
from switchover.rollout.controller import Rollout
from switchover.rollout.gates import evaluate, stats_from_ledger
from tests.rollout.builders import Clock, at_five_percent_by_cli, cli, row, traffic, write_ledger

TH = GateThresholds(min_samples=50, max_error_rate=0.02)


def _garbage(path: Path, *lines: bytes) -> None:
    with path.open("ab") as fh:
        for line in lines:
            fh.write(line + b"\n")


def test_bad_lines_are_skipped_and_counted_not_fatal(tmp_path: Path) -> None:
    p = write_ledger(tmp_path, traffic(0.0, 3))
    _garbage(p, b"not json", b'{"ts": 1.0, "outcome": "ok"}')
    write_ledger(tmp_path, traffic(10.0, 2), index=1)
    with (tmp_path / "ledger-00001.jsonl").open("ab") as fh:
        fh.write(b'{"ts": 1')  # being written
    rows, skipped = read_ledger_rows(tmp_path)
    assert len(rows) == 5
    assert (skipped.bad_lines, skipped.torn_tail) == (2, 1)
    assert skipped.examples[0] == "ledger-00000.jsonl:4: not JSON"
    rows, skipped = read_ledger_rows(p)  # one file: it is the newest, its lines are all complete
    assert (len(rows), skipped.bad_lines, skipped.torn_tail) == (3, 2, 0)
    rows, skipped = read_ledger_rows(tmp_path / "missing")  # not written yet: nothing recorded, said in the note
    assert rows == [] and skipped.missing == str(tmp_path / "missing")
    assert "no ledger at" in (skipped.note() or "")  # a --ledger the user typed is checked by the CLI (exit 2)


def test_window_stats_say_how_many_lines_were_skipped(tmp_path: Path) -> None:
    _garbage(write_ledger(tmp_path, traffic(0.0, 100, seed=2)), b"\xff\xfe")
    got = read_ledger_rows(tmp_path)
    s = stats_from_ledger(got.rows, window_s=60, with_shadow=True, th=TH, skipped=got.skipped)
    assert s.ledger_bad_lines == 1 and s.new.requests + s.old.requests == 100
    assert s.warnings == ["1 ledger line could not be read and was skipped (ledger-00000.jsonl:101: not JSON)"]
    assert s.shadow is not None and s.shadow.ledger_bad_lines == 1


@pytest.mark.parametrize(
    ("outcome", "routed", "errors", "verdict"),
    [
        ("error", "new", 20, "fail"),  # the control: an arm's own errors do count
        ("failed_mid_stream", "new", 20, "fail"),
        ("bad_request", "new", 0, "pass"),
        ("bad_request", None, 0, "pass"),
        ("unauthorized", None, 0, "pass"),
        ("refused", None, 0, "pass"),
        ("refused", "new", 0, "pass"),
        ("drain_cutoff", "new", 0, "pass"),
        ("gateway_error", "new", 0, "pass"),
        ("gateway_error", None, 0, "pass"),
        ("client_disconnected", "new", 0, "pass"),
    ],
)
def test_outcomes_that_are_not_the_arms_never_move_its_error_rate(
    outcome: str, routed: str | None, errors: int, verdict: str
) -> None:
    ok = [row(float(i), "new") for i in range(100)]
    odd = [
        row(100.0 + i, "new", outcome=outcome, status=400, ttft=None, tpot=None, tokens=None, finish=None).model_copy(
            update={"routed": routed, "arm": routed}
        )
        for i in range(20)
    ]
    s = stats_from_ledger(ok + odd, window_s=60, with_shadow=False, th=TH)
    excluded = outcome in NOT_AN_ARM_OUTCOMES
    assert (s.new.requests, s.new.errors) == (100 if excluded else 120, errors)
    assert s.old.requests == 0 and s.new.ttft_n == 100
    [gate] = evaluate(s, [GateName.ERROR_RATE], TH)
    assert gate.verdict == verdict, gate.reason
    counted = {
        "client_errors": 20 if outcome in CLIENT_OUTCOMES else 0,
        "drain_cutoffs": 20 if outcome == "drain_cutoff" else 0,
        "gateway_errors": 20 if outcome == "gateway_error" else 0,
        "client_disconnects": 20 if outcome == "client_disconnected" else 0,
    }
    assert {k: getattr(s, k) for k in counted} == counted
    assert bool(s.notes or s.warnings) == excluded and bool(s.warnings) == (outcome == "gateway_error")
    if outcome == "gateway_error":
        assert "20 requests failed inside the gateway itself" in s.warnings[0]


def test_arm_comparison_leaves_out_what_is_not_an_arms(tmp_path: Path) -> None:
    rows = traffic(0.0, 100, new_share=0.5, seed=6)
    n_new = sum(1 for r in rows if r.routed == "new")
    odd = [row(200.0 + i, "new", outcome=o, status=503) for i, o in enumerate(sorted(NOT_AN_ARM_OUTCOMES))]
    odd.append(row(300.0, "new", outcome="refused", status=503).model_copy(update={"routed": None, "arm": None}))
    old, new = samples_from_ledger([*rows, *odd], "arms")
    assert len(new["error_code"]) == n_new and set(new["error_code"]) == {"200"}
    assert len(old["error_code"]) == 100 - n_new


def _pairs(rows: list) -> tuple[list[float], list[float]]:
    old, new = samples_from_ledger(rows, "shadow")
    return old["ttft_ms"], new["ttft_ms"]


def test_shadow_pairs_come_from_shadow_rows_and_from_legacy_embedded_results() -> None:
    as_rows = traffic(0.0, 300, new_share=0.0, shadow=True, shadow_ttft_scale=1.6, seed=3)
    legacy = traffic(0.0, 300, new_share=0.0, shadow=True, shadow_ttft_scale=1.6, seed=3, shadow_as="embedded")
    assert sum(isinstance(r, ShadowRecord) for r in as_rows) == 300
    assert not any(isinstance(r, ShadowRecord) for r in legacy)
    assert all(isinstance(r, LedgerRecord) and r.shadow is not None for r in legacy)
    assert _pairs(as_rows) == _pairs(legacy) and len(_pairs(as_rows)[0]) == 300
    old, new = samples_from_ledger(as_rows, "shadow")
    assert compare_samples(old, new, mode="shadow").differs == ["ttft_ms"]
    # a ledger that spans an upgrade holds both kinds; a request with both is counted once
    shadow_ids = [r.request_id for r in as_rows[:200] if isinstance(r, ShadowRecord)]
    both = legacy[250].model_copy(update={"request_id": shadow_ids[0]})
    mixed = legacy[:100] + as_rows[:200] + [both]
    assert len(shadow_ids) == 100 and len(_pairs(mixed)[0]) == 100 + 100


def test_shadow_pairs_skip_primaries_that_say_nothing_about_old() -> None:
    rows = traffic(0.0, 20, new_share=0.0, shadow=True, seed=4)
    shadows = [r for r in rows if isinstance(r, ShadowRecord)]
    rows[1] = shadows[0].model_copy(update={"outcome": "client_disconnected"})
    rows[3] = shadows[1].model_copy(update={"outcome": "drain_cutoff"})
    assert len(_pairs(rows)[1]) == 18


def _rollout_in_shadow(config_file: Path, entered: float) -> Path:
    """A rollout in its shadow stage since `entered`; returns the ledger folder."""
    ledger = config_file.parent / "gw"
    ledger.mkdir()
    Rollout(load_migration(config_file), config_file, clock=Clock(entered)).advance(why="start shadow")
    return ledger


def test_cli_gates_with_a_bad_line_exits_by_the_verdict_and_reports_it(
    config_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(config_file.parent)
    now = time.time()
    ledger = _rollout_in_shadow(config_file, now - 1000)
    p = write_ledger(ledger, traffic(now - 900, 400, new_share=0.0, shadow=True, seed=11))
    _garbage(p, b"{not json", b'{"kind": "shadow", "ts": 1.0}')
    code, out, err = cli(capsys, "gates", "--json")
    report = orjson.loads(out)
    assert code == 0, (err, report["results"])  # every gate passes: the bad lines do not stop it
    assert report["decision"] == "advance" and report["ledger_bad_lines"] == 2
    assert report["stats"]["ledger_bad_lines"] == 2
    assert "ledger-00000.jsonl:" in report["stats"]["warnings"][0]
    code, out, _ = cli(capsys, "gates")
    assert code == 0 and "2 ledger lines could not be read and were skipped" in " ".join(out.split())
    code, out, _ = cli(capsys, "compare", "--json")
    assert code == 0 and orjson.loads(out)["ledger_bad_lines"] == 2
    code, out, _ = cli(capsys, "compare", "--mode", "arms", "--json")  # streamed: counted once read to the end
    assert code == 0 and orjson.loads(out)["ledger_bad_lines"] == 2


def test_cli_gates_holds_with_exit_1_not_2_on_a_ledger_with_only_a_bad_line(
    config_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(config_file.parent)
    ledger = _rollout_in_shadow(config_file, time.time() - 1000)
    _garbage(ledger / "ledger-00000.jsonl", b"garbage")
    code, out, err = cli(capsys, "gates", "--json")
    assert code == 1, err
    assert orjson.loads(out)["decision"] == "hold" and orjson.loads(out)["ledger_bad_lines"] == 1


def test_cli_watch_still_rolls_back_past_a_bad_line(
    config_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(config_file.parent)
    ledger = at_five_percent_by_cli(config_file, capsys)
    p = write_ledger(ledger, traffic(time.time(), 60, new_share=1.0, new_outcome="error"), index=1)
    _garbage(p, b"\x00\x01 torn by a full disk")
    write_ledger(ledger, traffic(time.time(), 5, new_share=1.0, new_outcome="error"), index=2)
    code, out, _ = cli(capsys, "watch", "--interval", "0.01", "--max-checks", "3")
    assert code == 1 and "rolled back 5% → shadow" in out
    assert "1 ledger line could not be read" in " ".join(out.split())


def test_a_window_is_read_in_one_pass_without_holding_its_rows_and_judged_as_from_the_rows(tmp_path: Path) -> None:
    import tracemalloc

    from switchover.config.rollout import RolloutSettings
    from switchover.rollout.custom_gates import judge_ledger_gate
    from switchover.rollout.evidence import judge_custom, read_window
    from switchover.rollout.rows import row_view

    rows = traffic(1000.0, 10_000, new_share=0.5, seed=9)
    write_ledger(tmp_path, rows)
    settings = RolloutSettings.model_validate(
        {
            "gates": {"min_samples": 50},
            "custom_gates": [
                {"name": "length", "builtin": "output_length_shift", "by": "task_type"},
                {"name": "short", "ledger": {"fail_when": "completion_tokens < 12"}, "max": 0.5, "max_increase": 0.1},
            ],
        }
    )
    tracemalloc.start()
    try:
        window = read_window(
            settings, lambda: tmp_path, since=0.0, now=1e10, with_shadow=False, gates=settings.custom_gates
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8e6, f"{peak / 1e6:.1f} MB"  # the 10,000 rows as objects are ~30 MB: they were not kept
    assert window.stats == stats_from_ledger(
        rows, window_s=1e10, with_shadow=False, th=settings.gates, skipped=window.skipped
    )
    views = [row_view(r) for r in rows if isinstance(r, LedgerRecord)]
    judged = judge_custom(settings.custom_gates, settings, window)
    assert judged == [judge_ledger_gate(g, views, settings.gates) for g in settings.custom_gates]
    assert [r.verdict for r in judged] == ["pass", "pass"] and judged[1].samples > 4000
