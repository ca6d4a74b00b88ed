"""An engine's Prometheus metrics page, fetched through the wire client: the metrics adapter serves it converted
and the rollout's rollback view checks that it answers."""

from __future__ import annotations

from urllib.parse import urlsplit

from switchover.errors import CheckFailed, Unreachable
from switchover.wire.client import EngineClient, Timeouts


async def scrape(url: str, timeout_s: float = 5.0) -> str:
    """GET the metrics text at `url`; Unreachable when nothing answered, CheckFailed on an error status."""
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    timeouts = Timeouts(connect=timeout_s, first_byte=timeout_s, idle=timeout_s, total=timeout_s)
    async with EngineClient(f"{parts.scheme}://{parts.netloc}", timeouts=timeouts) as client:
        res = await client.request("GET", path, timeout=timeout_s)
    if res.failure is not None:
        raise Unreachable(f"{url}: {res.failure.message}")
    if res.status != 200:  # it answered: an error answer is a failed check (1), not unreachable (3)
        raise CheckFailed(f"{url}: HTTP {res.status}", hint="is the engine's metrics endpoint enabled?")
    return res.body.decode("utf-8", "replace")
