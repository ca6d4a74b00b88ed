"""The one HTML builder: every HTML page switchover writes (check report.html, bench report.html) is a jinja2
template in this package, rendered here with autoescaping on, so page code passes values, never markup strings
(the few deliberate bits of markup are `markupsafe.Markup`, and plotly figures arrive as trusted HTML)."""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2

from switchover.report.bench_template import BENCH_TEMPLATE
from switchover.report.template import TEMPLATE

TEMPLATES = {"check.html": TEMPLATE, "bench.html": BENCH_TEMPLATE}


@cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.DictLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined)


def render_page(template: str, /, **context: Any) -> str:
    """One page from its template (`check.html`, `bench.html`) and the values it shows."""
    return _env().get_template(template).render(**context)
