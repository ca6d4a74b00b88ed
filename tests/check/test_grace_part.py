"""check's grace part takes the bench part's latencies from the report passed in memory (the same figures the run's
summary.json holds), so the bench run is not read back from disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchover.check.parts import grace_part
from switchover.config import load_migration
from tests.check import builders as B

CONFIG = """
old: {url: "http://127.0.0.1:9/v1", engine: vllm}
new: {url: "http://127.0.0.1:9/v1", engine: llamacpp}
check:
  grace: {max_tokens: 2000, drain_grace_s: 30}
"""


def test_the_grace_part_reads_the_bench_report_in_memory_without_its_summary_file(tmp_path: Path) -> None:
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(CONFIG)
    m = load_migration(cfg)
    assert m.check is not None
    bench_dir = tmp_path / "bench-1"  # never written: only the report in memory can give the figures
    report = B.bench([B.step("old", 1, tpot=12.0, ttft=40.0), B.step("new", 1, tpot=20.0, ttft=90.0)])
    ev = grace_part(m, m.check, tmp_path, bench_dir, report)
    assert ev.tpot_p99_ms == pytest.approx(20.0) and ev.ttft_p99_ms == pytest.approx(90.0)
    assert ev.latency_source.startswith("bench bench-1: worst step p99")
    assert ev.need is not None and ev.need.generation_s == pytest.approx(2000 * 20.0 / 1000)


def test_without_a_report_the_grace_part_reads_the_summary_file(tmp_path: Path) -> None:
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(CONFIG)
    m = load_migration(cfg)
    assert m.check is not None
    bench_dir = tmp_path / "bench-2"
    bench_dir.mkdir()
    report = B.bench([B.step("new", 2, tpot=15.0)])
    (bench_dir / "summary.json").write_text(report.model_dump_json())
    ev = grace_part(m, m.check, tmp_path, bench_dir)
    assert ev.tpot_p99_ms == pytest.approx(15.0)
