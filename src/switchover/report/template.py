# ruff: noqa: E501
"""The jinja2 template of report.html (kept in Python so it ships without package-data configuration)."""

TEMPLATE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>switchover check — {{ r.overall|upper }} — {{ r.name }}</title>
<style>
 body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
        max-width: 1200px; padding: 1rem 1.5rem; color: #1b1b1b; }
 h1 { font-size: 1.5rem; margin: .2rem 0; }
 .overall { padding: 1rem 1.2rem; border-radius: 8px; margin: 1rem 0; color: #fff; }
 .overall .big { font-size: 2rem; font-weight: 700; letter-spacing: .04em; }
 .ov-go { background: #1e7d32; } .ov-no-go { background: #b71c1c; } .ov-incomplete { background: #8d6e00; }
 .badge { display: inline-block; min-width: 4.5rem; text-align: center; padding: .15rem .5rem; border-radius: 4px;
          font-weight: 700; color: #fff; font-size: .85rem; }
 .v-go { background: #2e7d32; } .v-no-go { background: #c62828; } .v-warn { background: #ef6c00; }
 .v-not-run { background: #757575; }
 table { border-collapse: collapse; width: 100%; margin: .4rem 0; font-size: .9rem; }
 th, td { border: 1px solid #ddd; padding: .3rem .5rem; text-align: left; vertical-align: top; }
 th { background: #f5f5f5; }
 .item { border: 1px solid #ddd; border-left: 6px solid #999; border-radius: 6px; padding: .6rem 1rem; margin: .8rem 0; }
 .item.go { border-left-color: #2e7d32; } .item.no-go { border-left-color: #c62828; }
 .item.warn { border-left-color: #ef6c00; } .item.not-run { border-left-color: #757575; }
 .item h3 { margin: .2rem 0 .4rem 0; font-size: 1.1rem; }
 .src { color: #555; font-size: .85rem; }
 .rule { font-size: .85rem; color: #333; } .reason li { margin: .15rem 0; }
 .missing { color: #9e6a00; font-style: italic; }
 .nogo { color: #b71c1c; font-weight: 600; } .warnline { color: #b35900; }
 .plot { width: 100%; min-height: 340px; }
 code { background: #f3f3f3; padding: 0 .2rem; }
 nav a { margin-right: .8rem; }
</style>
<script>{{ plotly_js|safe }}</script>
</head>
<body>
<h1>switchover check: {{ r.name }}</h1>
<div class="src">run directory <code>{{ r.run_dir or "(not saved)" }}</code>{% if r.config_file %} · config
 <code>{{ r.config_file }}</code>{% endif %} · {{ created }}{% if r.total_s is not none %} · took
 {{ "%.0f"|format(r.total_s) }} s{% endif %}</div>

<div id="verdict" class="overall ov-{{ r.overall }}">
 <div class="big">Verdict: {{ r.overall|upper }}</div>
 <div>{{ r.overall_reason }}</div>
 <div>go {{ counts["go"] }} · warn {{ counts["warn"] }} · no-go {{ counts["no-go"] }} · not run {{ counts["not-run"] }}
  — rule: no-go if any item is no-go; incomplete if a required item did not run (and is not waived); else go.</div>
</div>

<h2>Endpoints</h2>
<table><tr><th>role</th><th>url</th><th>engine</th><th>model</th></tr>
{% for e in r.endpoints %}<tr><td>{{ e.role }}</td><td>{{ e.url }}</td><td>{{ e.engine }}</td>
<td>{{ e.model or "(first listed)" }}</td></tr>{% endfor %}
</table>

<h2>Checklist</h2>
<p class="src">Each item is explained (what it checks, why it matters, how it is measured) in switchover's
 <code>docs/checklist.md</code>, under the item's id.</p>
<table><tr><th>verdict</th><th>item</th><th>explained in</th><th>required</th></tr>
{% for i in r.items %}<tr><td><span class="badge v-{{ i.verdict }}">{{ i.verdict|upper }}</span></td>
<td><a href="#{{ i.id }}">{{ i.title }}</a></td><td><code>{{ i.doc }}</code></td>
<td>{{ "yes" if i.required else "no" }}{% if i.waived %} (waived){% endif %}</td></tr>{% endfor %}
</table>

{% for area, items in areas %}
<h2>{{ area_titles.get(area, area) }}</h2>
{% for i in items %}
<div class="item {{ i.verdict }}" id="{{ i.id }}">
 <h3><span class="badge v-{{ i.verdict }}">{{ i.verdict|upper }}</span> {{ i.title }}</h3>
 <div class="src">{{ i.id }} · explained in <code>{{ i.doc }}</code>{% if not i.required %} · optional{% endif %}</div>
 {% if i.sources %}<div class="src">sources: {% for c in i.sources %}{% if c.url.startswith("https://") %}<a href="{{ c.url }}">{{ c.text }}</a>{% else %}{{ c.text }} (<code>{{ c.url }}</code>){% endif %}{{ " · " if not loop.last }}{% endfor %}</div>{% endif %}
 <div class="rule"><b>Rule:</b> {{ i.rule }}</div>
 {% if i.waived %}<div class="missing">waived: {{ i.waived }}</div>{% endif %}
 <ul class="reason">
 {% for line in i.reason.split(" | ") %}
  <li class="{{ 'nogo' if line.startswith('NO-GO') else ('warnline' if line.startswith('WARN') else ('missing' if line.startswith('not measured') or line == 'nothing measured' else '')) }}">{{ line }}</li>
 {% endfor %}
 </ul>
 {% if i.evidence %}
 <table><tr><th>evidence</th><th>value</th></tr>
 {% for f in i.evidence %}<tr><td>{{ f.name }}</td>
  <td class="{{ 'missing' if f.value is none else '' }}">{{ f.text() }}</td></tr>{% endfor %}
 </table>
 {% endif %}
 {% if i.links %}<div class="src">raw data: {% for l in i.links %}<a href="{{ l.path }}">{{ l.label }}</a>{{ " · " if not loop.last }}{% endfor %}</div>{% endif %}
 {% for pid in i.plots %}{% if pid in plot_ids %}<div class="src">plot: <a href="#plot-{{ pid }}">{{ plot_titles[pid] }}</a></div>{% endif %}{% endfor %}
</div>
{% endfor %}
{% endfor %}

{% if r.plots %}
<h2>Plots</h2>
{% for p in r.plots %}
<h3 id="plot-{{ p.id }}">{{ p.title }}</h3>
<div class="plot" id="plotdiv-{{ p.id }}"></div>
{% endfor %}
<script>
(function () {
  var figs = {{ figures|tojson }};
  for (var id in figs) {
    var el = document.getElementById("plotdiv-" + id);
    if (el && window.Plotly) { Plotly.newPlot(el, figs[id].data || [], figs[id].layout || {}, {responsive: true, displaylogo: false}); }
  }
})();
</script>
{% endif %}

<h2>Parts of the pre-flight</h2>
<table><tr><th>part</th><th>status</th><th>seconds</th><th>reason</th><th>files</th></tr>
{% for p in r.parts %}<tr><td>{{ p.part }}</td><td>{{ p.status }}</td>
<td>{{ "%.1f"|format(p.seconds) if p.seconds is not none else "" }}</td><td>{{ p.reason or "" }}</td>
<td>{% for f in p.files %}<a href="{{ f }}">{{ f }}</a> {% endfor %}</td></tr>{% endfor %}
</table>
{% if r.notes %}<h2>Notes</h2><ul>{% for n in r.notes %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}
<p class="src">Generated by switchover {{ version }}. Rebuild with <code>switchover report {{ r.run_dir or "RUN_DIR" }}</code>.</p>
</body>
</html>
"""
