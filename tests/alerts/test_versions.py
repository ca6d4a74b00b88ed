"""`alerts translate` across releases: renames by release range, same-engine upgrades, and no rule left silently
watching a series the target release never serves (release data: the hand-written tables of conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from switchover.alerts.release import EngineRelease, engine_of, engine_release
from switchover.alerts.report import TranslationReport
from switchover.alerts.translate import ANNOTATION, translate_rules
from switchover.errors import BadInput
from tests.alerts.command import run_alerts

pytestmark = pytest.mark.usefixtures("synthetic_releases")


def _file(tmp_path: Path, *rules: dict[str, Any]) -> Path:
    p = tmp_path / "rules.yaml"
    p.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": list(rules)}]}))
    return p


def _alert(name: str, expr: str) -> dict[str, Any]:
    return {"alert": name, "expr": expr, "annotations": {"summary": name}}


def _run(
    tmp_path: Path, src: str, dst: str, *rules: dict[str, Any], **kw: Any
) -> tuple[dict[str, Any], TranslationReport]:
    return translate_rules(_file(tmp_path, *rules), engine_release(src, "--from"), engine_release(dst, "--to"), **kw)


def _rule(report: TranslationReport, name: str) -> Any:
    return next(r for r in report.rules if r.rule == name)


def test_vllm_0_6_to_sglang_0_5_renames_the_series_of_that_era(tmp_path: Path) -> None:
    _, report = _run(
        tmp_path,
        "vllm@0.6.3",
        "sglang@0.5.5",
        _alert("KV", "max(vllm:gpu_cache_usage_perc) > 0.95"),
        _alert(
            "ITL", "histogram_quantile(0.99, sum by (le) (rate(vllm:time_per_output_token_seconds_bucket[5m]))) > 0.2"
        ),
    )
    assert _rule(report, "KV").expr_after == "max(sglang:token_usage) > 0.95"
    assert _rule(report, "KV").status == "translated"
    itl = _rule(report, "ITL")
    assert "sglang:inter_token_latency_seconds_bucket" in itl.expr_after and itl.status == "translated"
    assert (report.source_version, report.target_version) == ("0.6.3", "0.5.5")


def test_a_same_engine_upgrade_is_a_migration_with_renames(tmp_path: Path) -> None:
    _, report = _run(
        tmp_path,
        "vllm@0.6.3",
        "vllm==0.11.0",
        _alert("KV", "vllm:gpu_cache_usage_perc > 0.9"),
        _alert(
            "ITL",
            "rate(vllm:time_per_output_token_seconds_sum[5m]) / "
            "rate(vllm:time_per_output_token_seconds_count[5m]) > 0.1",
        ),
        _alert("Running", "vllm:num_requests_running > 100"),
    )
    assert _rule(report, "KV").expr_after == "vllm:kv_cache_usage_perc > 0.9"
    assert "vllm:inter_token_latency_seconds_sum" in _rule(report, "ITL").expr_after
    assert _rule(report, "Running").status == "unchanged"


def test_the_prefix_cache_counters_take_their_0_9_2_names(tmp_path: Path) -> None:
    _, report = _run(
        tmp_path,
        "vllm@0.8.5.post1",
        "vllm@0.11.0",
        {
            "record": "hit",
            "expr": "rate(vllm:gpu_prefix_cache_hits_total[5m]) / rate(vllm:gpu_prefix_cache_queries_total[5m])",
        },
    )
    rule = _rule(report, "hit")
    assert rule.status == "translated"
    assert rule.expr_after == "rate(vllm:prefix_cache_hits_total[5m]) / rate(vllm:prefix_cache_queries_total[5m])"


def test_sglang_time_per_output_token_becomes_inter_token_latency(tmp_path: Path) -> None:
    _, report = _run(
        tmp_path,
        "sglang@0.4.3",
        "sglang@0.5.5",
        _alert("Slow", "histogram_quantile(0.9, rate(sglang:time_per_output_token_seconds_bucket[5m])) > 0.05"),
    )
    assert "sglang:inter_token_latency_seconds_bucket" in _rule(report, "Slow").expr_after


def test_a_series_the_target_release_dropped_is_an_error_not_unchanged(tmp_path: Path) -> None:
    data, report = _run(tmp_path, "vllm@0.6.3", "vllm@0.11.0", _alert("Swapped", "vllm:num_requests_swapped > 0"))
    rule = _rule(report, "Swapped")
    assert rule.status == "untranslated" and rule.series_left == ["vllm:num_requests_swapped"]
    assert any(f.severity == "error" and f.kind == "dead_series" and f.url for f in report.errors)
    assert data["groups"][0]["rules"][0]["annotations"][ANNOTATION]


def test_llamacpp_kv_cache_series_are_gone_after_their_removal(tmp_path: Path) -> None:
    _, report = _run(
        tmp_path, "llamacpp@b3995", "llamacpp@b11434", _alert("KVFull", "llamacpp:kv_cache_usage_ratio > 0.9")
    )
    assert _rule(report, "KVFull").status == "untranslated" and report.errors


def test_keep_unknown_keeps_and_annotates_the_rule_as_a_warning(tmp_path: Path) -> None:
    data, report = _run(
        tmp_path,
        "llamacpp@b3995",
        "llamacpp@b11434",
        _alert("KVFull", "llamacpp:kv_cache_tokens > 1000"),
        keep_unknown=True,
    )
    rule = _rule(report, "KVFull")
    assert rule.status == "untranslated" and rule.series_left == ["llamacpp:kv_cache_tokens"]
    assert not report.errors and any(f.kind == "dead_series" and f.severity == "warning" for f in report.findings)
    assert "kv_cache_tokens" in data["groups"][0]["rules"][0]["annotations"][ANNOTATION]


def test_llamacpp_kv_usage_before_its_removal_becomes_the_targets_kv_usage(tmp_path: Path) -> None:
    _, report = _run(tmp_path, "llamacpp@b3995", "vllm@0.11.0", _alert("KVFull", "llamacpp:kv_cache_usage_ratio > 0.9"))
    assert _rule(report, "KVFull").expr_after == "vllm:kv_cache_usage_perc > 0.9"


def test_an_engine_specific_series_is_untranslatable_to_another_engine(tmp_path: Path) -> None:
    _, report = _run(tmp_path, "vllm@0.6.3", "sglang@0.5.5", _alert("Swap", "vllm:num_requests_swapped > 0"))
    assert _rule(report, "Swap").status == "untranslated"
    assert any(f.kind == "engine_specific" and f.severity == "error" for f in report.findings)


def test_an_engine_specific_series_stays_valid_on_the_same_engine_while_served(tmp_path: Path) -> None:
    _, report = _run(tmp_path, "sglang@0.5.3", "sglang@0.5.23", _alert("Retracting", "sglang:num_retracted_reqs > 0"))
    assert _rule(report, "Retracting").status == "unchanged" and not report.errors


def test_a_partly_translated_expression_is_partial_with_the_series_left(tmp_path: Path) -> None:
    _, report = _run(
        tmp_path,
        "vllm@0.6.3",
        "sglang@0.5.5",
        _alert("Mixed", "vllm:gpu_cache_usage_perc > 0.9 or vllm:num_requests_swapped > 0"),
    )
    rule = _rule(report, "Mixed")
    assert rule.status == "partial" and rule.series_left == ["vllm:num_requests_swapped"]
    assert rule.expr_after == "sglang:token_usage > 0.9 or vllm:num_requests_swapped > 0"


def test_an_intent_the_target_release_lacks_is_untranslatable(tmp_path: Path) -> None:
    _, report = _run(tmp_path, "vllm@0.6.3", "vllm@0.11.0", _alert("Hit", "vllm:gpu_prefix_cache_hit_rate < 0.2"))
    assert _rule(report, "Hit").status == "untranslated"
    assert any("vllm 0.11.0 has no prefix_cache_hit_rate metric" in f.detail for f in report.errors)


def test_another_engines_series_left_in_the_rules_is_dead(tmp_path: Path) -> None:
    _, report = _run(tmp_path, "vllm@0.11.0", "sglang@0.5.23", _alert("Odd", "tgi_queue_size > 5"))
    assert _rule(report, "Odd").status == "untranslated"
    assert any(f.kind == "dead_series" and "a tgi series" in f.detail for f in report.errors)


def test_a_target_release_older_than_any_read_is_unverified_not_served(tmp_path: Path) -> None:
    _, report = _run(tmp_path, "vllm@0.11.0", "tgi@1.4.5", _alert("Q", "vllm:num_requests_waiting > 5"))
    rule = _rule(report, "Q")
    assert rule.status == "unverified" and rule.series_unverified == ["tgi_queue_size"]
    assert not report.errors
    assert any(f.kind == "unverified" and "older than the oldest release read" in f.detail for f in report.findings)


def test_an_unstated_version_is_the_newest_read_and_said(tmp_path: Path) -> None:
    _, report = _run(tmp_path, "vllm@0.6.3", "sglang", _alert("Q", "vllm:num_requests_waiting > 5"))
    assert report.target_version == "0.5.23"
    assert report.target_note and "newest read, 0.5.23, is assumed" in report.target_note
    assert any("0.5.23, is assumed" in n for n in report.notes)


def test_a_source_series_its_own_release_did_not_serve_is_a_warning(tmp_path: Path) -> None:
    _, report = _run(tmp_path, "vllm@0.6.3", "vllm@0.11.0", _alert("KV", "vllm:kv_cache_usage_perc > 0.9"))
    assert any(f.kind == "source_series" and f.severity == "warning" for f in report.findings)


def test_the_files_own_recording_rules_are_not_engine_series(tmp_path: Path) -> None:
    _, report = _run(
        tmp_path,
        "vllm@0.6.3",
        "sglang@0.5.5",
        {"record": "vllm:waiting:max5m", "expr": "max_over_time(vllm:num_requests_waiting[5m])"},
        _alert("Q", "vllm:waiting:max5m > 5"),
    )
    assert _rule(report, "Q").status == "unchanged" and not report.errors


def test_adapter_mode_refuses_engine_specific_series(tmp_path: Path) -> None:
    _, report = _run(
        tmp_path,
        "vllm@0.6.3",
        "sglang@0.5.5",
        _alert("Swap", "vllm:num_requests_swapped > 0"),
        _alert("Q", "vllm:num_requests_waiting > 5"),
        mode="adapter",
    )
    assert _rule(report, "Swap").status == "untranslated" and _rule(report, "Q").status == "unchanged"


def test_engine_of_reads_the_profiles_prefixes() -> None:
    assert [engine_of(s) for s in ("vllm:x", "sglang:y", "tgi_z", "llamacpp:w", "trtllm_v", "up", "job:vllm:x")] == [
        "vllm",
        "sglang",
        "tgi",
        "llamacpp",
        "trtllm",
        None,
        None,
    ]


@pytest.mark.parametrize(
    ("ref", "message"),
    [("vllm@abc", "--to: 'abc' is not a version number"), ("vlm@0.6.3", "--to: unknown engine 'vlm'")],
)
def test_a_bad_engine_reference_is_bad_input_naming_the_option(ref: str, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        engine_release(ref, "--to")


def test_an_engine_release_without_release_data_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from switchover.engines import releases

    monkeypatch.setattr(releases, "view", lambda engine, version: None)
    side = engine_release("tgi@2.0.2", "--to")
    assert isinstance(side, EngineRelease) and side.serves("tgi_queue_size").status == "unknown"
    assert side.note == "no release data for tgi: the series its releases serve are not checked"


TARGETS = [
    "vllm@0.6.3",
    "vllm@0.8.5.post1",
    "vllm@0.11.0",
    "vllm",
    "sglang@0.4.3",
    "sglang@0.5.5",
    "sglang",
    "tgi@2.0.2",
    "tgi",
    "llamacpp@b3995",
    "llamacpp",
    "trtllm",
]
RULE_SETS = Path(__file__).with_name("rules")


def _served_everywhere(report: TranslationReport, target: EngineRelease, recorded: set[str]) -> list[str]:
    """Series a translated/unchanged rule reads that the target does not serve (computed from the output alone)."""
    from switchover.alerts.promql import parse

    bad = []
    for r in report.rules:
        if r.status not in ("translated", "unchanged"):
            continue
        for sel in parse(r.expr_after).selectors:
            if (
                sel.name
                and sel.name not in recorded
                and engine_of(sel.name) is not None
                and target.serves(sel.name).status != "present"
            ):
                bad.append(f"{r.rule}: {sel.name}")
    return bad


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", sorted(p.stem for p in RULE_SETS.glob("*.yaml")))
def test_no_rule_called_translated_watches_a_series_the_target_does_not_serve(
    source: str, target: str, tmp_path: Path
) -> None:
    import subprocess

    from switchover.alerts.rules import dump_rules, recorded_names
    from switchover.testing import require_tool

    path = RULE_SETS / f"{source}.yaml"
    src, dst = engine_release(source, "--from"), engine_release(target, "--to")
    if (src.engine, src.version) == (dst.engine, dst.version):
        pytest.skip("the same release on both sides")
    data, report = translate_rules(path, src, dst)
    assert _served_everywhere(report, dst, recorded_names(yaml.safe_load(path.read_text()))) == []
    out = tmp_path / "out.yaml"
    out.write_text(dump_rules(data))
    checked = subprocess.run(
        [require_tool("promtool", hint="Debian package prometheus"), "check", "rules", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for r in report.rules:  # a rule left with a dead series is an error: the command fails
        if r.series_left:
            assert r.status in ("partial", "untranslated")
            assert any(f.rule == r.rule and f.severity == "error" for f in report.findings)


def test_adapter_mode_checks_the_names_the_adapter_command_really_serves(tmp_path: Path) -> None:
    # `switchover metrics-adapter` takes no release: it serves each intent under the newest spelling
    _, report = _run(
        tmp_path, "vllm@0.6.3", "sglang@0.5.5", _alert("KV", "vllm:gpu_cache_usage_perc > 0.9"), mode="adapter"
    )
    assert _rule(report, "KV").status == "untranslated"
    assert any("serves kv_usage as vllm:kv_cache_usage_perc" in f.detail for f in report.errors)


def test_the_cli_fails_on_a_dead_series_and_keep_unknown_lets_it_through(tmp_path: Path, capsys) -> None:
    import orjson

    rules = _file(tmp_path, _alert("KVFull", "llamacpp:kv_cache_usage_ratio > 0.9"))
    code, out, _ = run_alerts(
        capsys,
        "translate",
        str(rules),
        "--from",
        "llamacpp@b3995",
        "--to",
        "llamacpp==b11434",
        "--json",
        "-o",
        str(tmp_path / "out.yaml"),
    )
    report = orjson.loads(out)
    assert code == 1 and report["target_version"] == "b11434" and report["source_version"] == "b3995"
    assert report["rules"][0]["series_left"] == ["llamacpp:kv_cache_usage_ratio"]
    code, _, err = run_alerts(
        capsys, "translate", str(rules), "--from", "llamacpp@b3995", "--to", "llamacpp", "--keep-unknown"
    )
    assert code == 0 and "still reads: llamacpp:kv_cache_usage_ratio" in err
    assert "no llamacpp version given: the newest read, b11434, is assumed" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--from", "vllm@0.6.3", "--to", "vllm==0.6.3"), "--from and --to are both vllm 0.6.3"),
        (("--from", "vllm@zz", "--to", "sglang"), "--from: 'zz' is not a version number"),
    ],
)
def test_the_same_release_twice_or_a_bad_version_is_exit_2(
    tmp_path: Path, capsys, args: tuple[str, ...], message: str
) -> None:
    code, _, err = run_alerts(
        capsys, "translate", str(_file(tmp_path, _alert("Q", "vllm:num_requests_waiting > 1"))), *args
    )
    assert code == 2 and message in err and "Traceback" not in err


def test_a_series_an_engine_served_without_its_prefix_is_still_its_own(
    monkeypatch: pytest.MonkeyPatch, synthetic_releases
) -> None:
    from switchover.alerts import release
    from switchover.engines import releases as packaged
    from switchover.engines.extract import Extracted, Snapshot, compact
    from switchover.engines.releases import ParserRules

    metrics = {"e2e_request_latency_seconds": {"path": "c.py", "type": "histogram"}}
    early = compact(
        "trtllm",
        [Snapshot("1.1.0", "c", "test", None, Extracted(parser=ParserRules(source="t"), metrics=metrics))],
        source_url="https://example.invalid/{ref}/{path}",
        generated_by="test",
    )
    monkeypatch.setattr(packaged, "load_releases", lambda engine: early if engine == "trtllm" else None)
    release._unprefixed.cache_clear()
    try:
        assert engine_of("e2e_request_latency_seconds_bucket") == "trtllm"
        assert engine_of("node_cpu_seconds_total") is None
    finally:
        release._unprefixed.cache_clear()
