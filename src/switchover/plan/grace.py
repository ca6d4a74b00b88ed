"""Drain grace and timeouts: how long the longest generation takes, and which deploy files stop or time out
sooner (docs/plan.md, Grace: max_tokens x TPOT p99, plus TTFT and a margin; 2000 x 35 ms = 70 s)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from switchover.errors import BadInput
from switchover.inputs import MAX_MS, MAX_SECONDS, MAX_TOKENS, number_problem, require
from switchover.textfile import load_json, read_text
from switchover.yamlfile import checked_nodes

K8S_DEFAULT_GRACE_S = 30.0  # Kubernetes PodSpec.terminationGracePeriodSeconds default
COMPOSE_DEFAULT_GRACE_S = 10.0  # docker compose stop_grace_period default
MAX_FILES = 2000
SCAN_MAX_BYTES = 4 << 20  # per deploy file
SUMMARY_MAX_BYTES = 64 << 20
_DURATION = re.compile(
    r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m(?!s))?\s*(?:(\d+(?:\.\d+)?)s)?\s*"
    r"(?:(\d+(?:\.\d+)?)ms)?\s*(?:(\d+(?:\.\d+)?)us)?\s*$"
)


class GraceNeed(BaseModel):
    """The time the longest request needs to finish once the drain starts."""

    max_tokens: int
    tpot_p99_ms: float
    ttft_p99_ms: float | None = Field(description="None when not measured: then not in required_s (source says)")
    margin_s: float
    generation_s: float = Field(description="max_tokens x TPOT p99")
    required_s: float = Field(description="TTFT p99 (when known) + generation + margin")
    source: str = Field(default="flags", description="where TPOT/TTFT came from")

    @property
    def server_s(self) -> float:
        """What the server needs for the longest request: generation plus TTFT p99 where it was measured."""
        return self.generation_s + (self.ttft_p99_ms or 0.0) / 1000


class Finding(BaseModel):
    """One setting in a deploy file compared with the need."""

    file: str
    line: int
    setting: str
    value_s: float | None
    required_s: float
    ok: bool
    message: str


class GraceReport(BaseModel):
    need: GraceNeed
    findings: list[Finding] = Field(default_factory=list)
    client_timeout_s: float | None = None
    warnings: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list, description="deploy files not read, with why")

    @property
    def ok(self) -> bool:
        """Every scanned setting covers the need; warnings (a short client timeout) are told, not failed."""
        return all(f.ok for f in self.findings)


def required_grace(
    max_tokens: int,
    tpot_p99_ms: float,
    ttft_p99_ms: float | None = None,
    margin_s: float | None = None,
    source: str = "flags",
) -> GraceNeed:
    """max_tokens x TPOT p99 + TTFT p99 + margin (default 10% of the generation, at least 5 s). A TTFT that was
    not measured (None) is left out and stays None in the result, never shown as 0."""
    require(max_tokens, "--max-tokens", lo=1, hi=MAX_TOKENS, integer=True)
    require(tpot_p99_ms, "--tpot-p99-ms", lo=0, lo_open=True, hi=MAX_MS)
    if ttft_p99_ms is not None:
        require(ttft_p99_ms, "--ttft-p99-ms", lo=0, hi=MAX_MS)
    if margin_s is not None:
        require(margin_s, "--margin-s", lo=0, hi=MAX_SECONDS)
    generation = max_tokens * tpot_p99_ms / 1000
    margin = max(5.0, 0.1 * generation) if margin_s is None else margin_s
    return GraceNeed(
        max_tokens=max_tokens,
        tpot_p99_ms=tpot_p99_ms,
        ttft_p99_ms=ttft_p99_ms,
        margin_s=margin,
        generation_s=round(generation, 3),
        required_s=round(generation + (ttft_p99_ms or 0.0) / 1000 + margin, 3),
        source=source,
    )


def latency_from_bench(run_dir: Path, endpoint: str | None = None) -> tuple[float, float | None, str]:
    """Worst TPOT p99 and TTFT p99 (ms) over the steps of a bench run's summary.json; TTFT None when no step
    measured it (the source says so)."""
    path = run_dir / "summary.json" if run_dir.is_dir() else run_dir
    if not path.exists():
        raise BadInput(f"{path}: no such file", hint="pass a bench run directory (runs/<id>)")
    data = load_json(path, max_bytes=SUMMARY_MAX_BYTES, what="bench summary.json")
    steps = data.get("steps", []) if isinstance(data, dict) else []
    return latency_from_steps(steps, f"bench {path.parent.name}", str(path), endpoint)


def latency_from_steps(
    steps: Any, where: str, label: str, endpoint: str | None = None
) -> tuple[float, float | None, str]:
    """Worst TPOT p99 and TTFT p99 (ms) over a bench report's steps (as summary.json holds them); `where` names
    the run in the source, `label` the file in errors."""
    tpots, ttfts = [], []
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict) or (endpoint and step.get("endpoint") != endpoint):
            continue
        tpot, ttft = _p99(step, "tpot_ms", label), _p99(step, "ttft_ms", label)
        if tpot is not None:
            tpots.append(tpot)
        if ttft is not None:
            ttfts.append(ttft)
    if not tpots:
        raise BadInput(f"{label}: no step with a TPOT p99" + (f" for endpoint {endpoint!r}" if endpoint else ""))
    src = f"{where}: worst step p99"
    if not ttfts:
        return max(tpots), None, src + "; TTFT not measured there, not included"
    return max(tpots), max(ttfts), src


def _p99(step: dict[str, Any], metric: str, path: str) -> float | None:
    """A step's p99 of `metric` from summary.json: None when absent; BadInput when it is not a finite number."""
    block = step.get(metric)
    value = block.get("p99") if isinstance(block, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or number_problem(value, lo=0, hi=MAX_MS):
        raise BadInput(f"{path}: {metric}.p99 of step {step.get('endpoint')!r} is not a latency: {value!r}")
    return float(value)


def parse_duration(value: Any) -> float | None:
    """Seconds from 30, '30', '30s', '1m30s', '1h', '500ms'; None when not a duration."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    m = _DURATION.match(text)
    if not m or not any(m.groups()):
        return None
    h, mi, s, ms, us = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mi * 60 + s + ms / 1000 + us / 1e6


class _Loader(yaml.SafeLoader):
    pass


def _nodes(node: yaml.Node, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], yaml.Node, int]]:
    """(path, value node, key line) for every mapping entry, depth first."""
    out: list[tuple[tuple[str, ...], yaml.Node, int]] = []
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            k = str(key.value)
            out.append(((*path, k), value, key.start_mark.line + 1))
            out.extend(_nodes(value, (*path, k)))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out.extend(_nodes(item, (*path, str(i))))
    return out


def _scalar(node: yaml.Node) -> Any:
    """The value of a scalar node as YAML types it (the node itself, never its text parsed again)."""
    if not isinstance(node, yaml.ScalarNode) or node.value == "":
        return None
    try:
        return yaml.constructor.SafeConstructor().construct_object(node)
    except (yaml.YAMLError, ValueError, OverflowError):
        return None


def _prestop_sleep(node: yaml.Node) -> float | None:
    text = yaml.safe_dump(yaml.load(yaml.serialize(node), Loader=_Loader))
    m = re.search(r"sleep\W+(\d+(?:\.\d+)?)", text)
    if m:
        return float(m.group(1))
    m = re.search(r"seconds:\s*(\d+)", text)  # lifecycle.preStop.sleep.seconds (k8s >= 1.30)
    return float(m.group(1)) if m else None


def scan_file(path: Path, need: GraceNeed, display: str) -> list[Finding]:
    """Grace periods, preStop hooks and timeouts in one YAML file (all documents); BadInput when it cannot be
    read as YAML (line and column), so no setting is skipped unsaid."""
    text = read_text(path, max_bytes=SCAN_MAX_BYTES, what="deploy YAML file")
    docs = list(checked_nodes(text, display, max_bytes=SCAN_MAX_BYTES))
    out: list[Finding] = []
    gen_s = need.server_s
    for doc in docs:
        if doc is None:
            continue
        entries = _nodes(doc)
        keys = {p[-1] for p, _, _ in entries}
        pod_specs = [(p, n, ln) for p, n, ln in entries if p[-1] == "containers"]
        graces = [(p, n, ln) for p, n, ln in entries if p[-1] == "terminationGracePeriodSeconds"]
        for _, n, ln in graces:
            value = parse_duration(_scalar(n))
            ok = value is not None and value >= need.required_s
            out.append(
                Finding(
                    file=display,
                    line=ln,
                    setting="terminationGracePeriodSeconds",
                    value_s=value,
                    required_s=need.required_s,
                    ok=ok,
                    message="covers the longest generation"
                    if ok
                    else f"{value} s is shorter than the {need.required_s:.0f} s the longest request needs: "
                    "in-flight requests are killed mid-generation",
                )
            )
        if pod_specs and not graces:
            p, n, ln = pod_specs[0]
            ok = need.required_s <= K8S_DEFAULT_GRACE_S
            out.append(
                Finding(
                    file=display,
                    line=ln,
                    setting="terminationGracePeriodSeconds (absent)",
                    value_s=K8S_DEFAULT_GRACE_S,
                    required_s=need.required_s,
                    ok=ok,
                    message=f"not set: Kubernetes default {K8S_DEFAULT_GRACE_S:.0f} s"
                    + ("" if ok else f" < {need.required_s:.0f} s needed"),
                )
            )
        for p, n, ln in entries:
            if p[-1] == "preStop":
                sleep = _prestop_sleep(n)
                if sleep is not None:
                    grace = next((parse_duration(_scalar(g)) for _, g, _ in graces), K8S_DEFAULT_GRACE_S) or 0.0
                    ok = grace - sleep >= need.required_s
                    out.append(
                        Finding(
                            file=display,
                            line=ln,
                            setting="preStop sleep",
                            value_s=sleep,
                            required_s=need.required_s,
                            ok=ok,
                            message=f"preStop sleeps {sleep:.0f} s inside the {grace:.0f} s grace period"
                            + ("" if ok else f": only {grace - sleep:.0f} s remain to drain"),
                        )
                    )
            elif p[-1] == "stop_grace_period":
                value = parse_duration(_scalar(n))
                ok = value is not None and value >= need.required_s
                out.append(
                    Finding(
                        file=display,
                        line=ln,
                        setting="stop_grace_period",
                        value_s=value,
                        required_s=need.required_s,
                        ok=ok,
                        message="covers the longest generation"
                        if ok
                        else f"{value} s < {need.required_s:.0f} s needed: SIGKILL mid-generation",
                    )
                )
            elif "timeout" in p[-1].lower() and isinstance(n, yaml.ScalarNode):
                value = parse_duration(_scalar(n))
                if value is None or value <= 0:
                    continue
                ok = value >= gen_s
                out.append(
                    Finding(
                        file=display,
                        line=ln,
                        setting=p[-1],
                        value_s=value,
                        required_s=round(gen_s, 3),
                        ok=ok,
                        message="longer than the longest generation"
                        if ok
                        else f"{value} s cuts off generations that take up to {gen_s:.0f} s (the server "
                        "keeps generating for a client that left)",
                    )
                )
        if "services" in keys and any(p[0] == "services" for p, _, _ in entries):
            services = [(p, ln) for p, _, ln in entries if len(p) == 2 and p[0] == "services"]
            for p, ln in services:
                has = any(q[:2] == p and q[-1] == "stop_grace_period" for q, _, _ in entries)
                if not has:
                    ok = need.required_s <= COMPOSE_DEFAULT_GRACE_S
                    out.append(
                        Finding(
                            file=display,
                            line=ln,
                            setting=f"{p[1]}: stop_grace_period (absent)",
                            value_s=COMPOSE_DEFAULT_GRACE_S,
                            required_s=need.required_s,
                            ok=ok,
                            message=f"not set: compose default {COMPOSE_DEFAULT_GRACE_S:.0f} s"
                            + ("" if ok else f" < {need.required_s:.0f} s needed"),
                        )
                    )
    return out


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
        gen = need.server_s
        if client_timeout_s < gen:
            report.warnings.append(
                f"client timeout {client_timeout_s:g} s < {gen:.0f} s server generation time: users give up while "
                "the server keeps generating (wasted capacity, amplified during a canary)"
            )
    return report
