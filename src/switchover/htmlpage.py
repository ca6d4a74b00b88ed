"""The one HTML builder: every HTML page switchover writes (check report.html, bench report.html) is a jinja2
template rendered here with autoescaping on, so page code passes values, never markup strings (the few deliberate
bits of markup are `markupsafe.Markup`, and plotly figures arrive as trusted HTML). Each verb keeps its page's
template (report/template.py, bench/report_template.py) and hands it here."""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2

_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)


@cache
def _template(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


def render_page(template: str, /, **context: Any) -> str:
    """One page from its template's text and the values it shows."""
    return _template(template).render(**context)
