"""`switchover demo` without engines: its config is valid, and it stops what it started on every path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from switchover import demo
from switchover.config import load_migration
from switchover.testbed.processes import BedState, EngineProcess


def test_the_demo_config_is_a_valid_migration_with_check_gateway_and_rollout(tmp_path: Path) -> None:
    p = tmp_path / "switchover.yaml"
    p.write_text(demo.demo_config("http://127.0.0.1:1", "http://127.0.0.1:2", 3))
    m = load_migration(p)
    assert m.check is not None and m.gateway is not None and m.rollout is not None
    assert m.gateway.shadow.percent == 100 and m.gateway.weight == 0
    assert m.rollout.stages[0].name == "shadow"
    assert m.check.grace.max_tokens == 1024


def _state() -> BedState:
    eps = [
        EngineProcess(
            role=r,
            engine=e,
            url=f"http://127.0.0.1:{p}",
            port=p,
            pid=1,
            cmdline=["x"],
            log="l",
            model="smollm2",
            served_name="smollm2-135m-instruct",
            started_wall=0.0,
        )
        for r, e, p in (("old", "vllm", 1), ("new", "llamacpp", 2))
    ]
    return BedState(name="demo", model="smollm2", engines=eps)


@pytest.fixture
def fake_bed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(demo, "setup_bed", lambda layout, say: calls.append("setup"))
    monkeypatch.setattr(demo.processes, "up", lambda *a, **k: (calls.append("up"), (_state(), []))[1])
    monkeypatch.setattr(demo.processes, "down", lambda layout, name: (calls.append(f"down:{name}"), ["x"])[1])
    return calls


@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError])
def test_engines_are_stopped_when_the_check_is_interrupted_or_fails(
    fake_bed: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: type[BaseException]
) -> None:
    import switchover.check.runner as runner

    class Boom:
        def __init__(self, *a: Any, **k: Any) -> None:
            pass

        async def run(self) -> None:
            raise exc

    monkeypatch.setattr(runner, "CheckRun", Boom)
    with pytest.raises(exc):
        demo.run_demo(tmp_path, lambda msg: None, load=load_migration)
    assert fake_bed == ["setup", "up", "down:demo"]


def test_a_failing_rollout_is_reported_as_not_run_and_engines_still_stop(
    fake_bed: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_gateway(*a: Any, **k: Any) -> None:
        raise OSError("cannot bind")

    monkeypatch.setattr(demo, "gateway_rollout", no_gateway)
    # real CheckRun: endpoints unreachable -> incomplete
    result = demo.run_demo(tmp_path, lambda msg: None, load=load_migration)
    assert result.overall == "incomplete"
    assert result.rollout is None and result.rollout_not_run and "cannot bind" in result.rollout_not_run
    assert result.report_html and Path(result.report_html).exists()
    assert fake_bed[-1] == "down:demo"


def test_a_stream_counts_as_answered_only_when_it_ends_cleanly() -> None:
    from switchover.demo import _complete_stream

    ok = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
    cut_by_gateway = (
        b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
        b'data: {"error":{"message":"upstream failed mid-stream: truncated"},"choices":[]}\n\n'
        b"data: [DONE]\n\n"
    )
    assert _complete_stream(ok)
    assert not _complete_stream(cut_by_gateway)
    assert not _complete_stream(b'data: {"choices":[]}\n\n')  # no [DONE]
    assert not _complete_stream(b"")


async def test_the_demo_rollout_judges_the_shadow_rows_of_the_traffic_it_just_sent(tmp_path: Path) -> None:
    """Each round's mirrors are on disk before the gates read the ledger: their rows are written by done-callbacks
    and flushed on the gateway's timer, neither of which runs while the synchronous check holds the loop (before,
    the first shadow decision read 0 of the 20 mirrored rows whenever they all landed inside one flush interval)."""
    from switchover.testbed.processes import free_port
    from switchover.testing import FakeEngine

    old, new = await FakeEngine().start(), await FakeEngine().start()
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(demo.demo_config(old.url, new.url, free_port()))
    try:
        summary = await demo.gateway_rollout(load_migration(cfg), cfg, "fake", lambda _s: None, requests=20)
    finally:
        await old.stop()
        await new.stop()
    shadow_gate = next(g for g in summary.steps[1].gates if g["gate"] == "shadow_distribution")
    assert shadow_gate["samples"] >= 15, shadow_gate
