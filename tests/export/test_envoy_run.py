"""The Envoy export running for real (loopback, bounded): tenants stick to one arm, a failing new engine
falls back to old, and mirrored copies reach new. Skips locally / fails in CI without the binary."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from switchover.export.envoy import envoy_config
from switchover.subproc import stop
from switchover.testbed.processes import free_port
from switchover.testing import FakeEngine, wait_until
from tests.export.test_envoy import _envoy


@pytest.fixture
def upstreams() -> Iterator[tuple[FakeEngine, FakeEngine]]:
    """Two fake engines in background threads; each names itself in its answers' `model` field."""
    old, new = FakeEngine("old", model="old"), FakeEngine("new", model="new")
    with old.in_thread(), new.in_thread():
        yield old, new


def _ready(admin: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin}/ready", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def _post(url: str, tenant: str) -> tuple[int, str]:
    req = urllib.request.Request(
        url, data=b'{"prompt": "hi"}', headers={"x-team": tenant, "Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())["model"]
    except urllib.error.HTTPError as exc:
        return exc.code, "error"


def test_envoy_export_sticks_tenants_falls_back_and_mirrors(make_migration, upstreams, tmp_path: Path) -> None:
    binary = _envoy()
    old, new = upstreams
    m = make_migration(weight=30, shadow=100, new_engine="vllm")
    m.old.url, m.new.url = old.url, new.url
    port, admin = free_port(), free_port()
    cfg = tmp_path / "envoy.yaml"
    cfg.write_text(envoy_config(m, listen_port=port, admin_port=admin).render())
    proc = subprocess.Popen(
        [binary, "-c", str(cfg), "--concurrency", "1", "-l", "error", "--disable-hot-restart"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: proc.poll() is not None or _ready(admin), 30, "envoy's admin /ready")
        assert proc.poll() is None, f"envoy exited with {proc.returncode}"
        url = f"http://127.0.0.1:{port}/v1/completions"
        seen: dict[str, set[str]] = {}
        for rnd in range(3):
            for t in range(40):
                status, engine = _post(url, f"tenant-{t}")
                assert status == 200
                seen.setdefault(f"tenant-{t}", set()).add(engine)
            del rnd
        assert all(len(v) == 1 for v in seen.values()), "a tenant moved between arms"
        on_new = [t for t, v in seen.items() if v == {"new"}]
        assert 2 <= len(on_new) <= 24  # 30 % of 40 tenants, loosely (hash buckets)
        # shadow 100 %: Envoy mirrors every request of the route to new, whichever arm serves it (new sees its own
        # tenants twice); mirrors are sent on their own, so the count is awaited, not slept for
        want = 120 + 3 * len(on_new)
        wait_until(lambda: new.stats.completed >= want, 10, f"{want} requests on new (its primaries + mirrors)")
        assert old.stats.requests == 120 - 3 * len(on_new)  # old served only its own tenants
        old_only = next(t for t, v in seen.items() if v == {"old"})
        assert _post(url, old_only) == (200, "old")
        wait_until(lambda: new.stats.completed >= want + 1, 10, "the mirror of an old-arm request on new")
        assert new.stats.completed == want + 1
        new.script(weights={"status:503": 1})
        results = [_post(url, t) for t in on_new]
        assert results and all(r == (200, "old") for r in results)  # new answers 503 → retried on old
    finally:
        stop(proc)
