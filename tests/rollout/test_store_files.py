"""Files planted in the rollout state folder never redirect a write: a symlink named like state.json, audit.jsonl,
the lock or a holding file is refused (BadInput naming it) and its target left as it was; a state folder that is
a symlink is refused before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from switchover.config.rollout import RolloutSettings
from switchover.errors import BadInput
from switchover.rollout import stages as sm
from switchover.rollout.store import AUDIT_FILE, HOLDING_FILE, LOCK_FILE, OLD_READY_FILE, STATE_FILE, RolloutStore

BAIT = b"precious: not the rollout's\n"


def plant(folder: Path, name: str, tmp_path: Path) -> Path:
    folder.mkdir(exist_ok=True)
    target = tmp_path / f"victim-{name}"
    target.write_bytes(BAIT)
    os.symlink(target, folder / name)
    return target


def first_transition() -> tuple[sm.RolloutState, sm.Transition]:
    return sm.advance(sm.initial_state(RolloutSettings().stages), now=1.0, who="a@h", why="first")


def test_a_state_file_planted_as_a_symlink_is_refused_and_its_target_not_replaced(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "r")
    target = plant(store.folder, STATE_FILE, tmp_path)
    with pytest.raises(BadInput, match=r"state\.json.*symbolic link"):
        store.save(first_transition()[0])
    assert target.read_bytes() == BAIT and store.state_path.is_symlink()
    assert not [p for p in store.folder.iterdir() if p.name.endswith(".tmp")]


def test_an_audit_log_planted_as_a_symlink_is_refused_and_its_target_not_appended_to(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "r")
    target = plant(store.folder, AUDIT_FILE, tmp_path)
    with pytest.raises(BadInput, match=r"audit\.jsonl.*symbolic link"):
        store.append(first_transition()[1])
    assert target.read_bytes() == BAIT


@pytest.mark.parametrize("name", [LOCK_FILE, OLD_READY_FILE, HOLDING_FILE])
def test_the_lock_and_holding_files_planted_as_symlinks_are_refused(tmp_path: Path, name: str) -> None:
    store = RolloutStore(tmp_path / "r")
    target = plant(store.folder, name, tmp_path)
    with pytest.raises(BadInput, match=name.replace(".", r"\.")):
        if name == LOCK_FILE:
            with store.locked():
                pass
        elif name == OLD_READY_FILE:
            store.append_line(name, first_transition()[1])
        else:
            store.write_model(name, first_transition()[0])
    assert target.read_bytes() == BAIT


def test_a_state_folder_that_is_a_symlink_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir()
    os.symlink(real, tmp_path / "r")
    store = RolloutStore(tmp_path / "r")
    with pytest.raises(BadInput, match="symbolic link"):
        store.save(first_transition()[0])
    with pytest.raises(BadInput, match="symbolic link"):
        store.append(first_transition()[1])
    assert list(real.iterdir()) == []


def test_state_files_are_still_written_and_replaced_in_a_plain_folder(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "new" / "r")  # made, parents too
    state, tr = first_transition()
    store.save(state)
    store.state_path.chmod(0o600)
    store.save(state)  # a replaced file keeps its permissions
    store.append(tr)
    store.append(tr)
    with store.locked():
        pass
    assert store.load() == state and len(store.audit()) == 2
    assert store.state_path.stat().st_mode & 0o777 == 0o600
