"""report.html / report.md / check.json from a run directory: verdicts, evidence, offline, rebuildable."""

from __future__ import annotations

import re
from pathlib import Path

from switchover.check.runner import build_report, write_outputs
from switchover.evidence.check import CheckItem, overall_verdict
from switchover.report.html import render_html
from switchover.report.markdown import render_markdown
from tests.check import builders as b


def _item(verdict: str, required: bool = True, waived: str | None = None) -> CheckItem:
    return CheckItem(
        id=f"x.{verdict}",
        area="engine",
        title="t",
        verdict=verdict,
        rule="r",
        reason="why",
        required=required,
        waived=waived,
    )  # type: ignore[arg-type]


def test_overall_verdict_table() -> None:
    assert overall_verdict([_item("go"), _item("warn")])[0] == "go"
    assert overall_verdict([_item("go"), _item("no-go"), _item("not-run")])[0] == "no-go"
    assert overall_verdict([_item("go"), _item("not-run")])[0] == "incomplete"
    assert overall_verdict([_item("go"), _item("not-run", required=False)])[0] == "go"
    assert overall_verdict([_item("go"), _item("not-run", waived="no GPU here")])[0] == "go"


def test_full_evidence_round_trips_through_the_run_directory_to_go(tmp_path: Path) -> None:
    rd = b.write_run(tmp_path, b.full_evidence())
    report = build_report(rd)
    # weights: verify identical -> go even without diff-model
    assert next(i for i in report.items if i.id == "model.weights").verdict == "go"
    assert report.overall == "go", report.overall_reason


def test_a_no_go_item_makes_the_report_no_go_and_shows_its_figures(tmp_path: Path) -> None:
    rd = b.write_run(tmp_path, b.full_evidence(grace=b.grace(configured=[30.0])))
    report = build_report(rd)
    assert report.overall == "no-go"
    html = render_html(report)
    assert "Verdict: NO-GO" in html
    assert "30 s" in html and "77" in html  # the configured grace and the required one are both shown


def test_an_unreadable_part_file_is_a_failed_part_not_a_pass(tmp_path: Path) -> None:
    rd = b.write_run(tmp_path, b.full_evidence())
    rd.file("probe.json").write_text('{"not": "a probe report"}')
    report = build_report(rd)
    assert next(p for p in report.parts if p.part == "probe").status == "failed"
    assert next(i for i in report.items if i.id == "engine.defaults").verdict == "not-run"
    assert report.overall == "incomplete"


def test_html_is_one_offline_file_with_plots_inlined(tmp_path: Path) -> None:
    rd = b.write_run(tmp_path, b.full_evidence())
    out = write_outputs(rd, build_report(rd))
    html = out["html"].read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]+src=", html), "no external scripts"
    assert not re.search(r"<link[^>]+href=[\"']https?:", html), "no external stylesheets"
    assert "Plotly.newPlot" in html and len(html) > 1_000_000  # plotly.js itself is inlined
    assert 'id="plotdiv-bench_latency"' in html and 'id="plotdiv-grace"' in html
    assert 'id="engine.kv_cache"' in html and "docs/checklist.md#engine.kv_cache" in html
    assert '<a href="https://github.com/vllm-project/vllm/blob/v0.34.0/vllm/engine/arg_utils.py">' in html


def test_html_escapes_text_from_the_engines(tmp_path: Path) -> None:
    res = b.probe_result("stop.count", "stop", "differs", old="<script>alert(1)</script>")
    rd = b.write_run(tmp_path, b.full_evidence(probe=b.probe(res)))
    html = render_html(build_report(rd))
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)" in html


def test_markdown_summary_lists_every_item_with_its_verdict(tmp_path: Path) -> None:
    rd = b.write_run(tmp_path, b.full_evidence(grace=b.grace(configured=[30.0])))
    report = build_report(rd)
    md = render_markdown(report)
    assert md.startswith("## switchover check: ❌ NO-GO")
    for i in report.items:
        assert f"[{i.id}](docs/checklist.md#{i.id})" in md
    assert "report.html" in md


def test_a_missing_figure_is_shown_as_missing_with_the_reason(tmp_path: Path) -> None:
    rd = b.write_run(tmp_path, b.full_evidence(grace=b.grace(tpot=None, configured=[120.0])))
    html = render_html(build_report(rd))
    assert "missing (no TPOT)" in html


def test_secrets_in_report_text_are_masked_in_html_and_markdown(tmp_path: Path) -> None:
    rd = b.write_run(tmp_path, b.full_evidence(grace=b.grace(configured=[30.0])))
    report = build_report(rd)
    leak = "upstream said 401 for http://admin:hunter22@h/v1 with Authorization: Bearer sk-PLANTEDsecret0123"
    report.overall_reason = leak
    report.items[0].reason = leak
    html, md = render_html(report), render_markdown(report)
    for text in (html, md):
        assert "hunter22" not in text and "PLANTEDsecret" not in text
        assert "***@h/v1" in text
    assert report.overall_reason == leak  # the caller's report is left as it was
