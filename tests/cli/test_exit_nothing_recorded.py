"""Nothing recorded yet is a state, not bad input (docs/cli.md): before the gateway has sampled a pair, `review
summary` says so and exits 0, `review gate` holds (1), `review export` writes an empty file (0) and `review serve`
says there is nothing to review (0); before the gateway wrote its ledger, `rollout compare` says so (0) and the
gates hold; a database or ledger the user names (--db, --ledger) that is not there stays exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.runner import run_cli
from tests.rollout.builders import never_run_config

OK, FAILED, BAD_INPUT = 0, 1, 2


def _config(tmp_path: Path) -> Path:
    (tmp_path / "gw").mkdir()
    p = tmp_path / "switchover.yaml"
    p.write_text(
        "old: {url: 'http://127.0.0.1:18001', engine: vllm}\n"
        "new: {url: 'http://127.0.0.1:18002', engine: llamacpp}\n"
        "gateway:\n  weight: 0\n  rollback: false\n  run_dir: gw\n"
    )
    return p


def test_review_summary_before_any_pair_is_0_saying_nothing_is_recorded(tmp_path: Path) -> None:
    config = str(_config(tmp_path))
    code, out, err, _ = run_cli(["review", "summary", "-c", config])
    assert code == OK, err
    assert "no pairs recorded yet" in out and "review.sqlite" in out
    code, out, err, _ = run_cli(["review", "summary", "-c", config, "--json"])
    assert code == OK, err
    assert json.loads(out)["total"]["pairs"] == 0


def test_review_gate_before_any_rating_holds_with_1(tmp_path: Path) -> None:
    code, out, err, _ = run_cli(["review", "gate", "-c", str(_config(tmp_path))])
    assert code == FAILED, (out, err)
    assert out.startswith("hold:") and "no pairs recorded yet" in out


def test_review_export_before_any_pair_writes_an_empty_file_and_is_0(tmp_path: Path) -> None:
    out_file = tmp_path / "ratings.jsonl"
    code, out, err, _ = run_cli(["review", "export", "-c", str(_config(tmp_path)), "-o", str(out_file)])
    assert code == OK, err
    assert out_file.read_text() == "" and "0 pairs written" in out
    assert not (tmp_path / "gw" / "review.sqlite").exists()  # the gateway's database is not created by an export


def test_review_serve_before_any_pair_says_there_is_nothing_to_review_and_is_0(tmp_path: Path) -> None:
    code, out, err, _ = run_cli(["review", "serve", "-c", str(_config(tmp_path)), "--port", "0", "--seconds", "0.1"])
    assert code == OK, err
    assert "no pairs recorded yet" in out


def test_a_database_named_with_db_that_is_not_there_is_still_bad_input(tmp_path: Path) -> None:
    for verb in (["summary"], ["gate"], ["export", "-o", str(tmp_path / "x.jsonl")]):
        code, _, err, _ = run_cli(["review", *verb, "--db", str(tmp_path / "typo.sqlite")])
        assert code == BAD_INPUT and "no review database" in err, (verb, err)


def test_rollout_compare_before_the_gateway_wrote_its_ledger_is_0_saying_nothing_is_recorded(tmp_path: Path) -> None:
    config = str(never_run_config(tmp_path))
    for mode in ("shadow", "arms"):
        code, out, err, _ = run_cli(["rollout", "compare", "-c", config, "--mode", mode, "--json"])
        assert code == OK, (mode, err)
        assert any("no ledger at" in n and "never-written" in n for n in json.loads(out)["notes"]), out


def test_rollout_gates_and_watch_in_a_stage_before_any_ledger_hold_and_say_why(tmp_path: Path) -> None:
    config = str(never_run_config(tmp_path))
    code, _, err, _ = run_cli(["rollout", "advance", "-c", config, "--waive", "rollout.entry_check", "-m", "t"])
    assert code == OK, err
    code, out, err, _ = run_cli(["rollout", "gates", "-c", config])
    assert code == FAILED and "decision: hold" in out and "no ledger at" in out, (out, err)
    code, out, err, _ = run_cli(["rollout", "watch", "-c", config, "--max-checks", "1", "--interval", "0.01"])
    assert code == OK and "shadow: hold" in out and "no ledger at" in out, (out, err)


def test_a_ledger_named_with_ledger_that_is_not_there_is_still_bad_input(tmp_path: Path) -> None:
    config = str(never_run_config(tmp_path))
    for verb in ("compare", "gates"):
        code, _, err, _ = run_cli(["rollout", verb, "-c", config, "--ledger", str(tmp_path / "typo")])
        assert code == BAD_INPUT and "--ledger" in err and "typo" in err, (verb, err)
