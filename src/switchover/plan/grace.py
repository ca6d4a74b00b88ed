"""Drain grace and timeouts: how long the longest generation takes, and which deploy settings stop or time out
sooner (docs/plan.md, Grace: max_tokens x TPOT p99, plus TTFT and a margin; 2000 x 35 ms = 70 s). Pure: the
files it judges are read by plan/grace_files.py."""

from __future__ import annotations

import re
from typing import Any

import yaml
from pydantic import BaseModel, Field

from switchover.errors import BadInput
from switchover.inputs import MAX_MS, MAX_SECONDS, MAX_TOKENS, number_problem, require

K8S_DEFAULT_GRACE_S = 30.0  # Kubernetes PodSpec.terminationGracePeriodSeconds default
COMPOSE_DEFAULT_GRACE_S = 10.0  # docker compose stop_grace_period default
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


def deploy_findings(docs: list[yaml.Node | None], need: GraceNeed, display: str) -> list[Finding]:
    """Grace periods, preStop hooks and timeouts in the parsed documents of one YAML file, against the need."""
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


def timeout_warning(need: GraceNeed, client_timeout_s: float) -> str | None:
    """A client timeout shorter than the server's generation: users give up while the server keeps generating."""
    gen = need.server_s
    if client_timeout_s >= gen:
        return None
    return (
        f"client timeout {client_timeout_s:g} s < {gen:.0f} s server generation time: users give up while "
        "the server keeps generating (wasted capacity, amplified during a canary)"
    )
