"""The large stage's cost-per-request gate: a bench's throughput priced by the GPU-hour, new against old per bucket."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from switchover.config import load_migration
from switchover.config.rollout_entry import CostSettings
from switchover.evidence.bench import BenchPlan, BenchReport, EndpointSpec
from switchover.evidence.bench_step import StepSummary
from switchover.rollout.controller import Rollout
from switchover.rollout.cost import bucket_costs, judge_cost, read_bench
from tests.rollout.builders import Clock, write_ledger


def _step(endpoint: str, conc: int, rps: float, tps: float, bucket: str = "128", failed: int = 0) -> StepSummary:
    n = 100
    return StepSummary(
        endpoint=endpoint,
        step=conc,
        concurrency=conc,
        bucket=bucket,
        requests=n,
        warmup=1,
        ok=n - failed,
        failed=failed,
        duration_s=n / rps,
        req_per_s=rps,
        out_tok_per_s=tps,
        chunks_per_s=tps,
        error_rate=failed / n,
    )


def _bench(steps: list[StepSummary]) -> BenchReport:
    plan = BenchPlan(
        endpoints=[
            EndpointSpec(label="old", url="http://127.0.0.1:1"),
            EndpointSpec(label="new", url="http://127.0.0.1:2"),
        ],
        requests=100,
    )
    return BenchReport(name="ab", created_wall=0.0, plan=plan, endpoints=[], steps=steps)


STEPS = [
    _step("old", 4, 2.0, 200.0),
    _step("old", 8, 3.0, 300.0),
    _step("new", 4, 3.0, 300.0),
    _step("new", 8, 4.0, 400.0),
    _step("new", 16, 8.0, 800.0, failed=20),
]  # 20 % failed: not a throughput


def test_each_arm_is_priced_at_its_best_step_with_few_failures() -> None:
    (row,) = bucket_costs(_bench(STEPS), CostSettings(gpu_hour_price=3.6))
    assert row.old.load == 8 and row.new.load == 8  # new's 16 had 20 % failures
    assert row.old.cost_per_request == pytest.approx(3.6 / 3600 / 3.0)
    assert row.new.cost_per_request == pytest.approx(3.6 / 3600 / 4.0)
    assert row.new.tokens_per_request == pytest.approx(100.0) and row.ratio == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("cost", "status", "text"),
    [
        (CostSettings(gpu_hour_price=3.6), "pass", "ratio 0.75, max 1"),
        (CostSettings(gpu_hour_price=3.6, gpus_new=2), "fail", "ratio 1.50, max 1"),  # twice the GPUs per replica
        (CostSettings(gpu_hour_price=6.0, old_gpu_hour_price=3.0, max_ratio=1.6), "pass", "ratio 1.50, max 1.6"),
        (CostSettings(), "missing", "gpu_hour_price is not stated"),
    ],
)
def test_new_may_cost_at_most_max_ratio_times_old_per_request(cost: CostSettings, status: str, text: str) -> None:
    item = judge_cost(cost, _bench(STEPS), None)
    assert item.status == status and text in item.reason


def test_a_missing_bench_or_one_arm_only_is_missing_never_a_pass(tmp_path: Path) -> None:
    cost = CostSettings(gpu_hour_price=2.0)
    assert judge_cost(cost, None, "no bench run").status == "missing"
    only_new = judge_cost(cost, _bench([s for s in STEPS if s.endpoint == "new"]), None)
    assert only_new.status == "missing" and "both old and new" in only_new.reason
    report, problem = read_bench(tmp_path / "nothing")
    assert report is None and problem is not None and "no such file" in problem


CONFIG = """\
old: {url: "http://127.0.0.1:18001", engine: vllm}
new: {url: "http://127.0.0.1:18002", engine: llamacpp}
gateway:
  weight: 0
  rollback: false
  run_dir: gw
rollout:
  stages: [5, 50, 100]
  entry: {shared_gpu: false, cache_key: versioned}
  cost: {gpu_hour_price: 2.0, gpus_new: 2, bench: ab}
"""


def test_entering_the_large_stage_is_refused_when_new_costs_more_per_request(tmp_path: Path) -> None:
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(CONFIG)
    write_ledger(tmp_path / "gw", [])
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "summary.json").write_bytes(orjson.dumps(_bench(STEPS).model_dump(mode="json")))
    r = Rollout(load_migration(cfg), cfg, clock=Clock(time.time()))
    res = r.advance(why="start", waivers={"rollout.entry_check": "t", "precanary.grace": "t"})
    assert res.action == "advance" and res.state.stage == "5%", res.message
    report = r.gate_report()
    assert report.entry is not None and [(i.id, i.status) for i in report.entry.items] == [
        ("rollout.cost_per_request", "fail")
    ]
    assert "ratio 1.50" in report.entry.items[0].reason and report.decision != "advance"
