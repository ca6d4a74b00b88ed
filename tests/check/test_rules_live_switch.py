"""The rules of what a live switch shows: the drill's warm-up tail, the binding cap and OOM answers of the bench."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from switchover.bench.capbind import StepLimit
from switchover.check.judging import Limits
from switchover.check.rules_live_switch import binding_cap, oom_rate, warmup_tail
from switchover.warmup import Warmup


def _ev(**kw: Any) -> Any:
    base = {"rollback": None, "bench": None, "bench_dir": "b", "parts": {},
            "why_missing": lambda part: f"{part} not run"}
    return SimpleNamespace(**{**base, **kw})


def _drill(warmup: Warmup | None, ok: bool = True, switch_s: float | None = None) -> Any:
    return SimpleNamespace(drill=SimpleNamespace(ok=ok, warmup=warmup, switch_s=switch_s))


LIM = Limits(max_error_rate=0.01, max_regression_pct=20, structured_drop=0.05, longest_input_tolerance=0.0,
             tokenizer_shift_pct=5)


def test_a_settled_warm_up_is_go_with_the_tail_and_the_switch_time() -> None:
    w = Warmup(steady=True, tail_s=0.24, tail_requests=3, steady_ttft_ms=78, first_ttft_ms=127, probes=10,
               reason="steady at 78 ms")
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
    return StepLimit(endpoint=side, bucket="128", step=step, repeat=0, load=f"c={2 ** step}", binding=binding,  # type: ignore[arg-type]
                     detail="", scrapes=3, requests=20, oom=oom, engine_dead=dead,
                     oom_texts=["Context size has been exceeded."] if oom else [])


def _bench(limits: list[StepLimit]) -> Any:
    return SimpleNamespace(limits=limits, endpoints=[SimpleNamespace(label="old", engine="vllm"),
                                                     SimpleNamespace(label="new", engine="llamacpp")])


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
