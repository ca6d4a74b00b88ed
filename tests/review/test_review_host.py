"""`switchover review serve --host`: the URL it prints is one its own Host check accepts, for every loopback host it
takes (issue 22: 127.0.0.2 was taken, then every request to the printed URL got 421)."""

from __future__ import annotations

import aiohttp
import pytest

from switchover.evidence.review_store import ReviewStore
from switchover.review.server import ReviewApp, serving


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
async def test_the_printed_url_answers_on_every_loopback_host_it_accepts(tmp_path, host):
    store = ReviewStore.open(tmp_path / "review.sqlite")
    app = ReviewApp(store)
    try:
        async with serving(app, host, 0) as url, aiohttp.ClientSession() as http:
            async with http.get(url) as r:
                assert r.status == 200, (url, r.status, await r.text())
            async with http.get(url + "api/summary", headers={"X-Review-Token": app.token}) as r:
                assert r.status == 200
            port = url.rstrip("/").rsplit(":", 1)[1]
            async with http.get(
                url + "api/summary", headers={"X-Review-Token": app.token, "Host": f"evil.example:{port}"}
            ) as r:
                assert r.status == 421  # still only its own addresses
    finally:
        store.close()
