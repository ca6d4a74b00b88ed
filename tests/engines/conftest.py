"""Real-engine tier: vLLM CPU (old) and llama-server (new) from the test bed, on the tiny model.

In CI (CI=true) a missing test bed fails the tier loudly; elsewhere it skips with the reason.
Set SWITCHOVER_TESTBED_REUSE=<name> to use a bed already started with `switchover testbed up --name <name>`
(it is left running); otherwise one bed is started for the session on free ports and stopped after it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from switchover.testbed import processes
from switchover.testbed.install import installed
from switchover.testbed.layout import Layout
from switchover.testing import missing as absent


@dataclass(frozen=True)
class Bed:
    """URLs and model of the running test bed."""

    old_url: str  # vLLM CPU
    new_url: str  # llama-server
    model: str  # served model name (same on both)
    layout: Layout
    key: str  # tiny | smollm2


def _unavailable(reason: str) -> None:
    absent(f"real-engine tier cannot run: {reason}")


def _bring_up(model_key: str, name: str) -> Iterator[Bed]:
    layout = Layout.default()
    reuse = os.environ.get("SWITCHOVER_TESTBED_REUSE")
    if reuse:
        state = processes.load_state(layout, reuse)
        if state is None or not all(processes.is_ours(e) for e in state.engines):
            _unavailable(f"SWITCHOVER_TESTBED_REUSE={reuse} but that bed is not running")
        assert state is not None
        if state.model != model_key:
            _unavailable(f"bed {reuse!r} serves {state.model!r}, this test needs {model_key!r}")
        yield Bed(state.url("old"), state.url("new"), state.engines[0].served_name, layout, model_key)
        return
    missing = installed(layout, with_smollm2=model_key == "smollm2")
    if missing:
        _unavailable(f"test bed in {layout.root} is missing: {'; '.join(missing)} (run `switchover testbed setup`)")
    state, _ = processes.up(
        layout,
        model=model_key,
        name=name,
        old_port=processes.free_port(),
        new_port=processes.free_port(),
        timeout_s=600,
    )
    try:
        yield Bed(state.url("old"), state.url("new"), state.engines[0].served_name, layout, model_key)
    finally:
        processes.down(layout, name=name)


@pytest.fixture(scope="session")
def bed() -> Iterator[Bed]:
    """Both engines serving the tiny model, started once per test session."""
    yield from _bring_up("tiny", f"pytest-{os.getpid()}")
