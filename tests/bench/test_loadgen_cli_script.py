"""bench/loadgen_cli.py's reading of repeated runs: the median run stands for a tool, memory bounds hold per run."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from loadgen_cli import median_run


def run(rps: float, growth: float = 10.0, **extra: float) -> dict:
    return {"req_per_s": rps, "idle_rss_mb": 200.0, "self_peak_rss_mb": 200.0 + growth, "cpu_s": 5.0, **extra}


def test_the_median_run_stands_for_the_tool_with_every_runs_figure_kept():
    got = median_run([run(9000, startup_cpu_s=2.0), run(7000), run(11000)])
    assert got["req_per_s"] == 9000 and got["rounds"] == [9000, 7000, 11000]
    assert got["startup_cpu_s"] == 2.0  # the start-up run is made once, beside the first round
    assert median_run([run(8000), run(6000)])["req_per_s"] == 6000  # even count: the lower middle, never flattered


def test_the_largest_memory_growth_of_any_run_is_what_the_bound_is_checked_against():
    got = median_run([run(9000, growth=40), run(8000, growth=160), run(10000, growth=50)])
    assert got["self_peak_rss_mb"] - got["idle_rss_mb"] == 160


def test_one_failed_run_fails_the_tool():
    assert "failed" in median_run([run(9000), {"failed": "timed out after 600 s"}, run(9100)])
    assert median_run([])["failed"] == "no run"


def test_a_flatness_check_whose_longer_run_failed_is_said_missed_not_skipped(capsys):
    from loadgen_cli import _verdict

    cli = {**run(7000, growth=270), "requests": 40000, "longer_failed": "timed out after 600 s"}
    assert _verdict(10000, {("cli", 10000): cli}) is True
    assert (
        "MISSED: CLI memory flat in the request count: not measured (timed out after 600 s)" in capsys.readouterr().out
    )
