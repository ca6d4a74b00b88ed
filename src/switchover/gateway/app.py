"""The Gateway: what all requests share, wired together. Each part lives in its own module:

- live.py: the config snapshot (hot-reloaded here, swapped whole); clients.py: who may send what
- front.py: untrusted bytes to checked requests; admin.py: the gateway's own endpoints
- proxy.py: one proxied request (route, relay, fallback, shadow, ledger row), given the parts below it uses (not
  the Gateway); inflight.py: the drain
- killswitch.py + state.py: the latch and the run-directory files (fail closed); ledger.py + ledger_sink.py; metrics.py
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path

from switchover.config import Migration, load_migration
from switchover.errors import BadInput
from switchover.gateway.admin import Admin
from switchover.gateway.clients import deployment_seed
from switchover.gateway.headers import request_id
from switchover.gateway.inflight import InFlight
from switchover.gateway.killswitch import KillSwitch, NewArmWatch
from switchover.gateway.ledger import Ledger
from switchover.gateway.ledger_sink import LedgerSink
from switchover.gateway.live import Deployment, Live, build_live
from switchover.gateway.metrics import GatewayMetrics
from switchover.gateway.policy import threshold
from switchover.gateway.proxy import Proxy
from switchover.gateway.shadow import Shadow
from switchover.gateway.spotcheck import SpotCheck
from switchover.gateway.state import LatchFile, RunDirLock, write_admin_token
from switchover.httpfront.budget import MemoryBudget
from switchover.httpfront.listener import Front
from switchover.httpfront.messages import FrontRequest, FrontStream, Reply
from switchover.ledger_record import RequestRow
from switchover.wire.passthrough import H1Pool

LEDGER_FLUSH_S = 0.1  # ledger rows reach the file within this (one write syscall per batch, not per row)
log = logging.getLogger("switchover.gateway")


def resolve_live(migration: Migration, config_path: Path | None) -> Live:
    """The live snapshot of a migration file, with the checks that need the whole file."""
    live = build_live(migration, config_path.resolve().parent if config_path is not None else None)
    gw = live.gw
    keyed = [arm for arm in ("old", "new") if getattr(migration, arm).api_key_env]
    if keyed and "clients" not in gw.model_fields_set:
        raise BadInput(
            f"gateway.clients: {' and '.join(a + '.api_key_env' for a in keyed)} is set, but the default client "
            "policy (passthrough) never sends the engines' keys: clients' own credentials go to the engines",
            hint="choose one: `clients: {mode: keys, keys_env: [CLIENT_KEY]}` (clients present a key, the gateway "
            "sends the engine's), `clients: {mode: passthrough}`, or `clients: {mode: open}` (anyone gets the "
            "engine's key; see docs/gateway.md, Security model)",
        )
    return live


class Gateway:
    """State shared by all requests: live config, kill switch, ledger, metrics, upstream pool, shadow."""

    def __init__(
        self,
        migration: Migration,
        config_path: Path | None = None,
        *,
        log_prompts: bool = False,
        run_dir: Path | None = None,
    ) -> None:
        self.config_path = config_path
        self.deployment = Deployment(resolve_live(migration, config_path), log_prompts=log_prompts)
        gw = self.live.gw
        self.run_dir = run_dir or gw.resolved_run_dir(config_path)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.ledger = Ledger(
            self.run_dir,
            int(gw.ledger_rotate_mb * (1 << 20)),
            flush_interval_s=LEDGER_FLUSH_S,
            keep_files=gw.ledger_keep_files,
        )
        self.metrics = GatewayMetrics()
        self.metrics.preset(fallback_statuses=self.live.fail_statuses)
        self.budget = MemoryBudget(gw.limits.memory_budget_bytes)  # every buffer draws from it (budget.py)
        self.metrics.watch_budget(self.budget)
        ks = gw.kill_switch
        self.killswitch = KillSwitch(
            ks.window, ks.min_samples, ks.max_fallback_ratio, ks.enabled, client_share=ks.max_client_share
        )
        self.latch_file = LatchFile(self.run_dir)
        self.lock = RunDirLock(self.run_dir)
        self.admin_token: str | None = None
        self.pool = H1Pool()  # the old / new arms
        self.shadow = Shadow()
        self.inflight = InFlight()
        self.spotcheck = SpotCheck(self.run_dir)
        self.sink = LedgerSink(self.ledger, self.metrics)
        self.metrics.in_flight.set_function(lambda: len(self.inflight))  # read at scrape time
        self.front: Front | None = None
        self.admin = Admin(self)
        self.proxy = Proxy(
            self.deployment,
            kill_switch=NewArmWatch(lambda: self.killswitch.latched, self.count_new),
            pool=self.pool,
            sink=self.sink,
            metrics=self.metrics,
            budget=self.budget,
            inflight=self.inflight,
            shadow=self.shadow,
            spotcheck=self.spotcheck,
        )
        self._sig = self._file_sig()
        self._tasks: list[asyncio.Task[None]] = []
        self._publish_config()

    # ---- what the request path shares with the rest (kept here for the admin endpoints, the CLI and tests) -----
    @property
    def live(self) -> Live:
        return self.deployment.live

    @live.setter
    def live(self, live: Live) -> None:
        self.deployment.live = live

    @property
    def tenant_seed(self) -> bytes:
        return self.deployment.tenant_seed

    @property
    def log_prompts(self) -> bool:
        return self.deployment.log_prompts

    @log_prompts.setter
    def log_prompts(self, on: bool) -> None:
        self.deployment.log_prompts = on

    @property
    def draining(self) -> bool:
        return self.inflight.draining

    # ---- lifecycle ---------------------------------------------------------------------------------
    async def start(self, front: Front | None = None) -> None:
        """Take the run directory (after the port is bound), write the admin token, restore the latch."""
        self.lock.acquire()
        self.deployment.tenant_seed = deployment_seed(self.live.gw.resolved_seed_file(self.config_path, self.run_dir))
        self.front = front
        self.admin_token = write_admin_token(self.run_dir)
        latch = self.latch_file.load()
        if latch.error:
            log.error("%s: holding the new arm at weight 0 until `switchover gateway reset`", latch.error)
        if latch.latched:
            self.killswitch.restore(True, latch.reason)
            if not latch.error:
                log.warning("kill switch is latched from before the restart: %s", latch.reason)
        self._publish_config()
        self._tasks.append(asyncio.ensure_future(self._flush_ledger()))
        if self.config_path is not None:
            self._tasks.append(asyncio.ensure_future(self._watch()))
        self._announce_clients(self.live)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await self.shadow.close()
        await self.spotcheck.close()
        await self.sink.settle()  # mirrors cancelled by close(): their rows are written now
        self.pool.close()
        self.ledger.close()
        if self.admin_token is not None:
            with contextlib.suppress(OSError):
                (self.run_dir / "admin.token").unlink()
            self.admin_token = None
        self.lock.release()

    def _announce_clients(self, live: Live) -> None:
        c = live.clients
        if c.mode == "open":
            log.warning(
                "clients: OPEN: anyone who reaches %s:%d gets the engines' keys attached (gateway.clients)",
                live.gw.listen.host,
                live.gw.listen.port,
            )
        elif c.mode == "keys":
            log.info("clients: keys (%d client keys); the engines' own keys are sent", c.keys)
        else:
            log.info("clients: passthrough (clients' own credentials go to the engines; the gateway adds none)")

    async def drain(self, seconds: float | None = None) -> int:
        """Readiness goes 503 and new requests are refused; in-flight ones get up to `seconds`; the rest are cut
        (streams end with an error event). Returns how many were cut."""
        self.inflight.draining = True
        self.metrics.draining.set(1)
        limit = self.live.gw.drain_seconds if seconds is None else seconds
        log.info("draining: %d in flight, up to %g s", len(self.inflight), limit)
        cut = await self.inflight.drain(limit)
        if cut:
            log.warning(
                "drain limit (%g s) reached: %d requests cut (streams ended with an error event, ledger "
                "outcome drain_cutoff)",
                limit,
                cut,
            )
        return cut

    # ---- requests ----------------------------------------------------------------------------------
    async def dispatch(self, request: FrontRequest) -> Reply | FrontStream:
        """The front's handler: the gateway's own endpoints by exact path and method, everything else proxied."""
        found = self.admin.find(request)
        if found is None:
            return await self.proxy.handle(request)
        if isinstance(found, Reply):
            return found
        return await found(request)

    def on_refused(self, reason: str, status: int, request: FrontRequest | None) -> None:
        """The front refused a connection or request: count it, and write a ledger row when a request existed."""
        self.count_refused(reason)
        if request is not None:
            self.sink.write(
                RequestRow(
                    ts=time.time(),
                    request_id=request_id(request.headers.get("x-request-id")),
                    path=request.path,
                    outcome="refused" if status >= 500 else "bad_request",
                    status=status,
                    error=reason,
                )
            )

    def count_refused(self, reason: str) -> None:
        self.metrics.count_refused(reason)

    def connections(self) -> dict[str, int]:
        front = self.front
        if front is None:
            return {}
        return {"open": len(front.conns), "max": front.max_connections, "addresses": len(front.per_peer)}

    # ---- kill switch -------------------------------------------------------------------------------
    def count_new(self, bad: bool, client: str | None = None) -> None:
        now = time.monotonic()
        if bad:
            self.metrics.new_arm_bad.inc()
        if self.killswitch.record(now, bad, client):
            self.metrics.kill_switch_trips.inc()
            self._save_latch()
            self._publish_config()
            log.error(
                "KILL SWITCH tripped, weight latched to 0 until `switchover gateway reset`: %s", self.killswitch.reason
            )
        snap = self.killswitch.snapshot(now)
        self.metrics.kill_switch_ratio.set(float("nan") if snap.ratio is None else snap.ratio)

    def _save_latch(self) -> None:
        try:
            self.latch_file.save(self.killswitch.latched, self.killswitch.reason)
        except OSError as exc:
            log.error("kill-switch state could not be saved to %s: %s", self.latch_file.path, exc.strerror or exc)

    def reset_kill_switch(self) -> None:
        self.killswitch.reset()
        self._save_latch()
        self._publish_config()
        log.warning("kill switch reset: new arm back at weight %g", self.live.gw.weight)

    # ---- config and reload -------------------------------------------------------------------------
    def _file_sig(self) -> tuple[int, int, int] | None:
        if self.config_path is None:
            return None
        try:
            st = self.config_path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_ino, st.st_size)

    def _publish_config(self) -> None:
        g = self.live.gw
        self.metrics.weight.set(g.weight)
        killed = self.killswitch.latched
        self.metrics.effective_weight.set(0 if (g.rollback or killed) else threshold(g.weight) / 100)
        self.metrics.kill_switch.set(1 if killed else 0)

    def reload(self) -> bool:
        """Re-read the config file; an invalid one is rejected (logged) and the running config kept."""
        if self.config_path is None:
            return False
        try:
            live = resolve_live(load_migration(self.config_path), self.config_path)
        except Exception as exc:  # any problem keeps the running config
            msg = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            log.error("config reload rejected, keeping the running config: %s", msg)
            self.metrics.child(self.metrics.reloads, "rejected").inc()
            return False
        old, self.live = self.live.gw, live
        g = live.gw
        ks = g.kill_switch
        self.killswitch.configure(
            ks.window, ks.min_samples, ks.max_fallback_ratio, ks.enabled, client_share=ks.max_client_share
        )
        if (old.listen, old.run_dir, old.tenant_seed_file) != (g.listen, g.run_dir, g.tenant_seed_file):
            log.warning("listen / run_dir / tenant_seed_file changes take effect only after a restart")
        if self.front is not None:
            self.front.limits = g.limits  # new connections get the new limits
        self.budget.limit = g.limits.memory_budget_bytes
        if old.clients != g.clients:
            self._announce_clients(live)
        log.info(
            "config reloaded: weight %g -> %g, rollback %s -> %s, shadow %g%% -> %g%%",
            old.weight,
            g.weight,
            old.rollback,
            g.rollback,
            old.shadow.percent,
            g.shadow.percent,
        )
        self.metrics.child(self.metrics.reloads, "ok").inc()
        self._publish_config()
        return True

    async def _flush_ledger(self) -> None:
        while True:
            await asyncio.sleep(LEDGER_FLUSH_S)
            self.ledger.flush()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.live.gw.reload_poll_s)
            sig = self._file_sig()
            if sig != self._sig:
                self._sig = sig
                if sig is None:
                    log.error("config file %s is missing; keeping the running config", self.config_path)
                    self.metrics.child(self.metrics.reloads, "rejected").inc()
                else:
                    self.reload()
