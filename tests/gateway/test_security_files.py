"""Files planted in the gateway's run directory never redirect a write: a symlink named like the lock, the latch,
the address file, a ledger file or the retention manifest is refused and its target left as it was; a run
directory that is a symlink, or another user's, is refused before anything is written (exit 2)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

import orjson
import pytest
import yaml

from switchover.errors import BadInput
from switchover.gateway.ledger import Ledger
from switchover.gateway.state import LatchFile, LogFile, RunDirLock, write_admin_token, write_gateway_file
from switchover.ledger_files import RETIRED
from tests.gateway.test_ledger import rec

BAIT = b"precious: not the gateway's\n"


def plant(run_dir, name: str, tmp_path):
    """A symlink `run_dir/name` to a file outside the run directory holding BAIT; returns the target."""
    run_dir.mkdir(exist_ok=True)
    target = tmp_path / f"victim-{name}"
    target.write_bytes(BAIT)
    os.symlink(target, run_dir / name)
    return target


def test_a_lock_file_planted_as_a_symlink_is_refused_and_its_target_not_truncated(tmp_path):
    run_dir = tmp_path / "run"
    target = plant(run_dir, "gateway.lock", tmp_path)
    with pytest.raises(BadInput, match=r"gateway\.lock"):
        RunDirLock(run_dir).acquire()
    assert target.read_bytes() == BAIT


def test_a_killswitch_file_planted_as_a_symlink_is_not_replaced_and_reads_as_latched(tmp_path):
    run_dir = tmp_path / "run"
    target = plant(run_dir, "killswitch.json", tmp_path)
    latch = LatchFile(run_dir)
    with pytest.raises(OSError, match=r"killswitch\.json"):  # the gateway logs an OSError from save and goes on
        latch.save(True, "tripped")
    assert target.read_bytes() == BAIT and (run_dir / "killswitch.json").is_symlink()
    loaded = latch.load()
    assert loaded.latched and loaded.error and "symbolic link" in loaded.error


def test_a_killswitch_file_that_is_a_fifo_reads_as_latched_without_blocking(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.mkfifo(run_dir / "killswitch.json")
    loaded = LatchFile(run_dir).load()
    assert loaded.latched and loaded.error and "FIFO" in loaded.error


def test_the_address_file_planted_as_a_symlink_is_refused_and_its_target_kept(tmp_path):
    run_dir = tmp_path / "run"
    target = plant(run_dir, "gateway.json", tmp_path)
    with pytest.raises(BadInput, match=r"gateway\.json"):
        write_gateway_file(run_dir, "http://127.0.0.1:8080", tmp_path / "switchover.yaml")
    assert target.read_bytes() == BAIT


def test_the_address_file_is_written_whole_with_url_pid_and_config(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    path = write_gateway_file(run_dir, "http://127.0.0.1:8080", tmp_path / "switchover.yaml")
    got = orjson.loads(path.read_bytes())
    assert (got["url"], got["pid"], got["ledger_dir"]) == ("http://127.0.0.1:8080", os.getpid(), str(run_dir))


def test_an_admin_token_planted_as_a_symlink_is_replaced_by_a_new_file_not_written_through(tmp_path):
    run_dir = tmp_path / "run"
    target = plant(run_dir, "admin.token", tmp_path)
    token = write_admin_token(run_dir)
    assert target.read_bytes() == BAIT
    assert not (run_dir / "admin.token").is_symlink() and (run_dir / "admin.token").read_text() == token
    assert (run_dir / "admin.token").stat().st_mode & 0o777 == 0o600


def test_the_retention_manifest_planted_as_a_symlink_is_not_appended_to(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    run_dir = tmp_path / "run"
    target = plant(run_dir, RETIRED, tmp_path)
    led = Ledger(run_dir, rotate_bytes=600, keep_files=2)
    for i in range(60):
        led.write(rec(i))
    led.close()
    assert led.files_deleted > 0
    assert target.read_bytes() == BAIT
    assert any(RETIRED in r.getMessage() and "symbolic link" in r.getMessage() for r in caplog.records)


def test_a_ledger_file_planted_as_a_symlink_at_the_next_number_is_not_written_through(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    led = Ledger(run_dir, rotate_bytes=600)
    target = plant(run_dir, "ledger-00001.jsonl", tmp_path)  # planted while the gateway writes file 0
    with pytest.raises(OSError, match=r"ledger-00001\.jsonl"):  # the gateway counts ledger_errors and logs it
        for i in range(60):
            led.write(rec(i))
    led.close()
    assert target.read_bytes() == BAIT


def test_a_ledger_file_planted_as_a_hard_link_is_not_appended_to(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    target = tmp_path / "victim"
    target.write_bytes(BAIT)
    os.link(target, run_dir / "ledger-00000.jsonl")
    led = Ledger(run_dir)  # continues after the highest file: 00001
    os.link(target, run_dir / "ledger-00001.jsonl")
    with pytest.raises(OSError, match="hard links"):
        led.write(rec(1))
    led.close()
    assert target.read_bytes() == BAIT


def test_a_run_directory_that_is_a_symlink_is_refused_before_anything_is_written(tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir()
    os.symlink(real, tmp_path / "run")
    with pytest.raises(BadInput, match="symbolic link"):
        Ledger(tmp_path / "run")
    assert list(real.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_run_directory_owned_by_another_user_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.chown(run_dir, 65534, 65534)
    with pytest.raises(BadInput, match="owned by uid 65534"):
        Ledger(run_dir)
    assert list(run_dir.iterdir()) == []


def test_a_run_directory_writable_by_every_user_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_dir.chmod(0o777)
    with pytest.raises(BadInput, match="writable by every user"):
        RunDirLock(run_dir).acquire()
    assert list(run_dir.iterdir()) == []


def gateway_config(tmp_path, run_dir: str = "run"):
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "old": {"url": "http://127.0.0.1:9", "engine": "vllm"},
                "new": {"url": "http://127.0.0.1:9", "engine": "vllm"},
                "gateway": {"weight": 0, "run_dir": run_dir, "listen": {"port": 0}},
            }
        )
    )
    return cfg


@pytest.mark.timeout(120)
@pytest.mark.parametrize("planted", ["gateway.lock", "run_dir"])
def test_a_gateway_process_refuses_a_planted_lock_or_run_dir_with_exit_2_and_touches_nothing(tmp_path, planted):
    if planted == "run_dir":
        real = tmp_path / "elsewhere"
        real.mkdir()
        os.symlink(real, tmp_path / "run")
        target = None
    else:
        target = plant(tmp_path / "run", "gateway.lock", tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "switchover", "gateway", "--config", str(gateway_config(tmp_path))],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 2, proc.stderr[-1000:]
    assert "refusing to write" in proc.stderr and "Traceback" not in proc.stderr
    if target is not None:
        assert target.read_bytes() == BAIT
        assert not (tmp_path / "run" / "admin.token").exists()
    else:
        assert list((tmp_path / "elsewhere").iterdir()) == []


def test_the_log_file_planted_as_a_symlink_is_refused_and_a_plain_one_is_appended_to(tmp_path):
    run_dir = tmp_path / "run"
    target = plant(run_dir, "gateway.log", tmp_path)
    with pytest.raises(BadInput, match=r"gateway\.log.*symbolic link"):
        LogFile(run_dir)
    assert target.read_bytes() == BAIT
    (run_dir / "gateway.log").unlink()
    for text in ("first", "second"):
        handler = LogFile(run_dir)
        handler.emit(logging.LogRecord("switchover", logging.INFO, __file__, 1, text, None, None))
        handler.close()
    assert (run_dir / "gateway.log").read_text() == "first\nsecond\n"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("planted", ["gateway.json", "gateway.log"])
def test_a_gateway_process_refuses_a_planted_address_or_log_file_and_leaves_its_target(tmp_path, planted):
    target = plant(tmp_path / "run", planted, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "switchover", "gateway", "--config", str(gateway_config(tmp_path))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while proc.poll() is None and target.read_bytes() == BAIT and time.monotonic() < deadline:
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
    _, err = proc.communicate()
    assert target.read_bytes() == BAIT, f"{planted}'s target was written through"
    assert proc.returncode == 2 and "refusing to write" in err and "Traceback" not in err, err[-1000:]
