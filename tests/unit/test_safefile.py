"""safefile: writes in a state folder never follow a planted symlink, never block on a FIFO, never land in a file of
another user's or a hard link; files replaced whole keep their permissions and leave no temporary file; reads are
bounded and refuse what is not a regular file."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from switchover import safefile
from switchover.errors import BadInput

BAIT = b"precious\n"


def bait(tmp_path):
    target = tmp_path / "victim"
    target.write_bytes(BAIT)
    return target


@pytest.mark.parametrize("write", ["append", "whole", "open_append"])
def test_no_writer_follows_a_symlink_planted_under_the_name(tmp_path, write):
    folder = tmp_path / "state"
    folder.mkdir()
    target = bait(tmp_path)
    os.symlink(target, folder / "f")
    with pytest.raises(safefile.UnsafeFile, match="symbolic link") as err:
        if write == "append":
            safefile.append(folder, "f", b"x\n")
        elif write == "whole":
            safefile.write_whole(folder, "f", b"x\n")
        else:
            safefile.open_append(folder, "f").close()
    assert isinstance(err.value, OSError) and isinstance(err.value, BadInput)
    assert str(folder / "f") in err.value.message
    assert target.read_bytes() == BAIT and (folder / "f").is_symlink()
    assert sorted(p.name for p in folder.iterdir()) == ["f"]  # no temporary file left


def test_a_fifo_under_the_name_is_refused_at_once_for_append_and_read(tmp_path):
    os.mkfifo(tmp_path / "f")
    with pytest.raises(safefile.UnsafeFile, match=r"not a regular file|FIFO"):
        safefile.append(tmp_path, "f", b"x\n")  # no reader: would block without O_NONBLOCK
    with pytest.raises(safefile.UnsafeFile, match="FIFO"):
        safefile.read_small(tmp_path, "f", 100)
    with pytest.raises(safefile.UnsafeFile, match="FIFO"):
        safefile.write_whole(tmp_path, "f", b"x")


def test_a_socket_under_the_name_is_refused(tmp_path):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "s"))
        with pytest.raises(safefile.UnsafeFile):
            safefile.append(tmp_path, "s", b"x\n")


def test_a_hard_link_under_the_name_is_refused(tmp_path):
    folder = tmp_path / "state"
    folder.mkdir()
    target = bait(tmp_path)
    os.link(target, folder / "f")
    with pytest.raises(safefile.UnsafeFile, match="2 hard links"):
        safefile.append(folder, "f", b"x\n")
    assert target.read_bytes() == BAIT


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_or_folder_of_another_user_is_refused(tmp_path):
    (tmp_path / "f").write_bytes(BAIT)
    os.chown(tmp_path / "f", 65534, 65534)
    with pytest.raises(safefile.UnsafeFile, match="owned by uid 65534"):
        safefile.append(tmp_path, "f", b"x\n")
    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, 65534, 65534)
    with pytest.raises(safefile.UnsafeFile, match="folder is owned by uid 65534"):
        safefile.write_whole(other, "g", b"x")
    assert list(other.iterdir()) == []


def test_a_folder_that_is_a_symlink_a_file_or_writable_by_all_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    (tmp_path / "file").write_bytes(b"")
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    for name, why in (
        ("link", "symbolic link"),
        ("dangling", "symbolic link"),
        ("file", "folder is a regular file"),
        ("open", "writable by every user"),
    ):
        with pytest.raises(safefile.UnsafeFile, match=why):
            safefile.write_whole(tmp_path / name, "state.json", b"{}")
    assert list(real.iterdir()) == [] and list(open_dir.iterdir()) == []
    assert not (tmp_path / "nowhere").exists()


def test_a_missing_folder_is_made_with_its_parents(tmp_path):
    path = safefile.write_whole(tmp_path / "a" / "b", "state.json", "{}")
    assert path.read_text() == "{}" and stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) & 0o002 == 0


def test_a_file_replaced_whole_keeps_its_permissions_and_a_new_one_gets_the_mode_asked(tmp_path):
    safefile.write_whole(tmp_path, "token", b"a", mode=0o600)
    assert stat.S_IMODE((tmp_path / "token").stat().st_mode) == 0o600
    (tmp_path / "token").chmod(0o640)
    safefile.write_whole(tmp_path, "token", b"bb")
    assert (tmp_path / "token").read_bytes() == b"bb"
    assert stat.S_IMODE((tmp_path / "token").stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["token"]


def test_appends_add_whole_lines_at_the_end(tmp_path):
    for i in range(3):
        safefile.append(tmp_path, "log.jsonl", f"{i}\n".encode())
    with safefile.open_append(tmp_path, "log.jsonl") as fh:
        fh.write(b"3\n")
    assert (tmp_path / "log.jsonl").read_bytes() == b"0\n1\n2\n3\n"


def test_reads_are_bounded_and_a_missing_file_is_none(tmp_path):
    assert safefile.read_small(tmp_path, "absent", 10) is None
    (tmp_path / "f").write_bytes(b"x" * 11)
    assert safefile.read_small(tmp_path, "f", 11) == b"x" * 11
    with pytest.raises(BadInput, match="11 bytes"):
        safefile.read_small(tmp_path, "f", 10)
    target = bait(tmp_path)
    os.symlink(target, tmp_path / "l")
    with pytest.raises(safefile.UnsafeFile, match=r"refusing to read .*symbolic link"):
        safefile.read_small(tmp_path, "l", 100)
