"""`alerts translate`: rule sets written from each engine's documented metrics (tests/alerts/rules) translated
between vLLM, SGLang, TGI and llama.cpp, every output checked by the real `promtool check rules`; what cannot be
translated is flagged and annotated; thresholds tuned to the old engine are listed with the A/B-measured shift."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from switchover.alerts.mapping import SeriesRef, target_of
from switchover.alerts.shift import BenchShifts, stat_for
from switchover.alerts.translate import ANNOTATION, TranslationReport, dump_rules, translate_rules
from switchover.engines.profile import MetricSpec, load_profile
from switchover.errors import BadInput
from switchover.evidence.bench import BenchReport
from switchover.runs import RunDir
from switchover.testing import require_tool
from tests.alerts.command import run_alerts

pytestmark = pytest.mark.usefixtures("synthetic_releases")  # release data: tests/alerts/conftest.py

RULES = Path(__file__).with_name("rules")
ENGINES = ("vllm", "sglang", "tgi", "llamacpp")


def _promtool() -> str:
    return require_tool("promtool", hint="Debian package prometheus")


def _check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60)


def _translate(src: str, dst: str, **kw: Any) -> tuple[dict[str, Any], TranslationReport]:
    return translate_rules(RULES / f"{src}.yaml", load_profile(src), load_profile(dst), **kw)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_rule_sets_written_from_each_engines_metrics_pass_promtool(engine: str) -> None:
    p = _check(RULES / f"{engine}.yaml")
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize(("src", "dst"), list(itertools.permutations(ENGINES, 2)))
def test_every_translation_passes_promtool_and_reads_only_the_new_engines_metrics(
    src: str, dst: str, tmp_path: Path
) -> None:
    data, report = _translate(src, dst)
    out = tmp_path / f"{src}-to-{dst}.yaml"
    out.write_text(dump_rules(data))
    p = _check(out)
    assert p.returncode == 0, p.stdout + p.stderr
    assert any(r.status == "translated" for r in report.rules)
    old_names = {s.name for s in load_profile(src).metrics.values()}
    for r in report.rules:
        if r.status == "translated":  # no old engine series left in a translated rule
            assert not any(n in r.expr_after for n in old_names), r.expr_after
        if r.status == "untranslated" and r.kind == "alert":
            rule = next(x for g in data["groups"] for x in g["rules"] if x.get("alert") == r.rule)
            assert rule["annotations"][ANNOTATION]


def _rule(report: TranslationReport, name: str) -> Any:
    return next(r for r in report.rules if r.rule == name)


def test_vllm_to_sglang_renames_by_intent_and_keeps_bounds_both_have() -> None:
    _, report = _translate("vllm", "sglang")
    ttft = _rule(report, "VllmTTFTHigh")
    assert ttft.status == "translated"
    assert 'sglang:time_to_first_token_seconds_bucket{model_name="served"}' in ttft.expr_after
    assert 'sglang:e2e_request_latency_seconds_bucket{le="10.0"}' in _rule(report, "VllmSlowRequestsShare").expr_after
    assert "sglang:num_queue_reqs" in _rule(report, "VllmQueueBacklog").expr_after
    assert _rule(report, "VllmEngineErrors").status == "untranslated"  # SGLang has no request_success counter
    th = next(t for t in report.thresholds if t.rule == "VllmTTFTHigh")
    assert (th.intent, th.value, th.quantile) == ("ttft", 2.0, 0.99) and "--bench" in th.note


def test_vllm_to_tgi_flags_what_tgi_cannot_say() -> None:
    _, report = _translate("vllm", "tgi")
    assert _rule(report, "VllmTTFTHigh").status == "untranslated"  # TGI exports no TTFT histogram
    share = _rule(report, "VllmSlowRequestsShare").expr_after
    assert 'tgi_request_duration_bucket{le="8.522269"}' in share  # 10 s is no TGI bound: nearest, flagged
    assert any(f.kind == "bucket" and "nearest" in f.detail for f in report.findings)
    # finished_reason="error" selects a subset TGI's success counter cannot tell apart: not silently widened
    errors = _rule(report, "VllmEngineErrors")
    assert errors.status == "untranslated" and errors.expr_after == errors.expr_before
    assert "tgi_request_input_length_sum" in _rule(report, "job:vllm_prompt_tokens:rate5m").expr_after
    assert any(f.kind == "grouping" and "model_name" in f.detail for f in report.findings)


def test_the_adapter_mode_keeps_names_and_flags_series_the_adapter_cannot_serve() -> None:
    _, report = _translate("vllm", "sglang", mode="adapter")
    assert all(r.expr_after == r.expr_before for r in report.rules)
    assert _rule(report, "VllmTTFTHigh").status == "unchanged"
    assert _rule(report, "job:vllm_prefix_cache_hit_ratio:5m").status == "untranslated"
    assert any(f.kind == "adapter" and "re-buckets" in f.detail for f in report.findings)
    assert any("switchover metrics-adapter --from sglang --to vllm" in n for n in report.notes)


def _spec(**kw: Any) -> MetricSpec:
    return MetricSpec(source="test", **kw)


def test_series_map_by_type_and_unit() -> None:
    hist_s = _spec(name="a_seconds", type="histogram", unit="seconds", buckets=[0.1, 1.0])
    dst = load_profile("vllm")
    ref = SeriesRef("ttft", "_count", hist_s)
    assert target_of(ref, dst).name == "vllm:time_to_first_token_seconds_count"
    reqs = SeriesRef("prompt_tokens", "", _spec(name="p", type="counter", unit="requests"))
    t = target_of(reqs, dst)
    assert t.name is None and t.problem == "unit requests cannot be converted to tokens"
    tokens = SeriesRef("prompt_tokens", "_sum", _spec(name="h", type="histogram", unit="tokens"))
    assert target_of(tokens, dst).name == "vllm:prompt_tokens_total"  # a token histogram's _sum is the total
    gauge = SeriesRef("ttft", "", _spec(name="g", type="gauge", unit="seconds"))
    assert target_of(gauge, dst).name is None  # a histogram cannot come from a gauge


def _dist(p: float) -> dict[str, float]:
    return {"count": 100, "mean": p, "std": 0.0, "min": p, "max": p, "p50": p, "p90": p, "p95": p, "p99": p}


def _bench(tmp_path: Path, ttft_new: list[float]) -> Path:
    """A two-endpoint bench summary (old vllm, new sglang) with a TTFT p99 of 1000 ms on old at each step."""
    steps = []
    for i, new in enumerate(ttft_new):
        for label, v in (("old", 1000.0), ("new", new)):
            steps.append(
                {
                    "endpoint": label,
                    "step": i,
                    "concurrency": 2**i,
                    "requests": 100,
                    "warmup": 1,
                    "ok": 100,
                    "failed": 0,
                    "duration_s": 1.0,
                    "req_per_s": 1.0,
                    "out_tok_per_s": 1.0,
                    "chunks_per_s": 1.0,
                    "error_rate": 0.0,
                    "ttft_ms": _dist(v),
                    "tpot_ms": _dist(10.0),
                }
            )
    eps = [{"label": lbl, "url": "http://x", "engine": eng} for lbl, eng in (("old", "vllm"), ("new", "sglang"))]
    summary = {
        "name": "bench",
        "created_wall": 0.0,
        "plan": {"endpoints": eps, "requests": 100},
        "endpoints": [{**e, "model": "m", "output_control": "max_tokens"} for e in eps],
        "steps": steps,
    }
    rd = RunDir.create(tmp_path, "bench")
    rd.write_json("summary", BenchReport.model_validate(summary))
    return rd.path


def test_distribution_thresholds_come_with_the_measured_shift(tmp_path: Path) -> None:
    run = _bench(tmp_path, [1500.0, 1800.0, 2400.0])
    _, report = _translate("vllm", "sglang", shifts=BenchShifts(run, "vllm", "sglang"))
    th = next(t for t in report.thresholds if t.rule == "VllmTTFTHigh")
    assert th.shift is not None and th.shift.stat == "p99" and len(th.shift.steps) == 3
    assert th.suggested == pytest.approx(2 * 1.8) and th.suggested_range == pytest.approx((3.0, 4.8))
    tpot = next(t for t in report.thresholds if t.rule == "VllmSlowTokens")
    assert tpot.shift is not None and tpot.shift.stat == "p90" and tpot.suggested == pytest.approx(0.1)
    assert stat_for(None) == "mean" and stat_for(0.95) == "p95"


def test_a_bench_dir_that_is_not_one_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"no summary\.json"):
        BenchShifts(tmp_path, "vllm", "sglang")


def test_the_cli_writes_checked_rules_and_exits_1_when_some_could_not_be_translated(tmp_path, capsys) -> None:
    out = tmp_path / "sglang.yaml"
    code, stdout, _ = run_alerts(
        capsys, "translate", str(RULES / "tgi.yaml"), "--from", "tgi", "--to", "sglang", "-o", str(out), "--json"
    )
    assert code == 1  # TgiFailures: err="generation" has no SGLang equivalent
    data = orjson.loads(stdout)
    assert data["output_file"] == str(out) and data["rules_yaml"] is None
    assert {r["status"] for r in data["rules"]} == {"translated", "untranslated"}
    assert _check(out).returncode == 0
    code, stdout, err = run_alerts(
        capsys, "translate", str(RULES / "llamacpp.yaml"), "--from", "llamacpp", "--to", "vllm"
    )
    assert yaml.safe_load(stdout)["groups"][0]["rules"][0]["expr"].startswith("max(vllm:num_requests_waiting)")
    assert "llamacpp b11434 → vllm 0.33.0" in err  # the report goes to stderr when the rules go to stdout
    assert "no vllm version given: the newest read, 0.33.0, is assumed" in err


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (
            "groups: [{name: g, rules: [{alert: A}]}]\n",
            ("--from", "vllm", "--to", "sglang"),
            "groups[0].rules[0].expr: required",
        ),
        (
            "groups: [{name: g, rules: [{alert: A, record: b, expr: up}]}]\n",
            ("--from", "vllm", "--to", "sglang"),
            "exactly one of alert, record",
        ),
        (
            "groups: [{name: g, rules: [{alert: A, expr: 'vllm:kv_cache_usage_perc > 0.9', annotations: x}]}]\n",
            ("--from", "vllm", "--to", "llamacpp"),
            "groups[0].rules[0].annotations: a mapping",
        ),
        ("rules: []\n", ("--from", "vllm", "--to", "sglang"), "groups:"),
        ("groups: []\n", ("--from", "vllm", "--to", "vllm"), "both vllm"),
        ("groups: []\n", ("--from", "vlm", "--to", "sglang"), "--from: unknown engine"),
    ],
)
def test_bad_input_is_exit_2_naming_the_field(
    tmp_path, capsys, content: str, args: tuple[str, ...], message: str
) -> None:
    f = tmp_path / "rules.yaml"
    f.write_text(content)
    code, _, err = run_alerts(capsys, "translate", str(f), *args)
    assert code == 2 and message in err and "Traceback" not in err


def test_help_has_an_example(capsys) -> None:
    code, out, _ = run_alerts(capsys, "translate", "--help")
    words = " ".join(out.replace("│", " ").split())  # the help is wrapped to the terminal's width
    assert code == 0 and "Example: switchover alerts translate rules.yaml --from vllm@0.6.3 --to sglang@0.5.5" in words
