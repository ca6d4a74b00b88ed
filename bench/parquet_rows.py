"""Writing the bench's raw rows: one row group of `requests.parquet` (bench/rows.py ROW_SCHEMA) written with every
column dictionary-encoded (pyarrow's default) and with the clock readings and request numbers left plain
(bench/rows.py DICT_COLUMNS), as the bench writes it.

    python bench/parquet_rows.py [--rows 1024] [--events 66] [--repeats 7]

The rows are made up the way an engine's stream fills them: each request's events at distinct nanosecond stamps
(a first token after 20-60 ms, then gaps of 5-40 ms), one short word of text each, usage and a finish reason. A
zero-work server answers with all of a response's events in one read, so many stamps are equal there and
dictionary encoding pays; an engine's are distinct. Prints the best of --repeats writes per layout (µs per row,
thread CPU time) and the file size.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from switchover.bench.batch import RowBatch
from switchover.bench.rows import DICT_COLUMNS, ROW_SCHEMA, STAT_COLUMNS
from switchover.runs import RecordWriter
from switchover.wire import RequestRecord
from switchover.wire.records import Usage

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
]


def batch(rows: int, events: int, seed: int = 0) -> RowBatch:
    rng = random.Random(seed)
    b = RowBatch({"endpoint": "new", "step": 0, "repeat": 0, "concurrency": 64, "rate": None, "bucket": "dataset"})
    t = 1_000_000_000_000
    for i in range(rows):
        t += rng.randint(50_000, 400_000)
        stamps = [t + rng.randint(20, 60) * 1_000_000]
        for _ in range(events - 1):
            stamps.append(stamps[-1] + rng.randint(5_000_000, 40_000_000))
        texts = [" " + rng.choice(WORDS) for _ in stamps]
        rec = RequestRecord(
            api="chat",
            stream=True,
            model="m",
            started_wall=1.7e9 + i,
            send_ns=t,
            status=200,
            headers_ns=t + 90_000,
            first_byte_ns=stamps[0],
            end_ns=stamps[-1] + 200_000,
            usage_ns=stamps[-1] + 100_000,
            chunk_ns=stamps,
            chunk_text=texts,
            texts={0: "".join(texts)},
            finish_reasons={0: "length"},
            usage=Usage(prompt_tokens=128, completion_tokens=events, total_tokens=128 + events),
            done_seen=True,
        )
        b.add(rec, index=i, warmup=False, sched_ns=t - 20_000, isl_target=None, osl_target=events)
    return b


def write(b: RowBatch, dictionary: bool | list[str], repeats: int, path: Path) -> tuple[float, int]:
    table = b.table()
    best = float("inf")
    for _ in range(repeats):
        w = RecordWriter(path, ROW_SCHEMA, redacted=False, statistics=STAT_COLUMNS, dictionary=dictionary)
        t0 = time.thread_time()
        w.append_table(table)
        best = min(best, time.thread_time() - t0)
        w.close()
    assert pq.read_table(path).num_rows == len(b)
    return best / len(b) * 1e6, path.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--events", type=int, default=66)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    b = batch(a.rows, a.events)
    with tempfile.TemporaryDirectory() as tmp:
        every = write(b, True, a.repeats, Path(tmp) / "every.parquet")
        ours = write(b, DICT_COLUMNS, a.repeats, Path(tmp) / "ours.parquet")
    print(f"one row group of {a.rows} rows x {a.events} events (distinct stamps), best of {a.repeats} writes:")
    print(f"  every column dictionary-encoded: {every[0]:.2f} µs a row, {every[1] / 1e3:.0f} kB")
    print(f"  stamps and numbers plain:        {ours[0]:.2f} µs a row, {ours[1] / 1e3:.0f} kB")
    print(f"  -> {every[0] / ours[0]:.2f}x the time and {every[1] / ours[1]:.2f}x the bytes with every column")


if __name__ == "__main__":
    main()
