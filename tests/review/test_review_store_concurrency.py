"""No rating is lost while the gateway writes pairs: the review server's rating POSTs and a pair writer on its own
connection (the gateway's, another process in production) share the database; every POST is stored."""

from __future__ import annotations

import asyncio
import threading
import time

import aiohttp
import orjson
import pytest

from switchover.evidence.review_store import ReviewStore
from switchover.review.server import ReviewApp, serving
from tests.review.test_review_store import pair

POSTS = 300
CONCURRENCY = 24


def write_pairs(path, stop: threading.Event, written: list[int]) -> None:
    """The gateway's side: its own store, inserting a pair every millisecond or so until told to stop (far above
    a real gateway's rate, which its daily quota and two engine answers per pair bound; back to back with no pause
    at all, SQLite, which has no fair queue for its write lock, can starve a waiting writer under CPU load)."""
    store = ReviewStore.open(path)
    try:
        i = 0
        while not stop.is_set():
            store.add_pair(pair(10_000 + i))
            i += 1
            time.sleep(0.001)
        written.append(i)
    finally:
        store.close()


@pytest.mark.timeout(120)
async def test_no_rating_post_fails_while_the_gateway_writes_pairs(tmp_path):
    path = tmp_path / "review.sqlite"
    store = ReviewStore.open(path)
    ids = [store.add_pair(pair(i)) for i in range(50)]
    stop, written = threading.Event(), []
    writer = threading.Thread(target=write_pairs, args=(path, stop, written), daemon=True)
    app = ReviewApp(store)
    statuses: list[int] = []
    errors: list[str] = []
    writer.start()
    t0 = time.monotonic()
    try:
        async with serving(app, "127.0.0.1", 0) as url, aiohttp.ClientSession() as http:
            sem = asyncio.Semaphore(CONCURRENCY)

            async def rate(n: int) -> None:
                async with (
                    sem,
                    http.post(
                        url + "api/rate",
                        headers={"X-Review-Token": app.token},
                        data=orjson.dumps({"pair_id": ids[n % len(ids)], "rating": "better", "note": f"n{n}"}),
                    ) as r,
                ):
                    statuses.append(r.status)
                    if r.status != 200:
                        errors.append((await r.text())[:200])

            await asyncio.wait_for(asyncio.gather(*(rate(n) for n in range(POSTS))), 90)
    finally:
        stop.set()
        writer.join(30)
    elapsed = time.monotonic() - t0
    assert written and written[0] > 0, "the pair writer wrote nothing: the test proved nothing"
    failed = [s for s in statuses if s != 200]
    assert not failed, f"{len(failed)} of {POSTS} rating POSTs failed in {elapsed:.1f} s: {errors[:3]}"
    notes = {r["note"] for r in store.rows()} | {
        row["note"] for row in store.conn.execute("SELECT note FROM ratings").fetchall()
    }
    assert {f"n{n}" for n in range(POSTS)} <= notes, "a POST answered 200 but its rating is not stored"
    store.close()
