"""User files are read with limits: a FIFO or device never blocks a command or fills memory."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from switchover import textfile
from switchover.errors import BadInput


def test_a_device_stops_at_the_size_cap() -> None:
    with pytest.raises(BadInput, match="larger than 1 KiB"):
        textfile.read_text("/dev/zero", max_bytes=1024)


def test_a_fifo_with_a_writer_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)

    opened, go = threading.Event(), threading.Event()

    def write() -> None:
        with open(fifo, "w") as fh:
            opened.set()
            go.wait(5)
            fh.write("a: 1\n")

    t = threading.Thread(target=write)
    t.start()
    keep = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so the writer's open() returns: an event to wait on
    try:
        assert opened.wait(5), "the writer never opened the FIFO"
        go.set()
        assert textfile.read_text(fifo) == "a: 1\n"
    finally:
        os.close(keep)
        t.join(5)


def test_a_fifo_that_stalls_is_refused_within_the_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textfile, "STREAM_WAIT_S", 0.3)
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(BadInput, match="no end of data"):
        textfile.read_text(fifo)
    assert time.monotonic() - t0 < 5


def test_missing_directory_and_binary_files_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "b").write_bytes(b"\xff\xfe")
    for path, words in (
        (tmp_path / "nope", "no such file"),
        (tmp_path, "is a directory"),
        (tmp_path / "b", "not UTF-8"),
    ):
        with pytest.raises(BadInput, match=words):
            textfile.read_text(path)


def test_a_file_read_again_later_must_be_regular_bounded_and_utf8(tmp_path: Path) -> None:
    fifo, big, bad, good = tmp_path / "fifo", tmp_path / "big", tmp_path / "bad", tmp_path / "good"
    os.mkfifo(fifo)
    big.write_bytes(b"a" * (2 << 20))
    bad.write_bytes(b"ok\n" * 1000 + b"\xff")
    good.write_text("é\n" * 1000)
    for path, words in (
        (fifo, "not a regular file"),
        ("/dev/zero", "not a regular file"),
        (tmp_path, "not a regular"),
        (big, "larger than 1 MiB"),
        (bad, "not UTF-8"),
        (tmp_path / "nope", "no such file"),
    ):
        with pytest.raises(BadInput, match=words):
            textfile.check_text_file(path, max_bytes=1 << 20, what="dataset")
    textfile.check_text_file(good, max_bytes=1 << 20)
