"""The rules of what a live switch shows: the drill's warm-up tail, the binding cap and OOM answers of the bench."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from switchover.check.judging import Limits
from switchover.check.rules_live_switch import binding_cap, oom_rate, warmup_tail
from switchover.evidence.bench_caps import StepLimit
from switchover.warmup import Warmup


def _ev(**kw: Any) -> Any:
    base = {
        "rollback": None,
        "bench": None,
        "clients": None,
        "bench_dir": "b",
        "parts": {},
        "why_missing": lambda part: f"{part} not run",
    }
    return SimpleNamespace(**{**base, **kw})


def _drill(warmup: Warmup | None, ok: bool = True, switch_s: float | None = None) -> Any:
    return SimpleNamespace(drill=SimpleNamespace(ok=ok, warmup=warmup, switch_s=switch_s))


LIM = Limits(
    max_error_rate=0.01, max_regression_pct=20, structured_drop=0.05, longest_input_tolerance=0.0, tokenizer_shift_pct=5
)


def test_a_settled_warm_up_is_go_with_the_tail_and_the_switch_time() -> None:
    w = Warmup(
        steady=True,
        tail_s=0.24,
        tail_requests=3,
        steady_ttft_ms=78,
        first_ttft_ms=127,
        probes=10,
        reason="steady at 78 ms",
    )
    j = warmup_tail(_ev(rollback=_drill(w, switch_s=0.37)), LIM)
    assert j.verdict == "go" and not j.warn
    figs = {f.name: f.value for f in j.figures}
    assert figs["drill: stop → old at steady speed"] == 0.37 and figs["drill: probes before steady"] == 3


def test_no_warm_up_or_an_unsettled_one_warns_and_no_rollback_part_is_missing() -> None:
    assert "without --no-warmup" in warmup_tail(_ev(rollback=_drill(None)), LIM).warn[0]
    unsettled = Warmup(steady=False, probes=200, reason="TTFT did not settle")
    j = warmup_tail(_ev(rollback=_drill(unsettled)), LIM)
    assert j.verdict == "warn" and "did not settle" in j.warn[0]
    assert warmup_tail(_ev(), LIM).missing == ["rollback not run"]


def _lim(side: str, step: int, binding: str, oom: int = 0, dead: int = 0) -> StepLimit:
    return StepLimit(
        endpoint=side,
        bucket="128",
        step=step,
        repeat=0,
        load=f"c={2**step}",
        binding=binding,  # type: ignore[arg-type]
        detail="",
        scrapes=3,
        requests=20,
        oom=oom,
        engine_dead=dead,
        oom_texts=["Context size has been exceeded."] if oom else [],
    )


def _bench(limits: list[StepLimit]) -> Any:
    return SimpleNamespace(
        limits=limits,
        endpoints=[SimpleNamespace(label="old", engine="vllm"), SimpleNamespace(label="new", engine="llamacpp")],
    )


def test_a_cap_binding_earlier_on_new_warns_with_the_flag_to_raise() -> None:
    limits = [_lim("old", 0, "none"), _lim("old", 2, "requests"), _lim("new", 0, "none"), _lim("new", 1, "requests")]
    j = binding_cap(_ev(bench=_bench(limits)), LIM)
    assert j.verdict == "warn" and "new's request-count cap binds at c=2, old's first cap at c=4" in j.warn[0]
    later = [_lim("old", 1, "kv_cache"), _lim("new", 1, "none"), _lim("new", 2, "requests")]
    assert binding_cap(_ev(bench=_bench(later)), LIM).verdict == "go"
    assert binding_cap(_ev(bench=_bench([])), LIM).missing  # an older bench: no verdicts, not a pass


def test_oom_answers_only_on_new_are_no_go_on_both_warn_and_none_go() -> None:
    only_new = [_lim("old", 1, "none"), _lim("new", 1, "kv_cache", oom=3)]
    j = oom_rate(_ev(bench=_bench(only_new)), LIM)
    assert j.verdict == "no-go" and "3 time(s), old never; most at c=2 (3/20" in j.nogo[0]
    both = [_lim("old", 1, "none", oom=1), _lim("new", 1, "none", oom=2)]
    assert oom_rate(_ev(bench=_bench(both)), LIM).verdict == "warn"
    dead = [_lim("old", 1, "none"), _lim("new", 1, "none", dead=4)]
    assert "engine died" in oom_rate(_ev(bench=_bench(dead)), LIM).warn[0]
    assert oom_rate(_ev(bench=_bench([_lim("old", 0, "none"), _lim("new", 0, "none")])), LIM).verdict == "go"
    assert oom_rate(_ev(), LIM).missing == ["bench not run"]


def _mix(requests: int, findings: list[Any], old: str | None = "vllm", new: str | None = "llamacpp") -> Any:
    from switchover.rollout.client_defaults import ClientMix

    return ClientMix(
        requests=requests,
        findings=findings,
        old_engine=old,
        new_engine=new,
        notes=[] if old and new else ["an endpoint has no engine profile (engine: openai)"],
    )


def test_client_defaults_warn_per_difference_go_without_and_need_ledger_rows() -> None:
    from switchover.check.rules_live_switch import client_defaults
    from switchover.rollout.client_defaults import Finding

    f = Finding(field="temperature", share=0.4, detail="40% of requests leave temperature unset: ...", source="src")
    j = client_defaults(_ev(clients=_mix(10, [f])), LIM)
    assert j.verdict == "warn" and j.warn == ["40% of requests leave temperature unset: ... (src)"]
    assert client_defaults(_ev(clients=_mix(10, [])), LIM).verdict == "go"
    assert client_defaults(_ev(clients=_mix(0, [])), LIM).verdict == "not-run"
    assert client_defaults(_ev(clients=_mix(10, [], old=None)), LIM).verdict == "not-run"
    assert client_defaults(_ev(), LIM).missing == ["clients not run"]


def test_the_clients_part_reads_the_migration_files_gateway_ledger(tmp_path) -> None:
    from switchover.config import load_migration
    from switchover.ledger_record import ClientSampling, LedgerRecord
    from switchover.rollout.client_defaults import ledger_mix
    from tests.rollout.builders import write_ledger

    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(
        "old: {url: 'http://127.0.0.1:1', engine: vllm}\n"
        "new: {url: 'http://127.0.0.1:2', engine: llamacpp}\ngateway: {run_dir: gw}\n"
    )
    m = load_migration(cfg)
    assert ledger_mix(m, cfg).requests == 0 and "does not exist" in ledger_mix(m, cfg).notes[0]
    row = LedgerRecord(
        ts=1.0,
        request_id="r",
        path="/v1/chat/completions",
        outcome="ok",
        status=200,
        stream=False,
        client=ClientSampling(set=["max_tokens"], max_tokens=8),
    )
    write_ledger(tmp_path / "gw", [row, row])
    mix = ledger_mix(m, cfg)
    assert mix.requests == 2 and {f.field for f in mix.findings} >= {"temperature", "top_k"}
