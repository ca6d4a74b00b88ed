"""The review page in headless Chromium: rate three pairs by clicking, see the summary change, and find the
ratings still there after the server restarts."""

from __future__ import annotations

from switchover.evidence.review_store import ReviewStore
from switchover.review.server import ReviewApp, serving
from tests.review.cdp import chromium
from tests.review.test_review_store import pair

SUMMARY_ALL = "Array.from(document.querySelectorAll('#summary tbody tr')).map(r => r.innerText).join('\\n')"


async def test_a_person_rates_three_pairs_in_the_page_and_the_ratings_persist(tmp_path):
    db = tmp_path / "review.sqlite"
    store = ReviewStore.open(db)
    ids = [store.add_pair(pair(i, "chat" if i < 2 else "sql")) for i in range(4)]
    app = ReviewApp(store)
    async with serving(app, "127.0.0.1", 0) as url, chromium(url) as tab:
        assert await tab.wait(f"document.getElementById('pid').textContent === '{ids[0]}'")
        assert await tab.eval("document.getElementById('old').textContent") == "old 0"
        before = await tab.wait(SUMMARY_ALL)
        assert "all\t4\t0" in before
        for pid, rating in zip(ids[:3], ("better", "worse", "broken"), strict=True):
            await tab.wait(f"document.getElementById('pid').textContent === '{pid}'")
            await tab.eval("document.getElementById('rater').value = 'ann'")
            await tab.eval(f"document.querySelector('button[data-rating={rating}]').click()")
            await tab.wait(f"document.getElementById('status').textContent.includes('#{pid} rated {rating}')")
        after = await tab.wait(f"({SUMMARY_ALL}).includes('all\\t4\\t3')")
        assert after
        rows = await tab.eval(SUMMARY_ALL)
        assert "chat\t2\t2\t1\t0\t1\t0\t50 %" in rows and "sql\t2\t1\t0\t0\t0\t1\t100 %" in rows, rows
        assert await tab.wait(f"document.getElementById('pid').textContent === '{ids[3]}'")  # the next one shows
        assert not [c for c in tab.console if "Exception" in c or "error" in c.lower()], tab.console
    store.close()
    again = ReviewStore.open(db, create=False)  # a restart: the ratings are in the database
    s = again.summary()
    assert s.total.rated == 3 and s.total.counts == {"better": 1, "same": 0, "worse": 1, "broken": 1}
    assert again.next_unrated().id == ids[3]
    again.close()
