"""`check` lists each endpoint's models once per run: the live parts reuse the discovery (counted on fake engines)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from aiohttp import web

from switchover.check.runner import CheckRun
from switchover.config import load_migration
from switchover.testing import FakeEngine, Persona


class CountingEngine(FakeEngine):
    """The fake engine, counting the requests to each path."""

    def __init__(self, name: str) -> None:
        super().__init__(name, persona=Persona())
        self.paths: Counter[str] = Counter()
        self.ports: dict[str, set[int]] = {}  # request path -> client ports it came from

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.paths[f"{request.method} {request.path}"] += 1
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if peer:
            self.ports.setdefault(request.path, set()).add(peer[1])
        return await super()._dispatch(request)


def _config(tmp_path: Path, old: str, new: str, model: str = "") -> Path:
    p = tmp_path / "switchover.yaml"
    named = f", model: {model}" if model else ""
    p.write_text(
        f"old: {{url: '{old}', engine: vllm{named}}}\n"
        f"new: {{url: '{new}', engine: vllm{named}}}\n"
        "check:\n"
        "  probe: {only: [stop.count, finish.length, usage.stream_include_usage], budget_s: 5}\n"
        "  verify: {max_prompts: 1, structured: 1, long_inputs: true}\n"
        "  bench: {enabled: false}\n"
        "  rollback: {enabled: false}\n"
    )
    return p


async def _run(tmp_path: Path, model: str = "") -> tuple[CountingEngine, CountingEngine, dict[str, str]]:
    old, new = CountingEngine("old"), CountingEngine("new")
    async with old.running() as old_url, new.running() as new_url:
        cfg = _config(tmp_path, old_url, new_url, model)
        m = load_migration(cfg)
        assert m.check is not None
        report, _ = await CheckRun(m, m.check, config_path=cfg).run()
    return old, new, {p.part: p.status for p in report.parts}


async def test_check_lists_the_models_once_per_endpoint(tmp_path: Path) -> None:
    old, new, parts = await _run(tmp_path)
    for live in ("probe", "verify", "live_model", "metrics"):
        assert parts[live] == "ran", parts
    assert old.paths["GET /v1/models"] == 1 and new.paths["GET /v1/models"] == 1, (old.paths, new.paths)
    assert old.paths["POST /v1/chat/completions"] > 0  # the live parts did talk to the engine


async def test_check_uses_the_discovered_context_length_for_the_long_inputs(tmp_path: Path) -> None:
    import json

    _, _, _ = await _run(tmp_path)
    run_dir = next((tmp_path / "runs").iterdir())
    verify = json.loads((run_dir / "verify.json").read_text())
    probe = json.loads((run_dir / "probe.json").read_text())
    assert probe["old"]["context"] == Persona().context  # /v1/models max_model_len, read by the vllm profile
    assert verify["long_inputs"], verify


async def test_a_named_model_is_not_replaced_by_the_listed_one(tmp_path: Path) -> None:
    old, _, parts = await _run(tmp_path, model="fake-model")
    assert parts["probe"] == "ran" and old.paths["GET /v1/models"] == 1


async def test_the_checks_own_requests_share_one_connection_per_endpoint(tmp_path: Path) -> None:
    old, new, _ = await _run(tmp_path)
    for engine in (old, new):
        own = engine.ports["/v1/models"] | engine.ports["/metrics"]
        assert len(own) == 1, engine.ports  # discovery and the metrics scrape
        assert own <= engine.ports["/tokenize"], engine.ports  # the live-model counts too (probe and verify also ask)
