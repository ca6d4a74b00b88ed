"""Spot-check pairs end to end: the gateway samples requests by task type, both arms answer a copy, the redacted
pair lands in the review database, and the review server's API rates it (token and Host checked)."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from switchover.errors import BadInput
from switchover.evidence.review_store import ReviewStore
from switchover.review.server import ReviewApp, check_loopback, serving
from switchover.testing import await_until
from tests.gateway.conftest import chat, stack

REVIEW = {"pairs_per_day": 4, "per_type_per_day": 2, "sample_percent": 100, "max_concurrency": 8}


async def wait_pairs(s, n: int, timeout: float = 10.0) -> ReviewStore:
    db = s.gw.run_dir / "review.sqlite"
    await await_until(lambda: s.gw.spotcheck.written >= n, timeout, f"{n} review pairs written")
    assert s.gw.spotcheck.written == n, f"{s.gw.spotcheck.written} pairs written, {n} expected"
    return ReviewStore.open(db, create=False)


async def test_sampled_requests_become_redacted_pairs_within_the_daily_quota_per_type(tmp_path):
    async with stack(tmp_path, weight=50, review=REVIEW) as s:
        secret = "my key is sk-PLANTED0123456789abcd and my mail is ann@example.com"
        for i in range(5):  # 5 chat requests: 2 sampled (per type); 1 sql; 1 more for 'other'
            body = chat(stream=i % 2 == 0, max_tokens=3)
            body["messages"][0]["content"] = f"{secret} #{i}"
            status, _, _ = await s.post(body, tenant=f"t{i}", headers={"X-Task-Type": "chat"})
            assert status == 200
        await s.post(chat(), headers={"X-Task-Type": "sql"})
        await s.post(chat())
        store = await wait_pairs(s, 4)
        summary = store.summary()
        assert {t.task_type: t.pairs for t in summary.types} == {"chat": 2, "sql": 1, "other": 1}
        p = store.next_unrated("chat")
        assert p is not None and p.old_status == 200 and p.new_status == 200
        assert p.old_answer.strip() == "t0 t1 t2" and p.new_answer.strip() == "t0 t1 t2"
        assert p.prompt.startswith("user: my key is sk-***") and "[email]" in p.prompt
        assert "PLANTED" not in p.prompt and "ann@example.com" not in p.prompt
        rows = s.rows()
        assert sum(1 for r in rows if r.reviewed) == 4 and all(r.outcome == "ok" for r in rows)
        primaries = {arm: sum(1 for r in rows if r.arm == arm) for arm in ("old", "new")}
        # each pair asked both arms once more (which arm serves a tenant depends on the deployment's seed)
        assert (s.old.stats.requests, s.new.stats.requests) == (primaries["old"] + 4, primaries["new"] + 4)
        store.close()


async def test_the_review_api_needs_the_token_and_its_own_host_and_rates_pairs(tmp_path):
    store = ReviewStore.open(tmp_path / "review.sqlite")
    from tests.review.test_review_store import pair

    ids = [store.add_pair(pair(i)) for i in range(3)]
    app = ReviewApp(store)
    async with serving(app, "127.0.0.1", 0) as url, aiohttp.ClientSession() as http:
        host = url.split("/")[2]
        ok = {"X-Review-Token": app.token}
        async with http.get(url) as r:
            page = await r.text()
            assert r.status == 200 and app.token in page and r.headers["X-Frame-Options"] == "DENY"
            assert "default-src 'none'" in r.headers["Content-Security-Policy"]
        async with http.get(url + "api/next") as r:
            assert r.status == 403  # no token: a page on another site cannot read or rate
        async with http.get(url + "api/next", headers={**ok, "Host": f"evil.example:{host.split(':')[1]}"}) as r:
            assert r.status == 421  # DNS rebinding: only its own loopback Host
        async with http.get(url + "api/next", headers=ok) as r:
            data = await r.json()
            assert data["pair"]["id"] == ids[0] and data["summary"]["total"]["rated"] == 0
        for pid, rating in zip(ids, ("better", "worse", "broken"), strict=True):
            async with http.post(
                url + "api/rate",
                headers=ok,
                data=orjson.dumps({"pair_id": pid, "rating": rating, "note": "n", "rater": "ann"}),
            ) as r:
                assert r.status == 200
                last = await r.json()
        assert last["summary"]["total"]["counts"] == {"better": 1, "same": 0, "worse": 1, "broken": 1}
        for bad in (
            {"pair_id": ids[0], "rating": "meh"},
            {"pair_id": "x", "rating": "same"},
            [1],
            {"pair_id": 2**63 - 1, "rating": "same"},
            {"pair_id": True, "rating": "same"},
            b'{"pair_id": 1000000000000000000000000000000, "rating": "same"}',
        ):
            data = bad if isinstance(bad, bytes) else orjson.dumps(bad)
            async with http.post(url + "api/rate", headers=ok, data=data) as r:
                assert r.status == 400 and (await r.json())["error"]["message"]
        async with http.post(url + "api/rate", headers=ok, data=b"{not json") as r:
            assert r.status == 400
        async with http.get(url + "api/next?after=" + "9" * 40, headers=ok) as r:
            assert r.status == 400  # not a SQLite integer: refused, not a 500 with a traceback
    store.close()
    assert ReviewStore.open(tmp_path / "review.sqlite").summary().total.rated == 3  # persisted


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.1", "example.com", "::"])
def test_the_review_server_listens_on_loopback_only(host):
    with pytest.raises(BadInput):
        check_loopback(host)
    assert check_loopback("localhost") == "127.0.0.1" and check_loopback("::1") == "::1"
