"""The review database is never opened through a planted file: a symlink named review.sqlite (or its -wal/-shm
companion), a hard link, another user's file or a FIFO is refused (BadInput naming it) and its target left as it
was; a database switchover creates is owner-only."""

from __future__ import annotations

import os
import stat

import pytest

from switchover.errors import BadInput
from switchover.evidence.review_store import ReviewStore
from tests.review.test_review_store import pair


def test_a_database_planted_as_a_symlink_to_an_empty_file_is_refused_and_the_file_stays_empty(tmp_path):
    target = tmp_path / "victim"
    target.write_bytes(b"")
    os.symlink(target, tmp_path / "review.sqlite")
    for create in (True, False):
        with pytest.raises(BadInput, match="symbolic link"):
            ReviewStore.open(tmp_path / "review.sqlite", create=create)
    assert target.read_bytes() == b""


def test_a_database_planted_as_a_dangling_symlink_is_refused_and_nothing_is_created(tmp_path):
    os.symlink(tmp_path / "made-by-sqlite", tmp_path / "review.sqlite")
    with pytest.raises(BadInput, match="symbolic link"):
        ReviewStore.open(tmp_path / "review.sqlite")
    assert not (tmp_path / "made-by-sqlite").exists()


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_companion_file_planted_as_a_symlink_is_refused(tmp_path, suffix):
    ReviewStore.open(tmp_path / "review.sqlite").close()
    for leftover in ("-wal", "-shm"):
        (tmp_path / f"review.sqlite{leftover}").unlink(missing_ok=True)
    target = tmp_path / "victim"
    target.write_bytes(b"precious")
    os.symlink(target, tmp_path / f"review.sqlite{suffix}")
    with pytest.raises(BadInput, match=rf"review\.sqlite{suffix}.*symbolic link"):
        ReviewStore.open(tmp_path / "review.sqlite")
    assert target.read_bytes() == b"precious"


def test_a_database_that_is_a_fifo_or_a_hard_link_is_refused(tmp_path):
    os.mkfifo(tmp_path / "fifo.sqlite")
    with pytest.raises(BadInput, match=r"FIFO|not a regular file"):
        ReviewStore.open(tmp_path / "fifo.sqlite")
    target = tmp_path / "victim"
    target.write_bytes(b"")
    os.link(target, tmp_path / "linked.sqlite")
    with pytest.raises(BadInput, match="hard links"):
        ReviewStore.open(tmp_path / "linked.sqlite")
    assert target.read_bytes() == b""


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_database_owned_by_another_user_is_refused(tmp_path):
    ReviewStore.open(tmp_path / "review.sqlite").close()
    os.chown(tmp_path / "review.sqlite", 65534, 65534)
    with pytest.raises(BadInput, match="owned by uid 65534"):
        ReviewStore.open(tmp_path / "review.sqlite")


def test_a_new_database_is_owner_only_and_usable(tmp_path):
    store = ReviewStore.open(tmp_path / "sub" / "review.sqlite")
    pid = store.add_pair(pair(1))
    store.rate(pid, "same")
    store.close()
    assert stat.S_IMODE((tmp_path / "sub" / "review.sqlite").stat().st_mode) == 0o600
    assert ReviewStore.open(tmp_path / "sub" / "review.sqlite", create=False).summary().total.rated == 1
