"""`switchover bench` as a user meets it: help, exit codes, one-line errors, JSON."""

from __future__ import annotations

import json
import subprocess
import sys

from switchover.subproc import stop


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchover", "bench", *args], capture_output=True, text=True, timeout=timeout
    )


def test_help_lists_the_working_subcommands():
    r = _run("--help")
    assert r.returncode == 0
    for verb in ("calibrate", "recompute", "report", "sweep"):
        assert verb in r.stdout


def test_unreachable_server_is_one_line_exit_3(tmp_path):
    r = _run("--url", "http://127.0.0.1:1", "--no-calibrate", "--runs-dir", str(tmp_path))
    assert r.returncode == 3
    assert "cannot connect" in r.stderr and "Traceback" not in r.stderr + r.stdout
    assert len(r.stderr.strip().splitlines()) == 1


def test_bad_values_name_the_flag_exit_2(tmp_path):
    r = _run("--url", "http://127.0.0.1:1", "--buckets", "12x")
    assert r.returncode == 2 and "--buckets" in r.stderr
    r = _run("--url", "http://127.0.0.1:1", "--slo", "ttft=5")
    assert r.returncode == 2 and "--slo" in r.stderr
    r = _run("--url", "http://127.0.0.1:1", "--old", "http://127.0.0.1:2")
    assert r.returncode == 2 and "not both" in r.stderr
    r = _run("--url", "http://127.0.0.1:1", "--engine", "nosuch", "--no-calibrate")
    assert r.returncode in (2, 3)


def test_recompute_of_a_missing_run_is_exit_2(tmp_path):
    r = _run("recompute", str(tmp_path / "nope"), "--as", "vllm")
    assert r.returncode == 2 and "no such run directory" in r.stderr


def test_calibrate_json():
    r = _run("calibrate", "--concurrency", "4", "--chunks", "8", "--duration", "0.3", "--in-process", "--json")
    assert r.returncode == 0, r.stderr
    cal = json.loads(r.stdout)
    assert cal["req_per_s"] > 0 and cal["chunks_per_s"] >= cal["req_per_s"]
    assert cal["chunk_stamps"]


def test_full_cli_run_against_zero_work_server_then_recompute_and_report(tmp_path):
    srv = subprocess.Popen(
        [sys.executable, "-m", "switchover.testing", "zero", "--port", "0", "--itl-ms", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert srv.stdout is not None
        port = int(srv.stdout.readline())
        url = f"http://127.0.0.1:{port}"
        r = _run(
            "--old",
            url,
            "--new",
            url,
            "--buckets",
            "24",
            "--output-tokens",
            "8",
            "--concurrency",
            "1,2,3",
            "--requests",
            "5",
            "--no-calibrate",
            "--runs-dir",
            str(tmp_path),
            "--json",
            "--slo",
            "tpot_p99_ms=10000",
        )
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout)
        assert report["passed"] is True and len(report["steps"]) == 6
        assert all(e["chunk_stamps"] for e in report["endpoints"])
        run_dir = report["run_dir"]
        r = _run("recompute", run_dir, "--as", "guidellm", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["steps"][0]["metrics"][0]["name"] == "time_to_first_token_ms"
        r = _run("report", run_dir)
        assert r.returncode == 0 and r.stdout.strip().endswith("report.html")
        r = _run(
            "--url",
            url,
            "--buckets",
            "24",
            "--output-tokens",
            "8",
            "--concurrency",
            "1",
            "--requests",
            "3",
            "--no-calibrate",
            "--runs-dir",
            str(tmp_path),
            "--slo",
            "ttft_p99_ms=0.000001",
        )
        assert r.returncode == 1 and "checks failed" in r.stderr
        assert "chunk timestamps: " in r.stdout
    finally:
        stop(srv)


def test_config_file_gives_endpoints_and_slos(tmp_path):
    srv = subprocess.Popen(
        [sys.executable, "-m", "switchover.testing", "zero", "--port", "0", "--itl-ms", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert srv.stdout is not None
        url = f"http://127.0.0.1:{int(srv.stdout.readline())}"
        cfg = tmp_path / "switchover.yaml"
        cfg.write_text(
            f"old: {{url: {url}, engine: openai}}\nnew: {{url: {url}, engine: openai}}\n"
            "bench:\n  buckets: [24]\n  output_tokens: 4\n  concurrency: [1, 2, 3]\n  requests: 3\n"
            "  slos: {ttft_p99_ms: 0.000001}\n"
        )
        r = _run("--config", str(cfg), "--no-calibrate", "--runs-dir", str(tmp_path / "runs"), "--json")
        assert r.returncode == 1 and "checks failed" in r.stderr
        report = json.loads(r.stdout)
        assert [e["label"] for e in report["endpoints"]] == ["old", "new"]
        assert report["plan"]["slos"]["ttft_p99_ms"] == 0.000001 and report["passed"] is False
        bad = tmp_path / "bad.yaml"
        bad.write_text(
            f"old: {{url: {url}, engine: openai}}\nnew: {{url: {url}, engine: openai}}\n"
            "bench:\n  buckets: [24]\n  nosuch: 1\n"
        )
        r = _run("--config", str(bad), "--no-calibrate")
        assert r.returncode == 2 and "bench.nosuch" in r.stderr
    finally:
        stop(srv)


def test_the_progress_bar_advances_in_batches_and_counts_every_request():
    from switchover.cli.bench_cmd import _Progress

    class Bar:
        def __init__(self) -> None:
            self.calls: list[int] = []

        def add_task(self, label, total=None):
            return 1

        def remove_task(self, task) -> None:
            pass

        def advance(self, task, n=1) -> None:
            self.calls.append(n)

    bar = Bar()
    prog = _Progress(bar)  # type: ignore[arg-type]
    prog.step_started("step", 300)
    for _ in range(300):
        prog.request_done(True)
    prog._advance()  # what step_done does first
    assert sum(bar.calls) == 300 and len(bar.calls) <= 3  # one bar update per request cost ~1% of a run's CPU
