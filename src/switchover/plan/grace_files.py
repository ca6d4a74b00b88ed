"""What `plan grace` reads from disk: the worst p99s of a bench run's summary.json, and the deploy YAML files
(Kubernetes manifests, compose files) whose settings plan/grace.py judges; I/O at the edge of the arithmetic."""

from __future__ import annotations

from pathlib import Path

from switchover.errors import BadInput
from switchover.evidence.bench import SUMMARY_MAX_BYTES
from switchover.plan.grace import Finding, GraceNeed, GraceReport, deploy_findings, latency_from_steps, timeout_warning
from switchover.textfile import load_json, read_text
from switchover.yamlfile import checked_nodes

MAX_FILES = 2000
SCAN_MAX_BYTES = 4 << 20  # per deploy file


def latency_from_bench(run_dir: Path, endpoint: str | None = None) -> tuple[float, float | None, str]:
    """Worst TPOT p99 and TTFT p99 (ms) over the steps of a bench run's summary.json; TTFT None when no step
    measured it (the source says so)."""
    path = run_dir / "summary.json" if run_dir.is_dir() else run_dir
    if not path.exists():
        raise BadInput(f"{path}: no such file", hint="pass a bench run directory (runs/<id>)")
    data = load_json(path, max_bytes=SUMMARY_MAX_BYTES, what="bench summary.json")
    steps = data.get("steps", []) if isinstance(data, dict) else []
    return latency_from_steps(steps, f"bench {path.parent.name}", str(path), endpoint)


def scan_file(path: Path, need: GraceNeed, display: str) -> list[Finding]:
    """Grace periods, preStop hooks and timeouts in one YAML file (all documents); BadInput when it cannot be
    read as YAML (line and column), so no setting is skipped unsaid."""
    text = read_text(path, max_bytes=SCAN_MAX_BYTES, what="deploy YAML file")
    return deploy_findings(list(checked_nodes(text, display, max_bytes=SCAN_MAX_BYTES)), need, display)


def scan(root: Path, need: GraceNeed, skipped: list[str] | None = None) -> list[Finding]:
    """Every *.yaml / *.yml under `root` (or the one file), at most MAX_FILES, in path order. A single file that
    is not YAML is bad input; in a folder (Helm templates are not YAML) it is listed in `skipped` with why."""
    if not root.exists():
        raise BadInput(f"{root}: no such file or directory")
    if root.is_file():
        return sorted(scan_file(root, need, str(root)), key=lambda f: f.line)
    files = sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    out: list[Finding] = []
    for path in files[:MAX_FILES]:
        try:
            out.extend(sorted(scan_file(path, need, str(path.relative_to(root))), key=lambda f: f.line))
        except BadInput as exc:
            if skipped is None:
                raise
            skipped.append(exc.message)
    if len(files) > MAX_FILES and skipped is not None:
        skipped.append(f"{len(files) - MAX_FILES} more YAML files under {root} not read (limit {MAX_FILES})")
    return out


def grace_report(need: GraceNeed, scan_root: Path | None = None, client_timeout_s: float | None = None) -> GraceReport:
    """The need, the scan findings, and the client-timeout check."""
    report = GraceReport(need=need, client_timeout_s=client_timeout_s)
    if scan_root is not None:
        report.findings = scan(scan_root, need, report.skipped)
    if client_timeout_s is not None:
        warning = timeout_warning(need, client_timeout_s)
        if warning:
            report.warnings.append(warning)
    return report
