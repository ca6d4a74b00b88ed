"""The review database: pairs, ratings that persist across reopening, the latest rating counts, exports."""

from __future__ import annotations

import orjson
import pyarrow.parquet as pq
import pytest

from switchover.errors import BadInput
from switchover.evidence.review import Pair
from switchover.evidence.review_store import ReviewStore


def pair(i: int, kind: str = "chat") -> Pair:
    return Pair(
        ts=1000.0 + i,
        day="2026-12-01",
        task_type=kind,
        request_id=f"r{i}",
        path="/v1/chat/completions",
        model="m",
        prompt=f"user: q{i}",
        old_answer=f"old {i}",
        new_answer=f"new {i}",
        old_status=200,
        new_status=200,
    )


def test_ratings_persist_across_reopening_and_the_latest_counts(tmp_path):
    path = tmp_path / "review.sqlite"
    store = ReviewStore.open(path)
    ids = [store.add_pair(pair(i, "chat" if i < 3 else "sql")) for i in range(5)]
    assert store.next_unrated().id == ids[0] and store.next_unrated("sql").id == ids[3]
    store.rate(ids[0], "worse", "too short", "ann")
    store.rate(ids[0], "same")  # changed her mind: the latest rating counts
    store.rate(ids[1], "broken")
    store.close()
    store = ReviewStore.open(path, create=False)
    s = store.summary()
    chat = next(t for t in s.types if t.task_type == "chat")
    assert (chat.pairs, chat.rated, chat.counts["same"], chat.counts["broken"], chat.counts["worse"]) == (3, 2, 1, 1, 0)
    assert chat.bad_share == 0.5 and 0 < chat.bad_low < 0.5 < chat.bad_high < 1
    assert (s.total.pairs, s.total.rated) == (5, 2)
    assert store.next_unrated().id == ids[2] and store.next_unrated(after=ids[2]).id == ids[3]
    assert store.counts_today("2026-12-01") == {"chat": 3, "sql": 2}


def test_bad_ratings_and_unknown_pairs_are_refused(tmp_path):
    store = ReviewStore.open(tmp_path / "r.sqlite")
    pid = store.add_pair(pair(1))
    with pytest.raises(BadInput):
        store.rate(pid, "meh")
    with pytest.raises(BadInput):
        store.rate(pid + 7, "same")
    with pytest.raises(BadInput):
        ReviewStore.open(tmp_path / "missing.sqlite", create=False)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database" * 100)
    with pytest.raises(BadInput) as err:
        ReviewStore.open(junk)
    assert "junk.sqlite" in err.value.message


def test_exports_hold_every_pair_with_its_latest_rating(tmp_path):
    store = ReviewStore.open(tmp_path / "r.sqlite")
    ids = [store.add_pair(pair(i)) for i in range(3)]
    store.rate(ids[1], "better", "nicer")
    assert store.export_jsonl(tmp_path / "out.jsonl") == 3
    rows = [orjson.loads(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [r["rating"] for r in rows] == [None, "better", None] and rows[1]["note"] == "nicer"
    assert store.export_parquet(tmp_path / "out.parquet", batch=2) == 3
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.num_rows == 3 and table.column("rating").to_pylist() == [None, "better", None]
    empty = ReviewStore.open(tmp_path / "empty.sqlite")
    assert empty.export_parquet(tmp_path / "e.parquet") == 0 and pq.read_table(tmp_path / "e.parquet").num_rows == 0
    assert not list(tmp_path.glob(".*.tmp"))  # written whole, no temp files left


def test_export_names_a_file_with_brackets_without_reading_them_as_markup(tmp_path, capsys, monkeypatch):
    import sys

    from switchover.cli.app import main

    db = tmp_path / "r.sqlite"
    ReviewStore.open(db).add_pair(pair(1))
    out = tmp_path / "x[/INST].jsonl"
    monkeypatch.setattr(sys, "argv", ["switchover", "review", "export", "--db", str(db), "-o", str(out)])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code in (0, None) and out.exists()
    assert "[/INST]" in capsys.readouterr().out
