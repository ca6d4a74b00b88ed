"""issue 7: the report renders in headless Chromium, logs nothing to the console, and the verdict is visible."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchover.check.runner import build_report, write_outputs
from tests.check import builders as b
from tests.report.chromium import chromium_or_skip, load

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rd = b.write_run(tmp_path_factory.mktemp("runs"), b.full_evidence(grace=b.grace(configured=[30.0])))
    return write_outputs(rd, build_report(rd))["html"]


def test_report_renders_with_plots_and_no_console_messages(report_html: Path) -> None:
    page = load(chromium_or_skip(), report_html)
    assert page.returncode == 0
    assert page.console == [], f"console messages: {page.console}"
    assert "Verdict: NO-GO" in page.dom
    assert page.dom.count('class="plot-container plotly"') >= 2, "plotly did not draw the plots"
    assert 'class="badge v-no-go"' in page.dom


def test_report_screenshot_is_written(report_html: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    page = load(chromium_or_skip(), report_html, screenshot=shot)
    assert page.returncode == 0 and shot.exists() and shot.stat().st_size > 20_000


def test_the_console_check_catches_a_script_error(tmp_path: Path) -> None:
    """The harness must be able to fail: a page that throws is reported."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><p>Verdict: GO</p><script>console.error('x'); notDefined();</script></body></html>")
    page = load(chromium_or_skip(), bad)
    assert any("notDefined" in line for line in page.console), page.console
