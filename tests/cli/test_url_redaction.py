"""A key-shaped URL path is masked wherever `ready`, `probe` and `overload` print the URL, console or JSON
(issue 22: `http://host/sk-…` was printed as given). Loopback fake engine only."""

from __future__ import annotations

import sys
from unittest.mock import patch

import pytest
from aiohttp import web

from switchover.cli.app import main
from switchover.testing.engine import FakeEngine

KEY = "sk-PLANTED0123456789abcdef"


class KeyedEngine(FakeEngine):
    """The fake engine served under /KEY (as behind a proxy that takes its key in the path)."""

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        route = self._routes.get((request.method, request.path.removeprefix(f"/{KEY}")))
        if route is None:
            return web.json_response({"error": {"message": "not found"}}, status=404)
        return await route(request)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    with patch.object(sys, "argv", ["switchover", *args]), pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out + out.err


@pytest.fixture(scope="module")
def keyed_url():
    with KeyedEngine("e", model="m").in_thread() as url:
        yield f"{url}/{KEY}"


@pytest.mark.parametrize("json_out", [False, True])
def test_ready_masks_a_key_in_the_urls_path(capsys, keyed_url, json_out) -> None:
    code, out = _cli(capsys, "ready", keyed_url, "--max-ms", "5000", *(["--json"] if json_out else []))
    assert code == 0 and "PLANTED" not in out and "sk-***" in out


@pytest.mark.parametrize("json_out", [False, True])
def test_probe_masks_a_key_in_the_urls_path(capsys, keyed_url, json_out) -> None:
    _, out = _cli(capsys, "probe", keyed_url, "--only", "stop", *(["--json"] if json_out else []))
    assert "PLANTED" not in out and "sk-***" in out


@pytest.mark.parametrize("json_out", [False, True])
def test_overload_masks_a_key_in_the_urls_path(capsys, keyed_url, json_out) -> None:
    code, out = _cli(
        capsys,
        "overload",
        keyed_url,
        "--max-concurrency",
        "2",
        "--waves",
        "1",
        "--max-tokens",
        "2",
        *(["--json"] if json_out else []),
    )
    assert code == 0 and "PLANTED" not in out and "sk-***" in out
