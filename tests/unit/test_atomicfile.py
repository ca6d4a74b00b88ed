"""Files are written whole: unique temp names, nothing left behind on failure, directories and unwritable places
are one-line bad input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from switchover.atomicfile import atomic_path, is_temp, temp_path, write_atomic
from switchover.errors import BadInput


def test_write_replaces_whole_and_keeps_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.json"
    write_atomic(target, "one")
    os.chmod(target, 0o600)
    write_atomic(target, b"two")
    assert target.read_text() == "two" and (target.stat().st_mode & 0o777) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]


def test_temp_names_are_unique_and_recognisable(tmp_path: Path) -> None:
    names = {temp_path(tmp_path / "x.json") for _ in range(50)}
    assert len(names) == 50 and all(is_temp(n) and n.parent == tmp_path for n in names)


@pytest.mark.parametrize("where", ["dir", "proc"])
def test_unwritable_targets_are_bad_input_and_leave_nothing(tmp_path: Path, where: str) -> None:
    target = tmp_path if where == "dir" else Path("/proc/version")
    with pytest.raises(BadInput, match="cannot write"):
        write_atomic(target, "x")
    assert not any(is_temp(p) for p in tmp_path.iterdir())


def test_atomic_path_removes_the_temp_file_when_the_writer_fails(tmp_path: Path) -> None:
    target = tmp_path / "rows.parquet"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("writer died")
    assert list(tmp_path.iterdir()) == []
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"whole")
    assert target.read_bytes() == b"whole" and list(tmp_path.iterdir()) == [target]


def test_a_symlink_is_followed_and_kept(tmp_path: Path) -> None:
    (tmp_path / "real.yaml").write_text("old")
    (tmp_path / "link.yaml").symlink_to("real.yaml")
    write_atomic(tmp_path / "link.yaml", "new")
    assert (tmp_path / "link.yaml").is_symlink() and (tmp_path / "real.yaml").read_text() == "new"
    with atomic_path(tmp_path / "link.yaml") as tmp:
        tmp.write_text("newer")
    assert (tmp_path / "link.yaml").is_symlink() and (tmp_path / "real.yaml").read_text() == "newer"
    assert not any(is_temp(p) for p in tmp_path.iterdir())


def test_a_stream_or_device_is_written_in_place_never_replaced(tmp_path: Path) -> None:
    import stat
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="cannot write") as exc:  # nobody reads it: refused, not waited on
        write_atomic(fifo, "x")
    assert exc.value.hint and "FIFO" in exc.value.hint
    got: list[bytes] = []
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    reader = threading.Thread(target=lambda: got.append(os.read(fd, 100)))
    write_atomic(fifo, "streamed")
    reader.start()
    reader.join(5)
    os.close(fd)
    assert got == [b"streamed"] and stat.S_ISFIFO(fifo.stat().st_mode)
    write_atomic("/dev/null", "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    with pytest.raises(BadInput, match="not a regular file"), atomic_path(fifo):
        pass
