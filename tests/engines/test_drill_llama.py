"""Rollback drill against a real llama-server: stop one we started ("new"), start another ("old"), and time
the first good 1-token response, then the warm-up tail until its TTFT is steady. Uses its own servers on free
ports, never the shared bed's."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess

import pytest

from switchover.cli.common import run
from switchover.drill import run_drill
from switchover.testbed import processes
from switchover.testbed.install import installed
from switchover.testbed.layout import Layout, bed_models
from switchover.testing import missing as absent
from switchover.warmup import WarmupSettings

pytestmark = pytest.mark.engines


def _require_llama(layout: Layout) -> None:
    missing = [m for m in installed(layout) if "llama" in m.lower() or "gguf" in m.lower()]
    if missing:
        absent(f"llama-server or the tiny GGUF missing: {'; '.join(missing)}")


def test_drill_measures_recovery_on_llama_server(tmp_path) -> None:
    layout = Layout.default()
    _require_llama(layout)
    model = bed_models(layout)["tiny"]
    new_port, old_port = processes.free_port(), processes.free_port()
    new = subprocess.Popen(
        processes.llama_command(layout, model, new_port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    start_old = shlex.join(processes.llama_command(layout, model, old_port))
    res = None
    try:
        res = run(
            run_drill(
                stop_cmd=f"kill {new.pid}",
                start_cmd=start_old,
                url=f"http://127.0.0.1:{old_port}",
                ready_timeout_s=120,
                poll_s=0.1,
                log=tmp_path / "old.log",
                max_recovery_s=120,
                warmup=WarmupSettings(window=5, max_s=60),
            )
        )
        print(f"drill figures: {res.model_dump_json()}")
        assert res.ok, res.reason
        assert new.wait(timeout=30) is not None  # the stop command really stopped "new"
        assert res.foreground_pid and res.recovery_s is not None and res.ready_after_start_s is not None
        assert 0 < res.ready_after_start_s <= res.recovery_s < 120
        assert res.last_state == "ready"
        # the warm-up tail: first tokens were timed after the first good response until two medians agreed
        w = res.warmup
        assert w is not None and w.steady, w and w.reason
        assert w.tail_s is not None and 0 <= w.tail_s < 60 and w.probes >= 10 and w.failed == 0
        assert w.steady_ttft_ms is not None and w.steady_ttft_ms > 0
        assert res.switch_s is not None and res.switch_s >= res.recovery_s
    finally:
        if new.poll() is None:
            new.kill()
            new.wait()
        if res is not None and res.foreground_pid:
            os.killpg(res.foreground_pid, signal.SIGTERM)
