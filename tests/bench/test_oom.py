"""Out-of-memory answers: which failed answers count, per step from the run's rows, and how a gone engine ended."""

from __future__ import annotations

import signal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from switchover.bench.oom import answer_sign, engine_dead, process_end, step_ooms

LLAMA_KV = "Context size has been exceeded."
TORCH = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.1 GiB"
DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."


@pytest.mark.parametrize(
    ("status", "message", "oom"),
    [
        (500, LLAMA_KV, True),
        (500, TORCH, True),
        (200, TORCH, True),  # an error event inside a stream that had started
        (None, LLAMA_KV, True),  # the connection broke after the error text
        (400, TORCH, False),  # a client error quoting the text is not the engine out of memory
        (500, "Internal Server Error", False),
        (500, DEAD, False),  # the engine died: the answer does not say why
        (500, None, False),
    ],
)
def test_an_oom_answer_is_a_5xx_or_stream_error_carrying_an_engines_oom_text(
    status: int | None, message: str | None, oom: bool
) -> None:
    assert (answer_sign(status, message) is not None) is oom


def test_each_oom_text_cites_the_engine_source_at_a_release() -> None:
    sign = answer_sign(500, LLAMA_KV)
    assert sign is not None and sign.source.startswith("https://github.com/ggml-org/llama.cpp/blob/b11434/")
    assert engine_dead(500, DEAD) and not engine_dead(400, DEAD) and not engine_dead(500, TORCH)


def test_a_gone_engine_is_oom_only_when_its_log_says_so() -> None:
    assert process_end(1, f"... torch.OutOfMemoryError: {TORCH}").oom
    killed = process_end(-signal.SIGKILL, "loading model")
    assert not killed.oom and "OOM killer" in killed.reason  # possible, said, not counted
    assert not process_end(1, "some other error").oom


def _rows(path: Path, rows: list[dict[str, object]]) -> None:
    schema = pa.schema(
        [
            ("endpoint", pa.string()),
            ("bucket", pa.string()),
            ("step", pa.int32()),
            ("repeat", pa.int32()),
            ("warmup", pa.bool_()),
            ("status", pa.int32()),
            ("failure_message", pa.string()),
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def test_step_ooms_counts_measured_oom_answers_per_step(tmp_path: Path) -> None:
    base = {"endpoint": "new", "bucket": "128", "repeat": 0}
    _rows(
        tmp_path / "requests.parquet",
        [
            {**base, "step": 0, "warmup": True, "status": 500, "failure_message": LLAMA_KV},  # warm-up: not counted
            {**base, "step": 0, "warmup": False, "status": 200, "failure_message": None},
            {**base, "step": 1, "warmup": False, "status": 500, "failure_message": LLAMA_KV},
            {**base, "step": 1, "warmup": False, "status": 500, "failure_message": LLAMA_KV},
            {**base, "step": 1, "warmup": False, "status": 500, "failure_message": DEAD},
            {**base, "step": 1, "warmup": None, "status": 200, "failure_message": None},
        ],
    )
    got = step_ooms(tmp_path)
    assert got[("new", "128", 0, 0)].oom == 0 and got[("new", "128", 0, 0)].requests == 1
    one = got[("new", "128", 1, 0)]
    assert (one.requests, one.oom, one.engine_dead, one.texts) == (4, 2, 1, [LLAMA_KV]) and one.rate == 0.5


def test_step_ooms_reads_a_checkpointed_runs_parts_and_nothing_when_there_are_no_rows(tmp_path: Path) -> None:
    assert step_ooms(tmp_path) == {}
    (tmp_path / "requests").mkdir()
    row = {"endpoint": "old", "bucket": "64", "step": 0, "repeat": 0, "warmup": False, "status": 500}
    _rows(tmp_path / "requests" / "part-0.parquet", [{**row, "failure_message": TORCH}])
    _rows(tmp_path / "requests" / "part-1.parquet", [{**row, "failure_message": None}])
    assert step_ooms(tmp_path)[("old", "64", 0, 0)].oom == 1
