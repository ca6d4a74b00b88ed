"""report.html: one self-contained file (plotly.js inlined, no network), a verdict per checklist item."""

from __future__ import annotations

import time

from plotly.offline import get_plotlyjs

from switchover import __version__
from switchover.evidence.check import CheckReport
from switchover.htmlpage import render_page
from switchover.redaction import redact_data
from switchover.report.template import TEMPLATE

AREA_TITLES = {
    "engine": "Engine switch: six impact areas",
    "model": "Model switch: weights, tokenizer, chat template, sampling defaults",
    "drain": "In-flight requests: drain grace and client timeouts",
    "rollback": "The way back: rollback prerequisites and drill",
}


def render_html(report: CheckReport) -> str:
    """The whole page as one string; secrets in the report's text are masked (as in check.json)."""
    report = CheckReport.model_validate(redact_data(report.model_dump(mode="json")))
    areas: dict[str, list] = {}
    for i in report.items:
        areas.setdefault(i.area, []).append(i)
    return render_page(
        TEMPLATE,
        r=report,
        counts=report.counts(),
        created=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(report.created_wall)),
        areas=list(areas.items()),
        area_titles=AREA_TITLES,
        plot_ids={p.id for p in report.plots},
        plot_titles={p.id: p.title for p in report.plots},
        figures={p.id: p.figure for p in report.plots},
        plotly_js=get_plotlyjs(),
        version=__version__,
    )
