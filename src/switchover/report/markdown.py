"""report.md: the verdicts in a few lines, for a pull request description or comment."""

from __future__ import annotations

from switchover.evidence.check import CheckReport
from switchover.redaction import redact

_MARK = {"go": "✅ go", "no-go": "❌ no-go", "warn": "⚠️ warn", "not-run": "⏺ not run"}
_OVERALL = {"go": "✅ GO", "no-go": "❌ NO-GO", "incomplete": "⏺ INCOMPLETE"}


def _cell(text: str, n: int = 220) -> str:
    t = text.replace("|", "\\|").replace("\n", " ")
    return t if len(t) <= n else t[: n - 1] + "…"


def render_markdown(report: CheckReport, html_name: str = "report.html") -> str:
    """The verdict table as Markdown; secrets in the report's text are masked (as in check.json)."""
    c = report.counts()
    lines = [
        f"## switchover check: {_OVERALL[report.overall]}",
        "",
        f"{report.overall_reason}.",
        f"go {c['go']} · warn {c['warn']} · no-go {c['no-go']} · not run {c['not-run']}"
        + (f" · {report.total_s:.0f} s" if report.total_s is not None else ""),
        "",
        "| | endpoint | engine | model |",
        "|---|---|---|---|",
    ]
    lines += [f"| {e.role} | {e.url} | {e.engine} | {e.model or ''} |" for e in report.endpoints]
    lines += ["", "| verdict | item | explained in | why |", "|---|---|---|---|"]
    for i in report.items:
        why = " | ".join(s for s in i.reason.split(" | ") if not s.startswith("ok:")) or i.reason
        lines.append(f"| {_MARK[i.verdict]} | {_cell(i.title, 60)} | [{i.id}]({i.doc}) | {_cell(why)} |")
    skipped = [p for p in report.parts if p.status != "ran"]
    if skipped:
        lines += ["", "Parts not run: " + "; ".join(f"{p.part} ({p.status}: {p.reason})" for p in skipped)]
    where = f"{report.run_dir}/{html_name}" if report.run_dir else html_name
    lines += ["", f"Full report with the evidence behind every verdict: `{where}`", ""]
    return redact("\n".join(lines))
