"""A short real `switchover check` against the test bed (vLLM CPU old, llama-server new, tiny model):
the parts run, the run directory holds their results, and the verdicts follow from the figures measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchover.check.runner import CheckRun
from switchover.cli.common import run
from switchover.config import load_migration
from tests.engines.conftest import Bed

pytestmark = [pytest.mark.engines, pytest.mark.timeout(600)]

CONFIG = """
old: {{url: "{old}", engine: vllm}}
new: {{url: "{new}", engine: llamacpp}}
check:
  probe: {{only: [sampling.defaults, stop.count, usage.stream_include_usage, length.over_context], budget_s: 15}}
  verify: {{max_prompts: 2, structured: 1}}
  bench: {{concurrency: [1, 2], requests: 6, output_tokens: 16}}
  grace: {{max_tokens: 2000, drain_grace_s: 1, client_timeout_s: 3600}}
"""


@pytest.fixture(scope="module")
def checked(bed: Bed, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    d = tmp_path_factory.mktemp("check")
    cfg = d / "switchover.yaml"
    cfg.write_text(CONFIG.format(old=bed.old_url, new=bed.new_url))
    m = load_migration(cfg)
    assert m.check is not None
    report, rd = run(CheckRun(m, m.check, config_path=cfg).run())
    return report, rd


def test_every_enabled_live_part_ran_and_left_its_result(checked) -> None:  # type: ignore[no-untyped-def]
    report, rd = checked
    status = {p.part: p.status for p in report.parts}
    assert status == {
        "plan": "ran",
        "probe": "ran",
        "verify": "ran",
        "live_model": "ran",
        "metrics": "ran",
        "diff_model": "disabled",
        "bench": "ran",
        "grace": "ran",
        "rollback": "ran",
        "clients": "ran",
    }, report.parts
    for name in (
        "probe.json",
        "verify.json",
        "live_model.json",
        "metrics.json",
        "grace.json",
        "rollback.json",
        "check.json",
        "report.html",
        "report.md",
    ):
        assert rd.has(name), name
    bench_dirs = [p for p in Path(rd.path).iterdir() if p.is_dir() and (p / "requests.parquet").exists()]
    assert len(bench_dirs) == 1
    rollback = next(i for i in report.items if i.id == "rollout.rollback")
    assert rollback.verdict == "warn" and "no drill" in rollback.reason  # before 100 %: time the way back first


def test_same_model_on_both_engines_tokenizes_alike(checked) -> None:  # type: ignore[no-untyped-def]
    report, _ = checked
    item = next(i for i in report.items if i.id == "model.tokenizer")
    assert item.verdict == "go", item.reason  # the bed serves the same tokenizer on both engines


def test_a_one_second_grace_is_no_go_with_the_measured_tpot(checked) -> None:  # type: ignore[no-untyped-def]
    report, rd = checked
    item = next(i for i in report.items if i.id == "rollout.grace")
    assert item.verdict == "no-go", item.reason
    g = rd.read_json("grace")
    assert g["tpot_p99_ms"] > 0 and g["need"]["required_s"] > 1  # 2000 tokens at any real TPOT take > 1 s
    tpot = next(f for f in item.evidence if f.name.startswith("TPOT p99"))
    assert tpot.value == g["tpot_p99_ms"]


def test_kv_cache_verdict_follows_the_longest_inputs_measured(checked) -> None:  # type: ignore[no-untyped-def]
    report, _ = checked
    item = next(i for i in report.items if i.id == "engine.kv_cache")
    figs = {f.name: f.value for f in item.evidence}
    old, new = figs["old: longest input served"], figs["new: longest input served"]
    assert isinstance(old, int) and isinstance(new, int)
    shorter = new < old * 0.9  # the rule's tolerance (longest_input_tolerance, default 10 %)
    assert (f"NO-GO: new serves at most {new} prompt tokens" in (item.reason or "")) is shorter, item.reason
    assert (f"ok: new serves {new} prompt tokens" in (item.reason or "")) is not shorter, item.reason
    if shorter:
        assert item.verdict == "no-go", item.reason


def test_overall_verdict_matches_the_items(checked) -> None:  # type: ignore[no-untyped-def]
    report, _ = checked
    assert any(i.verdict == "no-go" for i in report.items)  # the bed's engines differ: grace is no-go by design
    assert report.overall == "no-go"
