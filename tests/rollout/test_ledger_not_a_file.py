"""A ledger path that is there but is neither a regular file nor a directory (a FIFO, a device) is bad input, exit 2
with one line naming it, and is never read (a FIFO's open waits for a writer; /dev/zero never ends): for every verb
that reads the ledger (`rollout gates|compare|watch|advance|holding` with --ledger or rollout.ledger, `check`'s
ledger parts) and for ledger files inside a run dir. A ledger simply not written yet stays a state (exit 0/1, noted).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from switchover.errors import BadInput
from switchover.ledger_files import LedgerSkips, ledger_paths, read_ledger_rows, stream_ledger_rows
from tests.cli import runner
from tests.cli.runner import run_cli
from tests.rollout.builders import never_run_config, traffic, write_ledger

BAD_INPUT = 2
QUICK_S = 10.0  # a verb that reads nothing answers in well under this; a FIFO would block until the alarm

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _short_alarm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "HANG_S", 20.0)  # a hang is reported as HUNG (-1) after 20 s, not 30


@pytest.fixture(params=["fifo", "dev_null"])
def special(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A path that is there and is not a ledger: a FIFO nobody writes, or /dev/null (a character device)."""
    if request.param == "dev_null":
        yield Path("/dev/null")
        return
    fifo = tmp_path / "ledger.fifo"
    os.mkfifo(fifo)
    yield fifo


def _config(tmp_path: Path, ledger: Path | None = None) -> Path:
    """A migration with a rollout in its first stage, its ledger the gateway run dir or `ledger`."""
    p = never_run_config(tmp_path)
    code, _, err, _ = run_cli(["rollout", "advance", "-c", str(p), "--waive", "rollout.entry_check", "-m", "t"])
    assert code == 0, err
    if ledger is not None:
        p.write_text(p.read_text().replace("rollout:\n", f"rollout:\n  ledger: {ledger}\n", 1))
    return p


def _bad_input_naming(code: int, out: str, err: str, secs: float, path: Path) -> None:
    assert code == BAD_INPUT, (code, out, err)
    assert secs < QUICK_S, secs
    assert "Traceback" not in out + err
    assert str(path) in err and "not a ledger file or run directory" in err, err
    assert len([line for line in err.splitlines() if str(path) in line]) == 1, err


VERBS = [
    ["gates"],
    ["compare", "--mode", "shadow"],
    ["compare", "--mode", "arms"],
    ["watch", "--max-checks", "1", "--interval", "0.01"],
    ["advance", "-m", "t"],
    ["holding"],
]


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: "-".join(v[:3]))
def test_a_ledger_option_naming_a_fifo_or_device_is_bad_input_at_once(
    tmp_path: Path, special: Path, verb: list[str]
) -> None:
    config = _config(tmp_path)
    code, out, err, secs = run_cli(["rollout", *verb, "-c", str(config), "--ledger", str(special)])
    _bad_input_naming(code, out, err, secs, special)  # holding too: a --ledger typed is checked before any stage


@pytest.mark.parametrize("verb", VERBS[:4], ids=lambda v: "-".join(v[:3]))
def test_a_rollout_ledger_setting_naming_a_fifo_or_device_is_bad_input_at_once(
    tmp_path: Path, special: Path, verb: list[str]
) -> None:
    config = _config(tmp_path, ledger=special)
    code, out, err, secs = run_cli(["rollout", *verb, "-c", str(config)])
    _bad_input_naming(code, out, err, secs, special)


def test_check_with_a_fifo_or_device_ledger_records_its_ledger_parts_as_failed_naming_it(
    tmp_path: Path, special: Path
) -> None:
    # check is a composer: a part that cannot run is recorded "failed" with its reason and the check is incomplete
    # (exit 1, docs/check.md), it does not stop; what matters here is that nothing was read and the reason is said
    config = _config(tmp_path, ledger=special)
    only = ["--only", "clients", "--only", "rollback"]
    code, out, err, secs = run_cli(["check", str(config), *only, "--json", "--runs-dir", str(tmp_path / "runs")])
    assert code == 1 and secs < QUICK_S and "Traceback" not in out + err, (code, out, err)
    parts = {p["part"]: p for p in orjson.loads(out)["parts"]}
    assert parts["clients"]["status"] == "failed"
    kind = "a character device" if special == Path("/dev/null") else "a FIFO"
    assert parts["clients"]["reason"] == f"ledger {special}: {kind}, not a ledger file or run directory"


def test_a_ledger_not_written_yet_is_still_a_state_not_bad_input(tmp_path: Path) -> None:
    skipped = LedgerSkips()
    assert ledger_paths(tmp_path / "never-written", skipped) == []
    assert skipped.note() is not None and "no ledger at" in (skipped.note() or "")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    assert ledger_paths(dangling, LedgerSkips()) == []


def test_ledger_paths_refuses_a_fifo_and_a_device_without_opening_them(special: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(BadInput, match="not a ledger file or run directory") as info:
        ledger_paths(special, LedgerSkips())
    assert str(special) in info.value.message and time.monotonic() - t0 < QUICK_S


def test_a_run_dir_whose_ledger_names_hold_a_fifo_and_dev_zero_reads_the_regular_files_and_says_which_not(
    tmp_path: Path,
) -> None:
    rows = traffic(time.time() - 30, 4, seed=3)
    write_ledger(tmp_path, rows[:3], index=0)
    os.mkfifo(tmp_path / "ledger-00001.jsonl")
    (tmp_path / "ledger-00002.jsonl").symlink_to("/dev/zero")
    (tmp_path / "ledger-00003.jsonl").mkdir()
    newest = write_ledger(tmp_path, rows[3:], index=4)
    t0 = time.monotonic()
    got = read_ledger_rows(tmp_path)
    assert time.monotonic() - t0 < QUICK_S
    assert [r.request_id for r in got.rows] == [r.request_id for r in rows]
    assert got.skipped.not_files == [
        "ledger-00001.jsonl (a FIFO)",
        "ledger-00002.jsonl (a character device)",
        "ledger-00003.jsonl (a directory)",
    ]
    assert "not regular files, so not read" in (got.skipped.note() or "")
    assert [r.request_id for r in stream_ledger_rows(newest)] == [rows[3].request_id]
