"""report: one page per check run — a go/no-go verdict per checklist item with its evidence (HTML, Markdown)."""

from switchover.evidence.check import CheckItem, CheckReport, Citation, Figure, Link, Overall, PartRun, Plot, Verdict

__all__ = ["CheckItem", "CheckReport", "Citation", "Figure", "Link", "Overall", "PartRun", "Plot", "Verdict"]
