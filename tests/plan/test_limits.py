"""`plan limits`: new's knee as the canary's weight cap and as client and gateway timeouts."""

from __future__ import annotations

import sys
from pathlib import Path
from unittest.mock import patch

import numpy as np
import orjson
import pytest

from switchover.bench.knee import knee_with_ci
from switchover.cli.app import main
from switchover.errors import BadInput
from switchover.evidence.bench import BenchPlan, BenchReport, EndpointSpec
from switchover.evidence.bench_findings import KneeResult
from switchover.evidence.bench_step import StepSummary
from switchover.measure.distribution import Dist
from switchover.plan.limits import MIN_IDLE_MS, limits, read_bench

LADDER = [1, 2, 4, 8, 16, 32]


def _dist(p99: float) -> Dist:
    return Dist(
        count=100, mean=p99 / 2, std=1.0, min=1.0, max=p99 * 1.1, p50=p99 / 2, p90=p99 * 0.8, p95=p99 * 0.9, p99=p99
    )


def _step(endpoint: str, c: int, bucket: str = "512", *, itl: float | None = 40.0) -> StepSummary:
    return StepSummary(
        endpoint=endpoint,
        step=c,
        concurrency=c,
        bucket=bucket,
        requests=100,
        warmup=1,
        ok=100,
        failed=0,
        duration_s=10.0,
        req_per_s=c / 2,
        out_tok_per_s=c * 50.0,
        chunks_per_s=c * 50.0,
        error_rate=0.0,
        e2e_ms=_dist(2000.0 + 100 * c),
        ttft_ms=_dist(100.0 + 10 * c),
        itl_ms=_dist(itl) if itl is not None else None,
    )


def _bench(knee: KneeResult, *, buckets: tuple[str, ...] = ("512",)) -> BenchReport:
    plan = BenchPlan(endpoints=[EndpointSpec(label="new", url="http://127.0.0.1:1")], requests=100)
    steps = [_step("new", c, b) for b in buckets for c in LADDER]
    return BenchReport(
        name="b", created_wall=0.0, plan=plan, endpoints=[], steps=steps, knees={f"new/{b}": knee for b in buckets}
    )


FOUND = KneeResult(
    metric="tpot p99",
    found=True,
    concurrency=10.5,
    step_concurrency=8,
    ci_low=8.5,
    ci_high=12.0,
    message="knee at 10.5",
)
FLAT = KneeResult(metric="tpot p99", found=False, message="the curve does not bend upward in range")


def test_the_cap_is_the_knees_ci_low_over_the_peak_and_timeouts_are_the_p99_there_with_the_margin() -> None:
    r = limits(_bench(FOUND), "b", peak=40.0, margin=0.5)
    assert r.capacity == 8.5 and r.step_load == 8 and r.weight_cap_percent == 21  # floor(100 × 8.5 / 40)
    assert r.e2e_p99_ms == 2800.0 and r.client_timeout_s == 5  # ceil(2.8 s × 1.5)
    assert r.fallback_on_timeout_ms == 270 and r.idle_ms == MIN_IDLE_MS  # TTFT 180 × 1.5; ITL 60 ms → the floor
    assert not r.over_cap and limits(_bench(FOUND), "b", peak=40.0, planned_weight=25).over_cap


def test_a_ladder_that_never_bent_gives_a_lower_bound_from_the_top_step_and_says_so() -> None:
    r = limits(_bench(FLAT), "b", peak=64.0)
    assert not r.knee_found and r.capacity == 32 and r.weight_cap_percent == 50
    assert any("lower bound" in n for n in r.notes)


def test_without_a_peak_the_cap_is_unknown_never_guessed() -> None:
    r = limits(_bench(FOUND), "b")
    assert r.weight_cap_percent is None and not r.over_cap and any("--peak" in n for n in r.notes)
    assert limits(_bench(FOUND), "b", peak=1.0).weight_cap_percent == 100  # a cap is a percent: at most 100


@pytest.mark.parametrize(
    ("kwargs", "message"), [({"endpoint": "old"}, "no knee for it"), ({"bucket": "128"}, "not measured for new")]
)
def test_a_missing_endpoint_or_bucket_is_bad_input_naming_what_exists(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(BadInput, match=message):
        limits(_bench(FOUND), "b", **kwargs)  # type: ignore[arg-type]


def test_several_buckets_need_one_named() -> None:
    with pytest.raises(BadInput, match="name one with --bucket"):
        limits(_bench(FOUND, buckets=("128", "512")), "b")
    assert limits(_bench(FOUND, buckets=("128", "512")), "b", bucket="128").bucket == "128"


def test_a_knee_fitted_by_the_bench_feeds_the_cap() -> None:
    rng = np.random.default_rng(0)
    samples = [list(rng.normal(20 if c <= 8 else 20 + 6 * (c - 8), 1.0, 200)) for c in LADDER]
    knee = knee_with_ci(LADDER, samples, boot=50)
    assert knee.found and knee.concurrency is not None
    r = limits(_bench(knee), "b", peak=100.0)
    assert r.capacity == (knee.ci_low if knee.ci_low is not None else knee.concurrency)
    assert r.weight_cap_percent == int(100 * r.capacity / 100.0)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with patch.object(sys, "argv", ["switchover", "plan", "limits", *args]), pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_the_command_exits_1_above_the_cap_2_on_a_bad_bench_and_prints_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "bench"
    run.mkdir()
    (run / "summary.json").write_bytes(orjson.dumps(_bench(FOUND).model_dump(mode="json")))
    assert read_bench(run).knees["new/512"].found
    code, out, _ = _cli(capsys, "--bench", str(run), "--peak", "40", "--json")
    assert code == 0 and orjson.loads(out)["weight_cap_percent"] == 21
    code, out, err = _cli(capsys, "--bench", str(run), "--peak", "40", "--weight", "50")
    assert code == 1 and "weight cap: 21 %" in out and "above the cap of 21 %" in err
    code, _, err = _cli(capsys, "--bench", str(tmp_path / "nope"))
    assert code == 2 and "no such file" in err
    (tmp_path / "bad.json").write_text('{"name": 1}')
    code, _, err = _cli(capsys, "--bench", str(tmp_path / "bad.json"))
    assert code == 2 and "not a bench summary.json" in err
