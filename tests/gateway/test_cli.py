"""`switchover gateway` as a process: SIGHUP reload, a broken file kept out, reset/state, SIGTERM drain."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys

import aiohttp
import orjson
import yaml

from switchover.ledger_files import read_ledger
from switchover.testing import FakeEngine, await_until
from switchover.wire.sse import parse_all
from tests.gateway.conftest import chat

CLI = [sys.executable, "-m", "switchover"]


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


async def wait_file(path, timeout: float = 20.0) -> bytes:
    await await_until(lambda: path.exists() and path.stat().st_size, timeout, f"{path} to be written")
    return path.read_bytes()


def log_count(run_dir, text: str) -> int:
    path = run_dir / "gateway.log"
    return path.read_text().count(text) if path.exists() else 0


async def test_gateway_process_reloads_resets_and_drains_on_sigterm(tmp_path):
    old, new = FakeEngine("old", model="client-model"), FakeEngine("new", model="client-model")
    async with old.running() as old_url, new.running() as new_url:
        run_dir = tmp_path / "run"
        config = {
            "old": {"url": old_url, "engine": "vllm"},
            "new": {"url": new_url, "engine": "llamacpp"},
            "gateway": {
                "weight": 100,
                "run_dir": "run",
                "listen": {"port": 0},
                "drain_seconds": 10,
                "reload_poll_s": 60,
                "kill_switch": {"min_samples": 2, "max_fallback_ratio": 0.4},
            },
        }
        cfg = tmp_path / "switchover.yaml"
        cfg.write_text(yaml.safe_dump(config))
        proc = subprocess.Popen(
            [*CLI, "gateway", "--config", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            url = orjson.loads(await wait_file(run_dir / "gateway.json"))["url"]
            async with aiohttp.ClientSession() as http:

                async def post(headers=None, stream=False, max_tokens=4):
                    async with http.post(
                        url + "/v1/chat/completions",
                        data=orjson.dumps(chat(stream=stream, max_tokens=max_tokens)),
                        headers=headers or {},
                    ) as r:
                        return r.status, await r.read()

                for _ in range(2):  # trip the kill switch
                    assert (await post({"X-Fault": "status:503", "X-Fault-Arm": "new"}))[0] == 200
                token = (run_dir / "admin.token").read_text()
                async with http.get(url + "/admin/state", headers={"X-Switchover-Admin": token}) as r:
                    assert (await r.json())["kill_switch"]["latched"] is True
                reset = cli("gateway", "reset", "--config", str(cfg))
                assert reset.returncode == 0 and "was latched" in reset.stdout
                state = cli("gateway", "state", "--config", str(cfg))
                assert state.returncode == 0 and "kill switch armed" in state.stdout
                assert "clients passthrough" in state.stdout and "connections" in state.stdout

                config["gateway"]["weight"] = 0  # SIGHUP reload
                cfg.write_text(yaml.safe_dump(config))
                proc.send_signal(signal.SIGHUP)
                await await_until(
                    lambda: log_count(run_dir, "config reloaded: weight 100 -> 0"),
                    10,
                    "the SIGHUP reload in gateway.log",
                )
                await post()
                cfg.write_text("gateway: {weight: lots}\n")  # broken: rejected, still serving
                proc.send_signal(signal.SIGHUP)
                await await_until(
                    lambda: log_count(run_dir, "config reload rejected"),
                    10,
                    "the rejected SIGHUP reload in gateway.log",
                )
                assert (await post())[0] == 200

                streams = [
                    asyncio.ensure_future(post({"X-Fault": "drip:100"}, stream=True, max_tokens=10)) for _ in range(5)
                ]
                await await_until(lambda: old.stats.in_flight == 5, 10, "5 streams in flight on old")
                proc.send_signal(signal.SIGTERM)
                await await_until(lambda: log_count(run_dir, "draining:"), 10, "the SIGTERM drain in gateway.log")
                async with http.get(url + "/ready") as r:
                    assert r.status == 503
                results = await asyncio.gather(*streams)
            assert proc.wait(timeout=15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for status, body in results:  # SIGTERM during streams loses none of them
            assert status == 200 and parse_all([body])[-1].data == b"[DONE]" and b"upstream_error" not in body
        rows = list(read_ledger(run_dir))
        assert [(r.route_reason, r.fallback_reason) for r in rows[:2]] == [("weight", "status_503")] * 2
        assert [(r.arm, r.route_reason) for r in rows[2:4]] == [("old", "weight")] * 2  # SIGHUP: weight 0, kept
        assert sum(r.outcome == "ok" and r.stream for r in rows) == 5
        log = (run_dir / "gateway.log").read_text()
        assert "reload rejected" in log and "KILL SWITCH" in log and "drained" in log
        out = proc.stdout.read() if proc.stdout else ""
        assert "Traceback" not in out
        assert not (run_dir / "gateway.json").exists()


def cli_here(args: list[str], capsys, monkeypatch) -> tuple[int, str]:
    """Run the console entry in-process (the CLI start-up is slow on a loaded machine)."""
    from switchover.cli.app import main

    monkeypatch.setattr(sys, "argv", ["switchover", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_bad_configs_and_no_gateway_give_clean_exit_codes(tmp_path, capsys, monkeypatch):
    code, err = cli_here(["gateway", "--config", str(tmp_path / "nope.yaml")], capsys, monkeypatch)
    assert code == 2 and "no such file" in err and "Traceback" not in err
    base = {"old": {"url": "http://a", "engine": "vllm"}, "new": {"url": "http://b", "engine": "vllm"}}
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump(base))
    code, err = cli_here(["gateway", "--config", str(tmp_path / "plain.yaml")], capsys, monkeypatch)
    assert code == 2 and "gateway" in err
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**base, "gateway": {"weight": 120}}))
    code, err = cli_here(["gateway", "--config", str(tmp_path / "bad.yaml")], capsys, monkeypatch)
    assert code == 2 and "gateway.weight" in err
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({**base, "gateway": {"weight": 1, "run_dir": "r"}}))
    code, err = cli_here(["gateway", "--config", str(tmp_path / "s.yaml"), "reset"], capsys, monkeypatch)
    assert code == 3 and "no running gateway" in err
    code, err = cli_here(["gateway", "state", "--config", str(tmp_path / "s.yaml")], capsys, monkeypatch)
    assert code == 3 and "no running gateway" in err


def test_metrics_adapter_bad_listen_addresses_are_one_line_errors_exit_2():
    import subprocess
    import sys

    for listen in ("127.0.0.1:99999", "127.0.0.1:0", "nohost", "1.2.3.4:9400"):
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "switchover",
                "metrics-adapter",
                "--from",
                "sglang",
                "--to",
                "vllm",
                "--upstream",
                "http://127.0.0.1:9",
                "--listen",
                listen,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 2, (listen, p.stderr)
        assert "--listen" in p.stderr and "Traceback" not in p.stderr


def test_hash_key_prints_a_key_file_line_and_refuses_bad_names():
    import subprocess
    import sys

    from switchover.gateway.clients import digest

    p = subprocess.run(
        [sys.executable, "-m", "switchover", "gateway", "hash-key", "team-a"],
        input="sk-team-a-0123456789abcdef",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and p.stdout == f"team-a sha256:{digest('sk-team-a-0123456789abcdef')}\n"
    p = subprocess.run(
        [sys.executable, "-m", "switchover", "gateway", "hash-key", "team-b", "--generate"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    key = p.stderr.strip().rsplit(" ", 1)[-1]
    assert p.returncode == 0 and key.startswith("sk-gw-") and p.stdout == f"team-b sha256:{digest(key)}\n"
    assert key not in p.stdout  # only the digest goes where `>> keys.txt` sends it
    p = subprocess.run(
        [sys.executable, "-m", "switchover", "gateway", "hash-key", "bad name", "--generate"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "sk-gw-" not in p.stderr and "Traceback" not in p.stderr
