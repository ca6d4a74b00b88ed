"""The review page: one HTML file and one script, no outside assets. Every text from the database is put on the
page with textContent (never as HTML), and every API call carries the session token from the page's meta tag."""

from __future__ import annotations

import html

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="review-token" content="{token}">
<title>switchover review</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 1.2em; color: #222; }}
h1 {{ font-size: 1.2em; }} .muted {{ color: #777; }}
.cols {{ display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }}
pre {{ white-space: pre-wrap; background: #f6f6f6; padding: .6em; border-radius: 4px; max-height: 28em;
       overflow: auto; margin: .2em 0; }}
button {{ font-size: 1em; margin-right: .4em; padding: .3em .9em; }}
table {{ border-collapse: collapse; margin-top: .6em; }} td, th {{ border: 1px solid #ddd; padding: .2em .6em; }}
#status {{ margin: .5em 0; min-height: 1.2em; }}
</style></head>
<body>
<h1>switchover review <span class="muted">{source}</span></h1>
<p class="muted">Is the <b>new</b> engine's answer better than, the same as, or worse than the <b>old</b> one's, or
broken? Texts were redacted before they were stored.</p>
<label>task type <select id="type"><option value="">all</option></select></label>
<label>your name <input id="rater" size="12"></label>
<div id="pair" hidden>
  <p><b>#<span id="pid"></span></b> <span id="ptype" class="muted"></span> <span id="pmodel" class="muted"></span></p>
  <b>prompt</b><pre id="prompt"></pre>
  <div class="cols">
    <div><b>old</b> <span id="oldmeta" class="muted"></span><pre id="old"></pre></div>
    <div><b>new</b> <span id="newmeta" class="muted"></span><pre id="new"></pre></div>
  </div>
  <p><textarea id="note" rows="2" cols="80" placeholder="note (optional)"></textarea></p>
  <p><button data-rating="better">better</button><button data-rating="same">same</button>
     <button data-rating="worse">worse</button><button data-rating="broken">broken</button>
     <button id="skip">skip</button></p>
</div>
<p id="none" hidden>Nothing left to rate<span id="nonetype"></span>.</p>
<div id="status"></div>
<h2 style="font-size:1.05em">Summary <span class="muted">(worse-or-broken share, 95 % Wilson interval)</span></h2>
<table id="summary"><thead><tr><th>task type</th><th>pairs</th><th>rated</th><th>better</th><th>same</th>
<th>worse</th><th>broken</th><th>worse or broken</th></tr></thead><tbody></tbody></table>
<script src="/app.js"></script>
</body></html>
"""

SCRIPT = r"""
"use strict";
const token = document.querySelector('meta[name="review-token"]').content;
let current = null, after = 0;
const $ = (id) => document.getElementById(id);
async function api(path, body) {
  const opts = {headers: {"X-Review-Token": token}};
  if (body !== undefined) { opts.method = "POST"; opts.body = JSON.stringify(body);
                            opts.headers["Content-Type"] = "application/json"; }
  const r = await fetch(path, opts);
  const data = await r.json();
  if (!r.ok) throw new Error((data.error && data.error.message) || ("HTTP " + r.status));
  return data;
}
function pct(x) { return x === null || x === undefined ? "-" : (100 * x).toFixed(0) + " %"; }
function showSummary(s) {
  const body = $("summary").tBodies[0];
  body.textContent = "";
  const sel = $("type"), chosen = sel.value;
  const known = new Set(Array.from(sel.options).map(o => o.value));
  for (const t of [...s.types, s.total]) {
    const tr = body.insertRow();
    const share = t.bad_share === null ? "-"
      : pct(t.bad_share) + " [" + pct(t.bad_low) + ", " + pct(t.bad_high) + "]";
    const cells = [t.task_type, t.pairs, t.rated, t.counts.better, t.counts.same, t.counts.worse, t.counts.broken,
                   share];
    for (const c of cells) tr.insertCell().textContent = String(c);
    tr.dataset.type = t.task_type;
    if (t !== s.total && !known.has(t.task_type)) {
      const o = document.createElement("option"); o.value = o.textContent = t.task_type; sel.appendChild(o);
    }
  }
  sel.value = chosen;
}
function meta(status, finish, error) {
  return "status " + (status === null ? "-" : status) + (finish ? ", " + finish : "") + (error ? ", " + error : "");
}
async function next() {
  const type = $("type").value;
  const data = await api("/api/next?after=" + after + (type ? "&type=" + encodeURIComponent(type) : ""));
  current = data.pair;
  showSummary(data.summary);
  $("pair").hidden = !current; $("none").hidden = !!current;
  $("nonetype").textContent = type ? " for " + type : "";
  if (!current) return;
  $("pid").textContent = current.id; $("ptype").textContent = current.task_type;
  $("pmodel").textContent = current.model || "";
  $("prompt").textContent = current.prompt; $("old").textContent = current.old_answer;
  $("new").textContent = current.new_answer; $("note").value = "";
  $("oldmeta").textContent = meta(current.old_status, current.old_finish_reason, current.old_error);
  $("newmeta").textContent = meta(current.new_status, current.new_finish_reason, current.new_error);
}
async function rate(rating) {
  if (!current) return;
  const data = await api("/api/rate", {pair_id: current.id, rating: rating, note: $("note").value,
                                        rater: $("rater").value});
  $("status").textContent = "#" + current.id + " rated " + rating;
  showSummary(data.summary);
  await next();
}
for (const b of document.querySelectorAll("button[data-rating]"))
  b.addEventListener("click", () => rate(b.dataset.rating).catch(e => $("status").textContent = e.message));
$("skip").addEventListener("click", () => { after = current ? current.id : after; next(); });
$("type").addEventListener("change", () => { after = 0; next(); });
next().catch(e => $("status").textContent = e.message);
"""


def page(token: str, source: str) -> bytes:
    """The page with its session token (HTML-escaped, as is the database path shown in the title)."""
    return PAGE.format(token=html.escape(token, quote=True), source=html.escape(source)).encode("utf-8")
