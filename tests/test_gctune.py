"""gctune: what a hot-path process sets."""

from __future__ import annotations

import gc
import subprocess
import sys

from switchover.gctune import THRESHOLDS, quiet_gc


def test_quiet_gc_freezes_start_up_objects_and_raises_the_young_threshold() -> None:
    before = gc.get_threshold()
    try:
        quiet_gc()
        assert gc.get_threshold() == THRESHOLDS and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_hot_commands_run_with_it_and_others_do_not() -> None:
    # in a fresh process: this one's collector may already be tuned by an in-process command of another test
    code = (
        "import asyncio, gc\n"
        "from switchover.cli.common import run\n"
        "default = gc.get_threshold()[0]\n"
        "async def t(): return gc.get_threshold()\n"
        "print(default, run(t())[0], run(t(), hot=True)[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    default, plain, hot = out.stdout.split()
    assert plain == default != str(THRESHOLDS[0]) and hot == str(THRESHOLDS[0])
