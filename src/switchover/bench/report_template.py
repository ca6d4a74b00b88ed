# ruff: noqa: E501
"""The jinja2 template of a bench run's report.html (kept in Python so it ships without package-data configuration).
Figures are plotly HTML fragments; every other value is escaped by the builder."""

BENCH_TEMPLATE = r"""
{%- macro table(head, rows) -%}
<table><thead><tr>{% for h in head %}<th>{{ h }}</th>{% endfor %}</tr></thead><tbody>
{%- for r in rows %}<tr>{% for c in r %}<td>{{ c }}</td>{% endfor %}</tr>{% endfor -%}
</tbody></table>
{%- endmacro -%}
<!doctype html><html><head><meta charset=utf-8><title>switchover bench {{ name }}</title><style>{{ style }}</style></head><body>
<h1>switchover bench: {{ name }}</h1>
{%- if ended_early %}<p class=warn>Run ended early: {{ ended_early }}. Everything measured until then is shown.</p>{% endif -%}
{{ table(endpoints.head, endpoints.rows) }}
{%- if cal %}<p>Client ceiling: {{ cal.req_per_s }} req/s, {{ cal.chunks_per_s }} chunks/s ({{ cal.us_per_chunk }} µs/chunk) at c={{ cal.concurrency }}. Steps above 70% of it are flagged.</p>
{%- else %}<p class=warn>No client calibration: headroom unknown.</p>{% endif -%}
{%- if stamps %}<p>Chunk timestamps: {{ stamps|join("; ") }}.</p>{% endif -%}
{%- for fig in figures %}{{ fig|safe }}{% endfor -%}
{%- if soak %}<h2>Soak: {{ soak.title }}</h2>
{%- if soak.figure %}{{ soak.figure|safe }}{% endif -%}
{%- if soak.drift %}<h3>Drift: first vs last full window</h3>{{ table(soak.drift.head, soak.drift.rows) }}{% endif -%}
<h3>Windows</h3>{{ table(soak.windows.head, soak.windows.rows) }}
{%- endif -%}
{%- if knees.rows %}<h2>Knee</h2>{{ table(knees.head, knees.rows) }}{% endif -%}
<h2>Steps</h2>{{ table(steps.head, steps.rows) }}
{%- if ab %}<h2>New vs old</h2>{{ table(ab.head, ab.rows) }}{% endif -%}
{%- if checks %}<h2>Checks</h2>{{ table(checks.head, checks.rows) }}{% endif -%}
{%- if notes %}<h2>Notes</h2><ul>{% for n in notes %}<li>{{ n }}</li>{% endfor %}</ul>{% endif -%}
</body></html>"""
