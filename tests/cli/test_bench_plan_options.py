"""`switchover bench`: every option the plan takes as given (bench_cmd.PLAN_AS_GIVEN) reaches its BenchPlan field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from switchover.cli import bench_cmd
from switchover.evidence.bench import BenchPlan
from tests.cli import cases as C
from tests.cli.runner import run_cli
from tests.cli.workspace import CLOSED

# a value other than the default for each option in PLAN_AS_GIVEN (flags: the switch that is not the default);
# --checkpoint-every is given alone (a soak runs in one process: it cannot be combined with --workers 3)
GIVEN: dict[str, tuple[list[str], Any]] = {
    "name": (["--name", "plan-test"], "plan-test"),
    "api": (["--api", "chat"], "chat"),
    "arrival": (["--arrival", "gamma"], "gamma"),
    "burstiness": (["--burstiness", "0.5"], 0.5),
    "max_inflight": (["--max-inflight", "7"], 7),
    "warmup_requests": (["--warmup-requests", "3"], 3),
    "warmup_s": (["--warmup-s", "2.5"], 2.5),
    "repeats": (["--repeats", "2"], 2),
    "allow_prefix_cache": (["--allow-prefix-cache"], True),
    "trace_speed": (["--trace-speed", "4"], 4.0),
    "max_error_rate": (["--max-error-rate", "0.25"], 0.25),
    "knee_metric": (["--knee-metric", "ttft"], "ttft"),
    "scrape_interval": (["--scrape-interval", "0"], 0.0),
    "timeout": (["--timeout", "12"], 12.0),
    "calibrate": (["--no-calibrate"], False),
    "checkpoint_every": (["--checkpoint-every", "2m"], 120.0),
    "window": (["--window", "90s"], 90.0),
    "workers": (["--workers", "3"], 3),
}


REACHED = 99


def test_the_table_names_bench_options_and_plan_fields() -> None:
    options = {p.name for p in C.commands()["bench"].params}
    assert set(bench_cmd.PLAN_AS_GIVEN) <= options
    assert set(bench_cmd.PLAN_AS_GIVEN.values()) <= set(BenchPlan.model_fields)
    assert set(GIVEN) == set(bench_cmd.PLAN_AS_GIVEN)


@pytest.mark.parametrize("options", [[o for o in GIVEN if o != "checkpoint_every"], ["checkpoint_every"]])
def test_each_option_given_reaches_its_plan_field(
    options: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[BenchPlan] = []

    def fake_run(plan: BenchPlan, *_: Any, **__: Any) -> None:
        seen.append(plan)
        raise SystemExit(REACHED)

    monkeypatch.setattr("switchover.bench.runner.BenchRun", fake_run)
    argv = ["bench", "--url", CLOSED, "--engine", "vllm", "--requests", "1", "--runs-dir", str(tmp_path)]
    for option in options:
        argv += GIVEN[option][0]
    code, _, err, _ = run_cli(argv)
    assert code == REACHED, err
    (plan,) = seen
    for option in options:
        assert getattr(plan, bench_cmd.PLAN_AS_GIVEN[option]) == GIVEN[option][1], option
