"""The test bed knows its own processes: pid plus kernel start time, never just a pid."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from switchover.testbed import processes
from switchover.testbed.processes import EngineProcess, _spawn, _stat, core_split, cpu_quota, is_ours, usable_cpus


def _proc(pid: int, start_ticks: int | None, cmd: list[str]) -> EngineProcess:
    return EngineProcess(
        role="new",
        engine="llamacpp",
        url="http://127.0.0.1:1",
        port=1,
        pid=pid,
        cmdline=cmd,
        log="l",
        model="tiny",
        served_name="m",
        started_wall=time.time(),
        start_ticks=start_ticks,
    )


def test_a_started_process_is_ours_until_it_exits(tmp_path: Path) -> None:
    cmd = ["sleep", "30"]
    child = _spawn(cmd, tmp_path / "log", {})
    st = _stat(child.pid)
    assert st is not None
    proc = _proc(child.pid, st[1], cmd)
    assert is_ours(proc)  # immediately after spawn, even before its argv is readable
    os.kill(child.pid, signal.SIGTERM)
    child.wait(timeout=10)
    assert not is_ours(proc)


def test_a_recycled_pid_with_another_start_time_is_not_ours(tmp_path: Path) -> None:
    cmd = ["sleep", "30"]
    child = _spawn(cmd, tmp_path / "log", {})
    try:
        st = _stat(child.pid)
        assert st is not None
        assert not is_ours(_proc(child.pid, st[1] + 1, cmd))
    finally:
        child.kill()
        child.wait(timeout=10)


def test_down_without_state_stops_nothing(tmp_path: Path) -> None:
    assert processes.down(processes.Layout(tmp_path), name="nothing") == []


@pytest.mark.parametrize(
    ("cpus", "vllm", "llama"),
    [
        ([0], [0], [0]),  # one core: shared
        ([0, 1], [0], [1]),
        ([3, 1, 2, 0], [0, 1], [2, 3]),  # sorted first
        ([0, 1, 2], [0], [1, 2]),  # odd: llama-server gets the extra core
        ([4, 5, 6, 7, 8, 9], [4, 5, 6], [7, 8, 9]),  # an affinity mask that does not start at 0
    ],
)
def test_engines_get_disjoint_cores(cpus: list[int], vllm: list[int], llama: list[int]) -> None:
    assert core_split(cpus) == (vllm, llama)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux-only")
def test_a_pinned_engine_runs_only_on_its_cores(tmp_path: Path) -> None:
    mine = sorted(os.sched_getaffinity(0))
    child = _spawn(["sleep", "30"], tmp_path / "log", {}, cpus=mine[-1:])
    try:
        assert os.sched_getaffinity(child.pid) == {mine[-1]}
    finally:
        child.kill()
        child.wait(timeout=10)


@pytest.mark.parametrize(
    ("files", "quota"),
    [
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "200000 100000\n"}, 2.0),
        ({"cpu.max": "150000 100000\n"}, 1.5),
        ({"cpu.max": "100000 50000\n"}, 2.0),  # the period is read, not assumed
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),  # cgroup v1, unlimited
        ({"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4.0),
        ({}, None),  # nothing readable
    ],
)
def test_cpu_quota_from_cgroup_v2_or_v1(tmp_path: Path, files: dict[str, str], quota: float | None) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cpu_quota(tmp_path) == quota


def test_a_cpu_quota_cuts_the_affinity_mask() -> None:
    many = list(range(64))
    assert usable_cpus(quota=2.0, affinity=many) == [0, 1]
    assert usable_cpus(quota=1.5, affinity=many) == [0, 1]  # rounded up
    assert usable_cpus(quota=0.5, affinity=many) == [0]
    assert core_split(usable_cpus(quota=2.0, affinity=many)) == ([0], [1])
