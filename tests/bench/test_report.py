"""report.html: offline page with the curves, the knee marked, the tables."""

from __future__ import annotations

from switchover.bench.report import _series, render
from switchover.evidence.bench import BenchPlan, BenchReport, EndpointInfo, EndpointSpec
from switchover.evidence.bench_findings import KneeResult
from switchover.evidence.bench_step import StepSummary
from switchover.measure.distribution import Dist


def _dist(v: float) -> Dist:
    return Dist(count=10, mean=v, std=0, min=v, max=v, p50=v, p90=v, p95=v, p99=v)


def test_report_is_offline_and_marks_the_knee_and_failures():
    plan = BenchPlan(endpoints=[EndpointSpec(label="old", url="http://a")], buckets=[128], requests=5)
    steps = [
        StepSummary(
            endpoint="old",
            step=i,
            concurrency=c,
            bucket="128",
            requests=5,
            warmup=1,
            ok=5,
            failed=0,
            duration_s=1,
            req_per_s=5,
            out_tok_per_s=100.0 * c,
            chunks_per_s=100,
            error_rate=0,
            ttft_ms=_dist(10),
            tpot_ms=_dist(5 if c <= 8 else 5 + c),
            e2e_ms=_dist(100),
        )
        for i, c in enumerate([1, 2, 4, 8, 16, 32])
    ]
    knee = KneeResult(
        metric="tpot p99",
        found=True,
        concurrency=8.0,
        step_concurrency=8,
        ci_low=6.0,
        ci_high=11.0,
        message="knee at concurrency ≈ 8",
    )
    report = BenchReport(
        name="t",
        created_wall=0,
        plan=plan,
        steps=steps,
        knees={"old/128": knee},
        endpoints=[
            EndpointInfo(label="old", url="http://a", engine="vllm", model="m", output_control="ignore_eos=true")
        ],
        stopped_reason="old: error rate 50% over --max-error-rate 20% after 10 requests",
    )
    html = render(report)
    assert "<script" in html and len(html) > 1_000_000  # plotly.js inlined, no network
    assert "<script src=" not in html
    assert "old knee 8" in html and "knee at concurrency ≈ 8" in html
    assert "Run ended early" in html and "No client calibration" in html


def test_a_trace_replay_step_is_placed_at_its_achieved_rate_not_at_zero():
    plan = BenchPlan(
        endpoints=[EndpointSpec(label="old", url="http://a")],
        buckets=[128],
        concurrency=None,
        dataset="trace.jsonl",
        requests=20,
    )
    steps = [
        StepSummary(
            endpoint="old",
            step=0,
            bucket=None,
            requests=20,
            warmup=0,
            ok=20,
            failed=0,
            duration_s=8,
            req_per_s=2.5,
            out_tok_per_s=300.0,
            chunks_per_s=100,
            error_rate=0,
            ttft_ms=_dist(10),
            tpot_ms=_dist(5),
            e2e_ms=_dist(100),
        )
    ]
    report = BenchReport(
        name="t",
        created_wall=0,
        plan=plan,
        steps=steps,
        knees={},
        endpoints=[
            EndpointInfo(label="old", url="http://a", engine="vllm", model="m", output_control="ignore_eos=true")
        ],
    )
    html = render(report)
    assert "trace (2.50 req/s)" in html and "achieved request rate (req\\u002fs, trace replay)" in html
    assert _series(steps)["x"] == [2.5]
    unmeasured = steps[0].model_copy(update={"req_per_s": None})
    assert _series([unmeasured])["x"] == []  # no rate: left off the load axis rather than drawn at 0


def test_ab_rows_and_checks_name_the_load_never_zero():
    from switchover.bench.report import _load_of

    assert (_load_of(None), _load_of(8), _load_of(2.5)) == ("trace", "8", "2.50")


def test_the_page_escapes_what_it_shows_and_keeps_its_own_markup():
    """Built by the one jinja2 builder (autoescape): names from the command line or engines are text, never markup."""
    from switchover.evidence.bench_findings import SloCheck

    plan = BenchPlan(endpoints=[EndpointSpec(label="old", url="http://a")], buckets=[128], requests=5)
    steps = [
        StepSummary(
            endpoint="<b>old</b>",
            step=0,
            concurrency=4,
            bucket="128",
            requests=5,
            warmup=1,
            ok=5,
            failed=0,
            duration_s=1,
            req_per_s=5,
            out_tok_per_s=100.0,
            chunks_per_s=100,
            error_rate=0,
            ttft_ms=_dist(10),
            tpot_ms=_dist(5),
            e2e_ms=_dist(100),
        )
    ]
    report = BenchReport(
        name="<script>alert(1)</script>",
        created_wall=0,
        plan=plan,
        steps=steps,
        notes=["a & b"],
        endpoints=[
            EndpointInfo(label="<b>old</b>", url="http://a", engine="vllm", model="m", output_control="ignore_eos=true")
        ],
        checks=[
            SloCheck(name="ttft_p99_ms", endpoint="old", step=0, concurrency=4, value=12.0, limit=10.0, passed=False)
        ],
    )
    html = render(report)
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>old</b>" not in html and "&lt;b&gt;old&lt;/b&gt;" in html
    assert "<li>a &amp; b</li>" in html and "<b>FAIL</b>" in html  # the page's own emphasis stays markup


def test_the_console_and_the_page_share_the_step_columns():
    from switchover.bench.steptable import STEP_COLUMNS, load_cell, step_table

    s = StepSummary(
        endpoint="old",
        step=0,
        rate=2.5,
        bucket="128",
        requests=5,
        warmup=1,
        ok=4,
        failed=1,
        duration_s=1,
        req_per_s=5,
        out_tok_per_s=None,
        chunks_per_s=100,
        error_rate=0.2,
        ttft_ms=_dist(10),
        tpot_ms=None,
        e2e_ms=_dist(100),
    )
    head, rows = step_table([s], (("extra", lambda _: "x"),))
    assert head == [name for name, _ in STEP_COLUMNS] + ["extra"]
    row = dict(zip(head, rows[0], strict=True))
    assert (row["load"], row["ok"], row["tok/s"], row["TPOT p99"], row["extra"]) == ("2.50", "4/5", "—", "—", "x")
    assert load_cell(s.model_copy(update={"rate": None})) == "trace (5.00 req/s)"


def test_a_delta_not_measured_is_a_dash_not_a_percent():
    from switchover.evidence.bench import AbStep
    from switchover.evidence.bench_findings import MetricDelta

    plan = BenchPlan(endpoints=[EndpointSpec(label="old", url="http://a")], buckets=[128], requests=5)
    d = MetricDelta(
        metric="ttft_ms",
        stat="p99",
        old=0.0,
        new=3.0,
        delta_pct=None,
        p_value=None,
        significant=False,
        n_old=5,
        n_new=5,
    )
    deltas = [d, d.model_copy(update={"delta_pct": 12.5})]
    report = BenchReport(
        name="ab",
        created_wall=0,
        plan=plan,
        steps=[],
        endpoints=[],
        ab=[AbStep(bucket="128", step=0, concurrency=4, deltas=deltas)],
    )
    html = render(report)
    assert "—%" not in html and "<td>—</td>" in html and "<td>12.5%</td>" in html
