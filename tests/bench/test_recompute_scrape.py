"""Other tools' vocabularies recomputed from rows, and /metrics parsing."""

from __future__ import annotations

import json

import pytest

from switchover.bench.recompute import recompute_rows
from switchover.errors import BadInput
from switchover.measure.prometheus import parse_metrics

MS = 1_000_000


def _row(**kw):
    r = {
        "endpoint": "old",
        "bucket": "32",
        "step": 0,
        "concurrency": 1,
        "rate": None,
        "warmup": False,
        "send_ns": 0,
        "end_ns": 30 * MS,
        "chunk_ns": [5 * MS, 10 * MS, 14 * MS, 20 * MS],
        "chunk_text": ["", "a", "b", ""],
        "completion_tokens": 3,
        "retok_tokens": 5,
        "failure_kind": None,
    }
    r.update(kw)
    return r


def _metric(steps, name):
    return next(m for m in steps[0].metrics if m.name == name)


def test_vllm_ttft_counts_an_empty_first_event_and_tpot_matches():
    steps = recompute_rows([_row()], "vllm")
    assert _metric(steps, "TTFT").mean == pytest.approx(5.0)
    assert _metric(steps, "TPOT").mean == pytest.approx((20 - 5) / 2)
    assert _metric(steps, "E2EL").mean == pytest.approx(20.0)


def test_guidellm_tpot_includes_ttft_and_its_itl_is_our_tpot():
    steps = recompute_rows([_row()], "guidellm")
    assert _metric(steps, "time_per_output_token_ms").mean == pytest.approx(20.0 / 3)
    assert _metric(steps, "inter_token_latency_ms").mean == pytest.approx((20 - 10) / 2)
    assert _metric(steps, "request_latency").mean == pytest.approx(30.0)


def test_aiperf_itl_uses_retokenized_n_unless_server_count():
    assert _metric(recompute_rows([_row()], "aiperf"), "inter_token_latency").mean == pytest.approx(10 / 4)
    server = recompute_rows([_row()], "aiperf", use_server_count=True)
    assert _metric(server, "inter_token_latency").mean == pytest.approx(10 / 2)


def test_unknown_tool_is_bad_input():
    with pytest.raises(BadInput, match="--as must be one of"):
        recompute_rows([_row()], "llmperf")


METRICS = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 4.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 0.9
vllm:time_to_first_token_seconds_count{model_name="m"} 4.0
# TYPE other_metric gauge
other_metric 1.0
"""


def test_parse_metrics_keeps_profile_series_with_intent_and_labels():
    wanted = {"vllm:num_requests_running": "running", "vllm:time_to_first_token_seconds": "ttft"}
    rows = parse_metrics(METRICS, wanted, endpoint="old", t_ns=5, wall=1.0)
    names = {r["name"] for r in rows}
    assert "other_metric" not in names
    assert {"vllm:num_requests_running", "vllm:time_to_first_token_seconds_count"} <= names
    run = next(r for r in rows if r["intent"] == "running")
    assert run["value"] == 3.0 and json.loads(run["labels"]) == {"model_name": "m"} and run["t_ns"] == 5


def test_parse_metrics_tolerates_garbage():
    assert parse_metrics("not { prometheus", {"x": "y"}, endpoint="e", t_ns=0, wall=0) == []
    errors: list[str] = []
    assert parse_metrics("not { prometheus", {"x": "y"}, endpoint="e", t_ns=0, wall=0, errors=errors) == []
    assert errors and errors[0].startswith("unparsable /metrics")


async def test_a_long_step_hands_scraped_rows_to_the_writer_instead_of_holding_them():
    from switchover.bench.scrape import Scraper
    from switchover.wire.client import HttpResult

    class _Client:
        async def request(self, method: str, path: str, timeout: float | None = None) -> HttpResult:
            return HttpResult(200, METRICS.encode(), 1.0)

    written: list[dict] = []
    s = Scraper(_Client(), "old", "vllm", 1.0, on_rows=written.extend, hold=10)  # type: ignore[arg-type]
    for _ in range(20):
        await s.once()
    per_scrape = len(written + s.rows) // 20
    assert per_scrape >= 5 and len(s.rows) < 10 + per_scrape  # never more than `hold` (+ one scrape) held
    assert written and len(written) + len(s.rows) == 20 * per_scrape  # nothing lost, nothing twice
    assert s.note().endswith(f"{len(s.series)} series kept") and len(s.series) >= 4
