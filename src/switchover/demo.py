"""`switchover demo`: the README's main command. On a fresh machine: set up the test bed, start vLLM CPU (old)
and llama-server (new) on SmolLM2, write a switchover.yaml for them, run `check`, then a short gateway rollout
with shadow traffic, and say where the report is. Everything it started is stopped, also on Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, Field

from switchover.atomicfile import write_atomic
from switchover.config import Migration
from switchover.testbed import processes
from switchover.testbed.layout import Layout, bed_models
from switchover.wire.sse import parse_all

Say = Callable[[str], None]
BED_NAME = "demo"
MODEL = "smollm2"


class RolloutStep(BaseModel):
    action: str
    message: str
    stage: str
    weight: int
    gates: list[dict[str, Any]] = Field(default_factory=list)
    blockers: list[str] = Field(default_factory=list, description="entry conditions of the next stage not met")


class RolloutSummary(BaseModel):
    """What the short gateway rollout did."""

    gateway_url: str
    requests_sent: int
    requests_ok: int
    steps: list[RolloutStep] = Field(default_factory=list)
    final_stage: str
    final_weight: int
    ledger_dir: str
    audit_log: str


class DemoResult(BaseModel):
    """What `switchover demo` did, and where its report is."""

    workdir: str
    config: str = Field(description="The switchover.yaml the demo wrote (in workdir)")
    run_dir: str | None = None
    report_html: str | None = None
    report_md: str | None = None
    overall: str | None = Field(default=None, description="The check's overall verdict: go, no-go or incomplete")
    overall_reason: str | None = None
    rollout: RolloutSummary | None = Field(
        default=None, description="The short gateway rollout; None: not run (rollout_not_run says why)"
    )
    rollout_not_run: str | None = None
    seconds: dict[str, float] = Field(
        default_factory=dict, description="Wall time per phase (setup, start, check, rollout, total), s"
    )
    stopped: list[str] = Field(
        default_factory=list, description="The engines stopped at the end, as 'engine (role) pid N'"
    )


def demo_config(
    old_url: str, new_url: str, gateway_port: int, old_model: Path | None = None, new_model: Path | None = None
) -> str:
    """The switchover.yaml the demo writes: both engines, a short check, a gateway with shadow, 3 stages."""
    diff = (
        f"  diff_model: {{old: '{old_model}', new: '{new_model}'}}   # the files each engine loads\n"
        if old_model and new_model
        else ""
    )
    return f"""# written by `switchover demo`: vLLM CPU (old) -> llama-server (new), both serving SmolLM2-135M-Instruct
old:
  url: {old_url}
  engine: vllm
new:
  url: {new_url}
  engine: llamacpp
check:
  name: demo-check
  runs_dir: runs
  probe: {{budget_s: 15, skip: [n.parallel, max_tokens.omitted]}}   # the two slowest probes on 2 cores
  verify: {{max_prompts: 4, structured: 2}}
  bench: {{concurrency: [1, 2, 4], requests: 8, output_tokens: 32}}
{diff}  grace:
    max_tokens: 1024          # the longest generation this API allows
    client_timeout_s: 60
gateway:
  weight: 0
  rollback: false
  listen: {{host: 127.0.0.1, port: {gateway_port}}}
  shadow: {{percent: 100, max_tokens_clamp: 16, max_concurrency: 8}}
  kill_switch: {{min_samples: 10}}
  drain_seconds: 30
  run_dir: runs/gateway
rollout:
  stages: [shadow, 5, 20]
  window_s: 900
  gates: {{min_samples: 15}}      # per arm; fewer means "hold", never "pass"
  entry: {{enabled: false}}   # the demo shows stage gates; a real rollout needs a passing check first
"""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the demo like Ctrl-C, so the engines it started are stopped."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def setup_bed(layout: Layout, say: Say) -> None:
    from switchover.testbed.install import Installer

    def on_event(kind: str, step: Any, detail: str) -> None:
        if kind == "cached":
            say(f"setup: {step.title}: already there")
        elif kind == "start":
            say(f"setup: {step.title} ...")
        elif kind == "progress":
            say(f"setup: {step.key}: {detail}")
        else:
            say(f"setup: {step.title}: done ({detail})")

    Installer(layout, with_smollm2=True, on_event=on_event).run()


def _complete_stream(raw: bytes) -> bool:
    """An answered stream: events that parse, none of them an error, ending in [DONE] (a 200 whose stream the
    gateway ended with an error event is not an answer)."""
    events = parse_all([raw])
    if not events or events[-1].data != b"[DONE]":
        return False
    for ev in events[:-1]:
        try:
            obj = orjson.loads(ev.data)
        except orjson.JSONDecodeError:
            return False
        if not isinstance(obj, dict) or obj.get("error") is not None:
            return False
    return True


async def _traffic(
    url: str, model: str, n: int, say: Say, start: int = 0, room: Callable[[], bool] = lambda: True
) -> tuple[int, int]:
    """n short streamed chat requests through the gateway, 2 at a time, one tenant each (bounded); a request
    waits (at most 30 s) until `room()` says the shadow has a free slot, so mirrors are not dropped."""
    import aiohttp

    ok = 0
    sem = asyncio.Semaphore(2)
    prompts = ["Name a colour.", "Say hi in French.", "What is 2+3?", "Name a fruit.", "Write one word about rain."]

    async def one(i: int, session: aiohttp.ClientSession) -> bool:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": prompts[i % len(prompts)]}],
            "max_tokens": 16,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        async with sem:
            waited = 0.0
            while not room() and waited < 30.0:
                await asyncio.sleep(0.1)
                waited += 0.1
            try:
                async with session.post(
                    f"{url}/v1/chat/completions", json=body, headers={"x-tenant-id": f"demo-tenant-{start + i}"}
                ) as resp:
                    raw = await resp.read()
                    return resp.status == 200 and _complete_stream(raw)
            except (aiohttp.ClientError, TimeoutError):
                return False

    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        results = await asyncio.gather(*(one(i, session) for i in range(n)))
    ok = sum(results)
    say(f"rollout: sent {n} requests through the gateway, {ok} answered")
    return n, ok


async def _mirrors_done(gateway: Any, say: Say, limit_s: float = 120.0) -> None:
    """Wait (bounded) until the shadow copies finished and their rows are on disk, where the gates read them: a
    mirror's row is written by its done-callback (one loop turn after it ends), and the ledger reaches the file on
    the gateway's 0.1 s timer, which cannot run while the rollout's synchronous check holds the loop."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if len(gateway.inflight) == 0 and (gateway.shadow is None or gateway.shadow.in_flight == 0):
            await asyncio.sleep(0.05)  # the done-callbacks that write the shadow rows run
            gateway.ledger.flush()
            return
        await asyncio.sleep(0.25)
    gateway.ledger.flush()
    say(f"rollout: shadow copies still running after {limit_s:g} s; judging what the ledger has")


def _step(res: Any) -> RolloutStep:
    gates = [
        {
            "gate": r.gate.value,
            "verdict": r.verdict,
            "hard": r.hard,
            "observed": r.observed,
            "threshold": r.threshold,
            "samples": r.samples,
            "reason": r.reason,
        }
        for r in (res.report.results if res.report is not None else [])
    ]
    return RolloutStep(
        action=res.action,
        message=res.message,
        stage=res.state.stage,
        weight=res.state.weight,
        gates=gates,
        blockers=list(res.report.blockers) if res.report is not None else [],
    )


async def gateway_rollout(m: Migration, config: Path, model: str, say: Say, requests: int = 20) -> RolloutSummary:
    """Start the gateway in this process, enter the shadow stage, send traffic, let the gates decide; if they
    advance (or hold for more samples), send another round and judge again. Bounded: at most 3 rounds.
    `m` is the migration file at `config` (the gateway reloads it from there; the rollout edits its weight)."""
    from switchover.gateway.app import Gateway
    from switchover.gateway.server import running
    from switchover.rollout.controller import Rollout

    gateway = Gateway(m, config)
    ro = Rollout(m, config)
    steps: list[RolloutStep] = []
    sent = answered = 0
    async with running(gateway) as url:
        say(f"rollout: gateway on {url} (old {m.old.url}, new {m.new.url}), ledger {gateway.run_dir}")
        res = ro.advance(why="switchover demo: enter the shadow stage")
        steps.append(_step(res))
        say(f"rollout: {res.message}")
        limit = m.gateway.shadow.max_concurrency if m.gateway is not None else 1

        def room() -> bool:
            return gateway.shadow is None or gateway.shadow.in_flight < limit - 1

        for round_ in range(3):  # bounded: at most 3 x `requests` requests
            await asyncio.sleep(1.5)  # the gateway polls switchover.yaml once a second
            n, ok = await _traffic(url, model, requests, say, start=round_ * requests, room=room)
            sent, answered = sent + n, answered + ok
            await _mirrors_done(gateway, say)
            res = ro.check(auto_advance=True, why="switchover demo: gates passed")
            steps.append(_step(res))
            say(f"rollout: {res.message}")
            if res.action not in ("advance", "hold"):
                break
        view = ro.view()
    return RolloutSummary(
        gateway_url=url,
        requests_sent=sent,
        requests_ok=answered,
        steps=steps,
        final_stage=view.stage,
        final_weight=view.weight,
        ledger_dir=str(gateway.run_dir),
        audit_log=view.audit_log,
    )


def run_demo(
    workdir: Path, say: Say, *, load: Callable[[Path], Migration], rollout: bool = True, layout: Layout | None = None
) -> DemoResult:
    """The whole demo; the engines it starts are stopped before it returns or raises (also on Ctrl-C). The
    migration file is written here once the engines' ports are known; `load` reads it back (the CLI passes
    `load_migration`, so the file is validated like any user's) and the check and the rollout share what it read."""
    from switchover.check.runner import CheckRun, is_milestone
    from switchover.config.check import CheckSection

    layout = layout or Layout.default()
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "switchover.yaml"
    result = DemoResult(workdir=str(workdir), config=str(config))
    t0 = time.monotonic()
    with _sigterm_as_interrupt():
        setup_bed(layout, say)
        result.seconds["setup"] = round(time.monotonic() - t0, 1)
        t1 = time.monotonic()
        say("engines: starting vLLM CPU (old) and llama-server (new) on SmolLM2-135M-Instruct ...")
        state, _ = processes.up(
            layout,
            model=MODEL,
            name=BED_NAME,
            old_port=processes.free_port(),
            new_port=processes.free_port(),
            timeout_s=600,
            on_event=lambda msg: say(f"engines: {msg}"),
        )
        try:
            result.seconds["start"] = round(time.monotonic() - t1, 1)
            # a fresh state folder per demo run: the rollout starts at 0 % every time
            for stale in (
                workdir / ".switchover" / "rollout" / "state.json",
                workdir / "runs" / "gateway" / "killswitch.json",
            ):
                stale.unlink(missing_ok=True)
            bed = bed_models(layout)[MODEL]
            write_atomic(
                config, demo_config(state.url("old"), state.url("new"), processes.free_port(), bed.hf_dir, bed.gguf)
            )
            say(f"config: {config}")
            m = load(config)
            t2 = time.monotonic()

            def on_event(part: str, msg: str) -> None:
                if is_milestone(msg):
                    say(f"check {part}: {msg}")

            runner = CheckRun(m, m.check or CheckSection(), config_path=config, on_event=on_event)
            report, rd = asyncio.run(runner.run())
            result.seconds["check"] = round(time.monotonic() - t2, 1)
            result.run_dir = str(rd.path)
            result.report_html, result.report_md = str(rd.file("report.html")), str(rd.file("report.md"))
            result.overall, result.overall_reason = report.overall, report.overall_reason
            if not rollout:
                result.rollout_not_run = "not run: --no-rollout"
            else:
                t3 = time.monotonic()
                try:
                    result.rollout = asyncio.run(gateway_rollout(m, config, state.engines[0].served_name, say))
                except ImportError as exc:
                    result.rollout_not_run = f"not run: the gateway or rollout package is not importable ({exc})"
                except Exception as exc:  # the report is the product; a rollout failure is reported, not fatal
                    result.rollout_not_run = f"not run: {type(exc).__name__}: {exc}"
                result.seconds["rollout"] = round(time.monotonic() - t3, 1)
        finally:
            say("engines: stopping what the demo started ...")
            result.stopped = processes.down(layout, name=BED_NAME)
            say("engines: stopped " + (", ".join(result.stopped) or "nothing (already gone)"))
    result.seconds["total"] = round(time.monotonic() - t0, 1)
    return result
