"""The library readers of input files (bench datasets, verify prompt sets) bound what they read themselves, not
only behind the CLI's checks: a device, FIFO or oversized file is a BadInput naming it, never a hang or a
MemoryError."""

from __future__ import annotations

import os

import pytest

from switchover.bench import workload
from switchover.errors import BadInput
from switchover.verify import prompts


@pytest.mark.parametrize("reader", [lambda p: workload.load_dataset(p, 1), prompts.load_jsonl])
def test_a_device_is_refused_without_reading_it(reader) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BadInput, match="not a regular file"):
        reader("/dev/zero")


@pytest.mark.parametrize("reader", [lambda p: workload.load_dataset(p, 1), prompts.load_jsonl])
def test_a_fifo_is_refused(tmp_path, reader) -> None:  # type: ignore[no-untyped-def]
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="not a regular file"):
        reader(fifo)


def test_an_oversized_file_is_refused(tmp_path, monkeypatch) -> None:
    big = tmp_path / "big.jsonl"
    big.write_text('{"prompt": "x"}\n' * 100)
    monkeypatch.setattr(workload, "MAX_DATASET_BYTES", 64)
    monkeypatch.setattr(prompts, "MAX_PROMPTS_BYTES", 64)
    with pytest.raises(BadInput, match="larger than"):
        workload.load_dataset(big, 1)
    with pytest.raises(BadInput, match="larger than"):
        prompts.load_jsonl(big)
