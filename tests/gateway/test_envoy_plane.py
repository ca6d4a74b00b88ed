"""The Envoy data plane running for real on loopback (Envoy 1.40 before two fake engines, bounded): `switchover
gateway` with data_plane: envoy keeps one Envoy process in step with the file (weight, rollback, SIGHUP), trips
and resets the kill switch, answers `gateway state` / `gateway reset` through Envoy, writes a ledger row for every
request, and a second Envoy reading the same rendered files puts every tenant on the same arm."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from switchover.gateway.envoy.render import XdsFiles
from switchover.gateway.ledger import ledger_files
from switchover.rollout.driver import apply_to_gateway
from switchover.subproc import stop
from switchover.testbed.processes import free_port
from switchover.testing import FakeEngine, wait_until
from tests.export.test_envoy import _envoy

SRC = str(Path(__file__).resolve().parents[2] / "src")


@dataclass
class Plane:
    proc: subprocess.Popen
    url: str
    admin: int
    config: Path
    run_dir: Path
    old: FakeEngine
    new: FakeEngine

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": SRC}
        return subprocess.run(
            [sys.executable, "-m", "switchover", *args, "--config", str(self.config)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )

    def envoy_pid(self) -> int:
        return json.loads(self.cli("gateway", "state", "--json").stdout)["envoy"]["pid"]


def post(url: str, tenant: str) -> tuple[int, str]:
    req = urllib.request.Request(
        url + "/v1/completions",
        data=b'{"prompt": "hi"}',
        headers={"x-team": tenant, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())["model"]
    except urllib.error.HTTPError as exc:
        return exc.code, "error"


def start_plane(cfg: Path, run_dir: Path) -> subprocess.Popen[bytes]:
    """`switchover gateway --config cfg` with the Envoy plane, once it has written run_dir/gateway.json (stopped and
    failed loudly when it exits first)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "switchover", "gateway", "--config", str(cfg)],
        env={**os.environ, "PYTHONPATH": SRC},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: proc.poll() is not None or (run_dir / "gateway.json").exists(), 60, "the plane's start")
        assert proc.poll() is None, f"switchover gateway exited with {proc.returncode}"
    except BaseException:
        stop(proc)
        raise
    return proc


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for f in ledger_files(run_dir) for line in f.read_text().splitlines() if line]


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[Plane]:
    binary = _envoy()
    old, new = FakeEngine("old", model="old"), FakeEngine("new", model="new")
    with old.in_thread(), new.in_thread():
        port, admin = free_port(), free_port()
        cfg = tmp_path / "switchover.yaml"
        cfg.write_text(f"""\
old: {{url: {old.url}, engine: vllm}}
new: {{url: {new.url}, engine: vllm}}
gateway:
  data_plane: envoy
  weight: 30
  rollback: false
  tenant_header: x-team
  reload_poll_s: 0.1
  listen: {{port: {port}}}
  envoy: {{binary: {binary}, admin_port: {admin}, concurrency: 1}}
  kill_switch: {{min_samples: 10, max_fallback_ratio: 0.5}}
  drain_seconds: 2
  run_dir: run
""")
        run_dir = tmp_path / "run"
        proc = start_plane(cfg, run_dir)
        try:
            yield Plane(proc, f"http://127.0.0.1:{port}", admin, cfg, run_dir, old, new)
        finally:
            stop(proc)


def test_weight_rollback_and_sighup_reach_envoy_without_a_restart(plane: Plane) -> None:
    pid = plane.envoy_pid()
    first = {t: post(plane.url, f"t{t}")[1] for t in range(60)}
    assert set(first.values()) == {"old", "new"}
    apply_to_gateway(plane.config, weight=60, rollback=False)  # what `switchover rollout` writes
    wait_until(
        lambda: sum(post(plane.url, f"t{t}")[1] == "new" for t in range(60)) > list(first.values()).count("new"),
        5,
        "weight 60 in Envoy",
    )
    second = {t: post(plane.url, f"t{t}")[1] for t in range(60)}
    assert all(second[t] == "new" for t, arm in first.items() if arm == "new")  # tenants only move old -> new
    apply_to_gateway(plane.config, weight=60, rollback=True)
    wait_until(lambda: all(post(plane.url, f"t{t}")[1] == "old" for t in range(20)), 5, "rollback in Envoy")
    # an edit the poll cannot see (same size, mtime restored) is applied on SIGHUP
    st = plane.config.stat()
    text = plane.config.read_text()
    edited = text.replace("weight: 60", "weight: 6").replace("rollback: true", "rollback: false")
    assert len(edited) == len(text)
    plane.config.write_text(edited)
    os.utime(plane.config, ns=(st.st_atime_ns, st.st_mtime_ns))
    plane.proc.send_signal(signal.SIGHUP)
    # 6 % of 200 tenants: none on new has a chance of 0.94^200 (4e-6)
    wait_until(lambda: any(post(plane.url, f"t{t}")[1] == "new" for t in range(200)), 5, "SIGHUP reload")
    assert plane.envoy_pid() == pid  # one Envoy process throughout


def test_kill_switch_trips_within_a_second_and_reset_reopens_through_envoy(plane: Plane) -> None:
    apply_to_gateway(plane.config, weight=100, rollback=False)
    wait_until(lambda: post(plane.url, "a")[1] == "new", 5, "weight 100")
    plane.new.script(weights={"status:503": 1})
    sent = 0
    tripped_at = None
    while tripped_at is None and sent < 200:
        assert post(plane.url, f"t{sent}") == (200, "old")  # 503 on new falls back to old
        sent += 1
        if (plane.run_dir / "killswitch.json").exists() and json.loads((plane.run_dir / "killswitch.json").read_text())[
            "latched"
        ]:
            tripped_at = time.monotonic()
    assert tripped_at is not None, "the kill switch never tripped"

    def spared_new() -> bool:
        before = plane.new.stats.requests
        post(plane.url, "probe")
        return plane.new.stats.requests == before

    wait_until(spared_new, 1.0, "a request that new no longer sees, within 1 s of the trip")
    assert time.monotonic() - tripped_at < 1.0
    served_new_before = plane.new.stats.requests
    for t in range(20):
        post(plane.url, f"x{t}")
    assert plane.new.stats.requests == served_new_before  # nothing reaches new once latched
    state = json.loads(plane.cli("gateway", "state", "--json").stdout)
    assert state["kill_switch"]["latched"] and state["data_plane"] == "envoy" and state["limits"]
    shown = plane.cli("gateway", "state").stdout
    assert "LATCHED" in shown and "data plane envoy" in shown and "mid-stream failure" in shown
    plane.new.script()
    done = plane.cli("gateway", "reset")
    assert done.returncode == 0 and "was latched" in done.stdout
    wait_until(lambda: post(plane.url, "a")[1] == "new", 5, "new back after reset")


def test_every_request_has_a_ledger_row_and_the_admin_needs_the_token(plane: Plane, tmp_path: Path) -> None:
    for t in range(50):
        assert post(plane.url, f"t{t}")[0] == 200
    assert post(plane.url + "/v1/../admin", "t")[0] in (400, 404)
    req = urllib.request.Request(
        plane.url + "/admin/state", headers={"x-switchover-admin": "wrong", "x-switchover-peer": "127.0.0.1"}
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 403
    wait_until(
        lambda: len([r for r in rows(plane.run_dir) if r["path"] == "/v1/completions"]) >= 50, 5, "50 ledger rows"
    )
    got = [r for r in rows(plane.run_dir) if r["path"] == "/v1/completions"]
    assert len(got) == 50 and {r["arm"] for r in got} == {"old", "new"}
    assert len({r["request_id"] for r in got}) == 50
    plane.proc.send_signal(signal.SIGTERM)
    assert plane.proc.wait(30) == 0
    assert not (plane.run_dir / "gateway.json").exists()


def test_two_envoys_reading_the_same_files_agree_on_every_tenant(plane: Plane, tmp_path: Path) -> None:
    files = XdsFiles(str(plane.run_dir / "envoy"))
    admin2 = free_port()
    boot = tmp_path / "replica.yaml"
    boot.write_text(yaml.safe_dump(files.bootstrap(admin2, "replica-2")))
    replica = subprocess.Popen(
        [_envoy(), "-c", str(boot), "--concurrency", "1", "-l", "error", "--base-id", "7"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def served(admin: int) -> int:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{admin}/stats?filter=http.switchover.downstream_rq_total$", timeout=2
        ) as r:
            return int(r.read().decode().rsplit(":", 1)[1])

    try:
        wait_until(lambda: replica.poll() is not None or _ready(admin2), 30, "the replica's /ready")
        assert replica.poll() is None
        seen: dict[str, set[str]] = {}
        for _ in range(4):  # a new connection per request: the kernel spreads them over both (SO_REUSEPORT)
            for t in range(40):
                seen.setdefault(f"t{t}", set()).add(post(plane.url, f"t{t}")[1])
        assert served(admin2) > 10 and served(plane.admin) > 10  # both replicas answered
        assert all(len(arms) == 1 for arms in seen.values()), "a tenant got different arms from the two replicas"
    finally:
        stop(replica)


def _ready(admin: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin}/ready", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def test_envoy_stops_when_the_plane_process_is_killed(plane: Plane) -> None:
    pid = plane.envoy_pid()
    plane.proc.kill()  # SIGKILL: the plane cannot drain or stop Envoy itself
    plane.proc.wait(10)

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().split(") ", 1)[1].startswith("Z")  # exited, not yet reaped

    wait_until(gone, 10, "envoy's exit after the plane was killed")


def _stream(url: str, fault: str) -> tuple[int, bytes]:
    body = json.dumps({"prompt": "hi", "stream": True, "max_tokens": 4}).encode()
    req = urllib.request.Request(
        url + "/v1/completions",
        data=body,
        headers={"x-team": "t", "Content-Type": "application/json", "X-Fault": fault},
    )
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (OSError, http.client.HTTPException) as exc:  # the stream was cut
        return -1, getattr(exc, "partial", b"") or b""


def test_sigterm_drains_a_running_stream_to_its_end(plane: Plane) -> None:
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(_stream, plane.url, "drip:300")
        wait_until(lambda: plane.old.stats.in_flight + plane.new.stats.in_flight > 0, 5, "the stream under way")
        plane.proc.send_signal(signal.SIGTERM)
        status, body = running.result(30)
    assert status == 200 and body.rstrip().endswith(b"data: [DONE]")
    assert plane.proc.wait(30) == 0
    assert [r["outcome"] for r in rows(plane.run_dir)] == ["ok"]


def test_a_stream_cut_mid_way_reaches_the_client_cut_and_the_ledger_says_so(plane: Plane) -> None:
    status, body = _stream(plane.url, "die_mid:2")
    # the client has the first events and then a cut; no SSE error event: Envoy ends the stream as it is
    assert status == -1 and b"data: " in body and b"[DONE]" not in body
    wait_until(lambda: rows(plane.run_dir), 5, "the row")
    row = rows(plane.run_dir)[-1]
    assert row["outcome"] == "failed_mid_stream" and row["stream"] is True
    # the try itself is in the failed-tries log, with Envoy's own flags for it
    tries = plane.run_dir / "envoy" / "tries.log"
    wait_until(lambda: tries.exists() and row["request_id"] in tries.read_text(), 5, "the failed try's line")
    (failed,) = [json.loads(x) for x in tries.read_text().splitlines() if row["request_id"] in x]
    assert failed["flags"] not in ("-", ""), failed


def test_mirrored_copies_of_old_routed_requests_become_shadow_rows(plane: Plane) -> None:
    plane.config.write_text(
        plane.config.read_text().replace("  rollback: false\n", "  rollback: false\n  shadow: {percent: 100}\n")
    )
    wait_until(
        lambda: "request_mirror_policies" in (plane.run_dir / "envoy" / "rds.yaml").read_text(),
        5,
        "the mirror in Envoy's routes",
    )
    time.sleep(0.3)  # Envoy reloads rds.yaml on the rename; no signal says when it has
    for t in range(40):
        assert post(plane.url, f"t{t}")[0] == 200

    def shadow_rows() -> list[dict]:
        return [
            json.loads(line)
            for f in ledger_files(plane.run_dir)
            for line in f.read_text().splitlines()
            if '"kind":"shadow"' in line
        ]

    wait_until(
        lambda: len([r for r in rows(plane.run_dir) if r.get("kind", "request") == "request"]) >= 40,
        10,
        "40 request rows",
    )
    requests = [r for r in rows(plane.run_dir) if r.get("kind", "request") == "request"]
    on_old = {r["request_id"] for r in requests if r["routed"] == "old"}
    assert 0 < len(on_old) < 40
    wait_until(lambda: len(shadow_rows()) >= len(on_old), 10, "a shadow row for every old-routed request")
    shadows = shadow_rows()
    assert {s["request_id"] for s in shadows} == on_old  # none for the requests new served itself
    assert all(s["routed"] == "old" and s["shadow"].get("status") == 200 for s in shadows), shadows[:2]
    # `shadowed` is set when the copy reached switchover before its primary's log line (most do); never on new's
    assert {r["request_id"] for r in requests if r.get("shadowed")} <= on_old
