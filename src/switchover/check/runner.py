"""`switchover check`: run the enabled parts in order, keep each result in ONE run directory as it finishes,
then judge every checklist item and write check.json, report.html and report.md.

A part that cannot run (its package is missing, an endpoint is down, it crashes) is recorded with the reason;
the items that needed it say "not run", never pass."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from switchover.atomicfile import write_atomic
from switchover.check import parts as P
from switchover.check.evidence import CheckConfig, load_evidence
from switchover.check.registry import BY_NAME, NAMES, PartInputs
from switchover.config import Endpoint, Migration
from switchover.config.bench import BenchSlos
from switchover.config.check import CheckSection
from switchover.errors import SwitchoverError
from switchover.evidence.check import CheckReport, EndpointSummary, PartRun
from switchover.runs import RunDir
from switchover.wire import EngineClient
from switchover.wire.discovery import Discovered, discover

Events = Callable[[str, str], None]  # (part, message)
_MILESTONES = (
    "running",
    "ran ",
    "failed",
    "skipped",
    "not run",
    "unavailable",
    "run directory",
    "old endpoint",
    "new endpoint",
)


def is_milestone(msg: str) -> bool:
    """A part starting or ending (worth a line of its own), as opposed to per-request progress."""
    return msg.startswith(_MILESTONES)


def build_report(rd: RunDir, *, total_s: float | None = None, created_wall: float | None = None) -> CheckReport:
    """Judge a check run directory: pure over what the parts left there (also used by `switchover report`)."""
    from switchover.check.plots import build_plots
    from switchover.check.rules import judge_all
    from switchover.evidence.check import overall_verdict

    ev = load_evidence(rd)
    items = judge_all(ev)
    overall, why = overall_verdict(items)
    order = {p: i for i, p in enumerate(NAMES)}
    return CheckReport(
        name=ev.config.settings.name,
        created_wall=created_wall or time.time(),
        run_dir=str(rd.path),
        config_file=ev.config.config_file,
        overall=overall,
        overall_reason=why,
        items=items,
        endpoints=ev.config.endpoints,
        parts=sorted(ev.parts.values(), key=lambda p: order.get(p.part, 99)),
        total_s=total_s,
        plots=build_plots(ev),
    )


def write_outputs(rd: RunDir, report: CheckReport) -> dict[str, Path]:
    """check.json, report.html and report.md into the run directory."""
    from switchover.report.html import render_html
    from switchover.report.markdown import render_markdown

    out = {"json": rd.write_json("check", report)}
    html = write_atomic(rd.file("report.html"), render_html(report))
    md = write_atomic(rd.file("report.md"), render_markdown(report))
    out["html"], out["md"] = html, md
    return out


class CheckRun:
    """One pre-flight over a migration file."""

    def __init__(
        self,
        migration: Migration,
        settings: CheckSection,
        *,
        config_path: Path | None = None,
        runs_dir: Path | None = None,
        on_event: Events | None = None,
        left_out: dict[str, str] | None = None,
    ) -> None:
        self.m = migration
        self.s = settings
        self.left_out = left_out or {}  # part -> why the command line left it out (--only / --skip)
        self.config_path = config_path
        self.base = config_path.resolve().parent if config_path else Path.cwd()
        runs = Path(settings.runs_dir).expanduser()
        self.runs_dir = runs_dir or (runs if runs.is_absolute() else self.base / runs)
        self.on_event = on_event or (lambda part, msg: None)
        self.parts: dict[str, PartRun] = {}
        self.rd: RunDir | None = None
        self.found: dict[str, Discovered] = {}  # "old" / "new": GET /v1/models once per endpoint per check
        self.clients: dict[str, EngineClient] = {}  # the check's own requests share one client per endpoint
        self.inputs: PartInputs | None = None

    # ------------------------------------------------------------------ bookkeeping
    def _record(self, run: PartRun) -> None:
        assert self.rd is not None
        self.parts[run.part] = run
        self.rd.write_json("parts", [p.model_dump() for p in self.parts.values()])

    def _enabled(self, part: str) -> tuple[bool, str | None]:
        if part in self.left_out:
            return False, self.left_out[part]
        if not getattr(self.s, part).enabled:
            return False, f"disabled in switchover.yaml (check.{part}.enabled: false)"
        missing = BY_NAME[part].missing_input(self.s)
        return (False, missing) if missing else (True, None)

    def _live_wanted(self) -> bool:
        return any(BY_NAME[p].live and self._enabled(p)[0] for p in NAMES)

    async def _discover(self) -> dict[str, str]:
        """List each endpoint's models once (its model and context length, by its profile): the live parts reuse
        it; which endpoints do not answer, so that the live parts against them are skipped with the reason."""
        down = {}
        for role, ep in (("old", self.m.old), ("new", self.m.new)):
            found = await discover(
                self.clients[role], model=ep.model, engine=P.engine_name(ep), version=ep.engine_version, timeout_s=10
            )
            self.found[role] = found
            if found.listing.failure is not None:
                down[role] = f"{ep.url}: {found.listing.failure.message}"
        self.m = self.m.model_copy(
            update={
                "old": _with_model(self.m.old, self.found["old"]),
                "new": _with_model(self.m.new, self.found["new"]),
            }
        )
        return down

    async def _one(self, part: str, down: dict[str, str]) -> None:
        ok, why = self._enabled(part)
        if not ok:
            self._record(PartRun(part=part, status="disabled", reason=why))
            self.on_event(part, f"skipped: {why}")
            return
        if BY_NAME[part].live and down:
            reason = "endpoint unreachable: " + "; ".join(down.values())
            self._record(PartRun(part=part, status="failed", reason=reason))
            self.on_event(part, f"not run: {reason}")
            return
        self.on_event(part, f"running: {BY_NAME[part].title}")
        t0 = time.monotonic()
        try:
            files = await self._run_part(part)
        except ImportError as exc:
            run = PartRun(
                part=part,
                status="unavailable",
                reason=f"not importable: {exc}",
                seconds=round(time.monotonic() - t0, 2),
            )
        except (SwitchoverError, Exception) as exc:  # any failure is a recorded "not run", never a crash
            msg = exc.message if isinstance(exc, SwitchoverError) else f"{type(exc).__name__}: {exc}"
            run = PartRun(part=part, status="failed", reason=msg, seconds=round(time.monotonic() - t0, 2))
        else:
            run = PartRun(part=part, status="ran", seconds=round(time.monotonic() - t0, 2), files=files)
        self._record(run)
        self.on_event(part, f"{run.status} in {run.seconds:.1f} s" + (f": {run.reason}" if run.reason else ""))

    async def _run_part(self, part: str) -> list[str]:
        rd, inputs = self.rd, self.inputs
        assert rd is not None and inputs is not None

        def progress(msg: str) -> None:
            self.on_event(part, msg)

        inputs.progress = progress
        out = await BY_NAME[part].run(inputs)
        if out.result is not None:
            inputs.results[part] = out.result  # later parts read it here, not back from disk
        if out.files:
            return out.files
        assert out.result is not None
        return [rd.write_json(part, out.result).name]

    # ------------------------------------------------------------------ the run
    async def run(self) -> tuple[CheckReport, RunDir]:
        t0 = time.monotonic()
        created = time.time()
        self.rd = rd = RunDir.create(self.runs_dir, self.s.name)
        endpoints = [
            EndpointSummary(role=r, url=e.url, engine=e.engine.value, model=e.model)
            for r, e in (("old", self.m.old), ("new", self.m.new))
        ]
        slos = self.m.bench.slos if self.m.bench is not None else BenchSlos()
        rd.write_json(
            "config",
            CheckConfig(
                config_file=str(self.config_path) if self.config_path else None,
                endpoints=endpoints,
                settings=self.s,
                gateway_drain_seconds=self.m.gateway.drain_seconds if self.m.gateway else None,
                slos=slos,
            ),
        )
        self.on_event("check", f"run directory {rd.path}")
        if self._live_wanted():
            self.clients = P.open_clients(self.m)
        try:
            down = await self._discover() if self.clients else {}
            for role, why in down.items():
                self.on_event("check", f"{role} endpoint unreachable: {why}")
            self.inputs = PartInputs(
                self.m, self.s, self.base, rd.path, config_path=self.config_path, found=self.found, clients=self.clients
            )
            for part in NAMES:
                await self._one(part, down)
        finally:  # an interrupted check still leaves a report of what it measured
            for client in self.clients.values():
                await client.close()
            for part in NAMES:
                if part not in self.parts:
                    self._record(PartRun(part=part, status="failed", reason="interrupted before it finished"))
            report = build_report(rd, total_s=round(time.monotonic() - t0, 1), created_wall=created)
            write_outputs(rd, report)
        return report, rd


def _with_model(ep: Endpoint, found: Discovered) -> Endpoint:
    """The endpoint with its model as discovered when the migration file names none (every part then uses it)."""
    return ep if ep.model or found.model is None else ep.model_copy(update={"model": found.model})
