"""The edge of the holding window: check old's readiness, and collect the rollback prerequisites (docs/rollout.md:
config, weights, route, monitoring; plus the last drill and old's readiness). Judging is in holding.py."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Literal, TypeVar

from switchover.config.rollout_holding import HoldingSettings
from switchover.errors import SwitchoverError
from switchover.evidence.drill import DrillResult
from switchover.rollout.driver import set_gateway_fields
from switchover.rollout.holding import OldArmView, PrereqStatus, Prerequisite, ReadyRecord, judge_drill
from switchover.runs import MAX_JSON_BYTES
from switchover.textfile import read_bytes
from switchover.wire.readiness import Readiness, check_ready

T = TypeVar("T")
ReadyCheck = Callable[[str, "str | None", float], Readiness]
MetricsCheck = Callable[[str], "str | None"]  # URL -> None when it answered, else why not


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, also when called inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def ready_check(
    url: str, model: str | None, max_ms: float, *, engine: str | None = None, engine_version: str | None = None
) -> Readiness:
    """`switchover ready`'s 1-token check, synchronously; a loading answer is told by `engine`'s profile."""
    return run_sync(
        check_ready(
            url, model=model, max_ms=max_ms, connect_timeout_s=2.0, engine=engine, engine_version=engine_version
        )
    )


def metrics_check(url: str) -> str | None:
    """GET the engine's metrics page through the wire client; None when it answered 200."""
    from switchover.wire.metrics_page import scrape

    try:
        run_sync(scrape(url, timeout_s=5.0))
    except SwitchoverError as exc:
        return exc.message
    return None


def record(res: Readiness, now: float) -> ReadyRecord:
    """A readiness result as an old_ready.jsonl line."""
    return ReadyRecord(
        ts=now, url=res.url, ready=res.ready, state=res.state.value, reason=res.reason, elapsed_ms=res.elapsed_ms
    )


def latest_drill(runs: Path) -> tuple[Path, DrillResult] | None:
    """The most recent readable `drill.json` under `runs/` (by when the drill started), or None."""
    found: list[tuple[float, Path, DrillResult]] = []
    if not runs.is_dir():
        return None
    for path in runs.glob("*/drill.json"):
        try:
            res = DrillResult.model_validate_json(read_bytes(path, max_bytes=MAX_JSON_BYTES, what="drill result"))
        except (SwitchoverError, ValueError):  # an unreadable, oversized or foreign file is not a drill
            continue
        found.append((res.started_wall, path, res))
    if not found:
        return None
    _, path, res = max(found, key=lambda t: t[0])
    return path, res


def _resolve(base: Path, p: str) -> Path:
    path = Path(p).expanduser()
    return path if path.is_absolute() else base / path


def _paths(base: Path, items: list[str], what: str, name: Literal["config", "weights"], hint: str) -> Prerequisite:
    if not items:
        return Prerequisite(
            name=name,
            status="unverified",
            required=False,
            detail=f"no {what} listed: set rollout.holding.prerequisites.{hint}",
        )
    missing, empty = [], []
    for item in items:
        p = _resolve(base, item)
        if not p.exists():
            missing.append(str(p))
        elif p.is_dir() and not any(p.iterdir()):
            empty.append(str(p))
    if missing or empty:
        parts = ([f"missing: {', '.join(missing)}"] if missing else []) + (
            [f"empty: {', '.join(empty)}"] if empty else []
        )
        return Prerequisite(name=name, status="failed", detail=f"{what}: " + "; ".join(parts))
    return Prerequisite(name=name, status="ok", detail=f"{what} present: {', '.join(items)}")


def route_prerequisite(config_path: Path) -> Prerequisite:
    """The switch back is one line in the file the gateway watches: it must be there and writable."""
    try:
        text = config_path.read_text(encoding="utf-8")
        set_gateway_fields(text, {"weight": 0, "rollback": True})
    except SwitchoverError as exc:
        return Prerequisite(name="route", status="failed", detail=exc.message)
    except OSError as exc:
        return Prerequisite(name="route", status="failed", detail=f"{config_path}: cannot read: {exc.strerror}")
    if not os.access(config_path, os.W_OK) or not os.access(config_path.parent, os.W_OK):
        return Prerequisite(
            name="route",
            status="failed",
            detail=f"{config_path} (or its folder) is not writable: the rollback line cannot be set",
        )
    return Prerequisite(
        name="route",
        status="ok",
        detail=f"gateway.rollback / weight in {config_path.name} can be set (hot reload, no release)",
    )


def collect_prerequisites(
    *,
    config_path: Path,
    old_url: str,
    old_engine: str,
    settings: HoldingSettings,
    old: OldArmView,
    now: float,
    metrics: MetricsCheck = metrics_check,
) -> list[Prerequisite]:
    """Config, weights, route, monitoring, drill and old's readiness, each with its status and why."""
    base = config_path.resolve().parent
    pre = settings.prerequisites
    config = _paths(base, pre.old_launch, "old launch files", "config", "old_launch")
    config.detail = f"old: {old_engine} at {old_url}; {config.detail}"
    weights = _paths(base, pre.old_weights, "old weights", "weights", "old_weights")
    if old.verdict == "pass" and weights.status == "unverified":
        weights.detail += " (old is serving now, so its weights are loaded)"
    out = [config, weights, route_prerequisite(config_path)]
    out.append(_monitoring(old_url, old_engine, pre.monitoring, metrics))
    found = latest_drill(_resolve(base, settings.drill.runs))
    out.append(judge_drill((str(found[0]), found[1]) if found else None, now, settings.drill))
    status: PrereqStatus = "ok" if old.verdict == "pass" else "failed" if old.verdict == "fail" else "missing"
    out.append(Prerequisite(name="old_ready", status=status, detail=old.reason))
    return out


def _monitoring(old_url: str, engine: str, enabled: bool, metrics: MetricsCheck) -> Prerequisite:
    if not enabled:
        return Prerequisite(
            name="monitoring",
            status="unverified",
            required=False,
            detail="not checked (rollout.holding.prerequisites.monitoring: false)",
        )
    from switchover.engines.profile import load_profile

    try:
        path = load_profile(engine).metrics_endpoint.path
    except SwitchoverError:
        return Prerequisite(
            name="monitoring",
            status="unverified",
            required=False,
            detail=f"no engine profile for {engine!r}: its metrics endpoint is not known",
        )
    url = old_url.rstrip("/") + path
    problem = metrics(url)
    if problem:
        return Prerequisite(
            name="monitoring",
            status="failed",
            detail=f"old's metrics {url} did not answer: {problem} (dashboards would go dark)",
        )
    return Prerequisite(name="monitoring", status="ok", detail=f"old's metrics answer at {url}")
