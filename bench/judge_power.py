"""Power study of the canary judge (issue 24): false alarms under continuous watching and requests to detect a
regression, for the anytime-valid judge (rollout/judge/), today's gates (rollout/gates.py, rollout/compare.py) and a
Kayenta-style Mann-Whitney judge (rollout/judge/kayenta.py), on per-request traces recorded from the test bed's
real engines (bench/data/judge_traces.json, written by bench/judge_traces.py; how it was recorded is in the file).

A rollout is replayed as two arms drawing requests at random (with replacement) from one engine's trace; A/A
rollouts give both arms the same trace, A/B rollouts change the new arm (TPOT x1.05/1.10/1.20; the slowest 2 % of
TPOTs x1.5, a p99-only shift; +1 % errors; +2 % truncations; output length x0.9). The judge is read after every
pair of requests (its p99 test every 20); today's gates at their own schedule, Kayenta first at 50 pairs (its own
advice is at least 50 points per metric) and then every `--tick` pairs (10: close to watching continuously, as the
judge is; a Kayenta read more often needs a higher critical value for the same false-alarm rate, and its
calibration finds it). Kayenta is shown at its 98 % interval and with its critical value calibrated to a
1 % false-alarm rate under the same watching; the judge at its default alpha and calibrated the same way (the
largest alpha whose A/A false-alarm rate stays <= 1 %). Both are calibrated on A/A rollouts drawn with their own
seed and then judged on other rollouts, so calibration and evaluation never share data.

    python bench/judge_power.py [--runs 2000] [--pairs 3000] [--today-runs 100] [--seed 1]

Exit 1 when the issue's targets are not met: every judge gate's A/A false-alarm rate <= 1 % at its default alpha,
and the +10 % TPOT p50 regression detected (p90 of runs) in fewer requests by the calibrated judge than by the
calibrated Kayenta judge, both read at the same ticks.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
from scipy import stats

from switchover.config.rollout import GateName, GateThresholds
from switchover.config.rollout_judge import JudgeConfig
from switchover.rollout.compare import compare_metric
from switchover.rollout.gates import ArmWindow, WindowStats, evaluate
from switchover.rollout.judge import kayenta, sequential
from switchover.rollout.judge.decide import JITTER, bulk_wealth

TRACES = Path(__file__).parent / "data" / "judge_traces.json"
FA_TARGET = 0.01
KAYENTA_FIRST = 50  # Kayenta's first read: its advice of at least 50 points per metric
TAIL_EVERY = 20  # pairs between reads of the judge's p99 test in the study (its other tests: every pair)
TODAY_TICKS = (
    50,
    100,
    150,
    200,
    300,
    400,
    500,
    750,
    1000,
    1500,
    2000,
    2500,
    3000,
    4000,
    5000,
    7500,
    10000,
    15000,
    20000,
)
"""Pairs at which today's gates are read (each read runs compare_metric's ten A/A splits: the slow part)."""
ALPHAS = np.round(np.geomspace(0.001, 0.45, 60), 4)
"""Alphas tried when calibrating the judge (reading another alpha is cheap for the bulk and rate tests)."""
P99_ALPHAS = (0.01, 0.05, 0.2, 0.45)
"""The p99 test recomputes its bounds per alpha: a coarser grid."""
CAL_SEED = 1_000_003
"""Added to --seed for the calibration A/A rollouts, so calibration and evaluation never share a rollout."""
HL_PAIRS = 4000  # random canary - control differences for Kayenta's Hodges-Lehmann estimate (its bound only)


@dataclass
class Trace:
    """One engine's recorded requests: latencies and lengths of the answered ones, flags of all."""

    tpot: np.ndarray
    tokens: np.ndarray
    error: np.ndarray  # every request

    @classmethod
    def of(cls, rows: list[dict[str, object]]) -> Trace:
        ok = [r for r in rows if r.get("ok") and r.get("tpot_ms") is not None and r.get("output_tokens")]
        return cls(
            tpot=np.array([float(r["tpot_ms"]) for r in ok]),  # type: ignore[arg-type]
            tokens=np.array([float(r["output_tokens"]) for r in ok]),  # type: ignore[arg-type]
            error=np.array([not r.get("ok") for r in rows]),
        )


@dataclass
class Arms:
    """One metric's values for every replayed rollout: old and new, runs x pairs."""

    metric: str
    old: np.ndarray
    new: np.ndarray
    kind: str  # latency | length | rate


Scenario = Callable[[Trace, np.random.Generator, int, int], Arms]


def _draw(values: np.ndarray, rng: np.random.Generator, runs: int, pairs: int) -> np.ndarray:
    return values[rng.integers(0, len(values), size=(runs, pairs))]


def tpot_scaled(factor: float) -> Scenario:
    def make(tr: Trace, rng: np.random.Generator, runs: int, pairs: int) -> Arms:
        return Arms("tpot_ms", _draw(tr.tpot, rng, runs, pairs), _draw(tr.tpot, rng, runs, pairs) * factor, "latency")

    return make


def tpot_tail(tr: Trace, rng: np.random.Generator, runs: int, pairs: int) -> Arms:
    """The slowest 2 % of new's TPOTs x1.5: p99 moves, p50 does not."""
    new = _draw(tr.tpot, rng, runs, pairs)
    edge = np.quantile(tr.tpot, 0.98)
    return Arms("tpot_ms", _draw(tr.tpot, rng, runs, pairs), np.where(new > edge, new * 1.5, new), "latency")


def more_flags(field: str, extra: float) -> Scenario:
    """New's requests also fail this way with probability `extra`. Errors start from the trace's own; truncations
    (answers cut short, the fake engine's truncate fault) start from none: the tiny model's answers reach
    max_tokens by design, so the trace's finish_reason says nothing about a cut."""

    def make(tr: Trace, rng: np.random.Generator, runs: int, pairs: int) -> Arms:
        flags = tr.error if field == "error" else np.zeros(1, dtype=bool)
        new = _draw(flags, rng, runs, pairs) | (rng.random((runs, pairs)) < extra)
        return Arms(field, _draw(flags, rng, runs, pairs), new, "rate")

    return make


def tokens_scaled(factor: float) -> Scenario:
    def make(tr: Trace, rng: np.random.Generator, runs: int, pairs: int) -> Arms:
        new = np.round(_draw(tr.tokens, rng, runs, pairs) * factor)
        return Arms("output_tokens", _draw(tr.tokens, rng, runs, pairs), new, "length")

    return make


AA: dict[str, Scenario] = {
    "tpot_ms": tpot_scaled(1.0),
    "output_tokens": tokens_scaled(1.0),
    "error": more_flags("error", 0.0),
    "truncated": more_flags("truncated", 0.0),
}
AB: dict[str, Scenario] = {
    "TPOT p50 +5 %": tpot_scaled(1.05),
    "TPOT p50 +10 %": tpot_scaled(1.10),
    "TPOT p50 +20 %": tpot_scaled(1.20),
    "TPOT p99-only (slowest 2 % x1.5)": tpot_tail,
    "errors +1 %": more_flags("error", 0.01),
    "truncations +2 %": more_flags("truncated", 0.02),
    "output length -10 %": tokens_scaled(0.9),
}


# --- the anytime-valid judge ---------------------------------------------------------------------------------


@dataclass
class JudgeRuns:
    """What the judge's tests need on one metric's replayed rollouts, computed once so any alpha can be read."""

    arms: Arms
    cfg: JudgeConfig
    tail_every: int
    wealth: dict[str, np.ndarray] | None = None  # bulk_ratio's running log-wealths (decide.bulk_wealth)
    tail: tuple[np.ndarray, np.ndarray] | None = None  # p99_ratio's jittered arms

    @classmethod
    def of(cls, a: Arms, cfg: JudgeConfig, tail_every: int) -> JudgeRuns:
        runs = cls(a, cfg, tail_every)
        if a.kind != "rate":
            x, y = sequential.log_pairs(a.old, a.new, counts=a.kind == "length")
            runs.wealth = bulk_wealth(x, y, floor=cfg.shift_floor, two_sided=a.kind == "length")
        if a.kind == "latency":
            jit = np.random.default_rng(1)
            old = a.old * (1 + JITTER * jit.uniform(-1, 1, size=a.old.shape))
            new = a.new * (1 + JITTER * jit.uniform(-1, 1, size=a.new.shape))
            runs.tail = old, new
        return runs

    def tests(self) -> list[str]:
        return {"rate": ["rate_difference"], "length": ["bulk_ratio"]}.get(self.arms.kind, ["bulk_ratio", "p99_ratio"])

    def first(self, test: str, alpha: float) -> np.ndarray:
        """First regress tick per run of one of the judge's tests on this metric, read at this alpha."""
        a, cfg = self.arms, self.cfg
        if test == "rate_difference":
            return sequential.rate_first(a.old, a.new, floor=cfg.rate_floor, alpha=alpha)[0]
        if test == "bulk_ratio":
            assert self.wealth is not None
            return sequential.bulk_first_from(self.wealth, alpha=alpha, two_sided=a.kind == "length")[0]
        assert self.tail is not None
        return sequential.tail_first(*self.tail, floor=cfg.tail_floor, alpha=alpha, every=self.tail_every)[0]


def bulk_on_ticks(runs: JudgeRuns, alpha: float, ticks: np.ndarray) -> np.ndarray:
    """First regress tick per run of the bulk test when it is read only at `ticks` (as Kayenta is)."""
    assert runs.wealth is not None
    thr = math.log(1 / alpha)
    regress = sequential.first_true(runs.wealth["up"][:, ticks - 1] >= thr, ticks)
    ok = sequential.first_true(runs.wealth["below"][:, ticks - 1] >= thr, ticks)
    return np.where(regress <= ok, regress, sequential.NEVER)


def calibrated_on_ticks(runs: JudgeRuns, ticks: np.ndarray) -> float:
    """calibrated_alpha for the one-sided bulk test read only at `ticks`."""
    best = float(ALPHAS[0])
    for alpha in ALPHAS:
        if (bulk_on_ticks(runs, float(alpha), ticks) != sequential.NEVER).mean() > FA_TARGET:
            break
        best = float(alpha)
    return best


def calibrated_alpha(runs: JudgeRuns, test: str) -> float:
    """The largest alpha on the grid whose false-alarm rate on these A/A rollouts, watched at every tick, is <= 1 %
    (the judge calibrated as Kayenta is: on A/A rollouts kept apart from those it is then judged on)."""
    grid = P99_ALPHAS if test == "p99_ratio" else ALPHAS
    best = float(grid[0])
    for alpha in grid:
        if (runs.first(test, float(alpha)) != sequential.NEVER).mean() > FA_TARGET:
            break
        best = float(alpha)
    return best


# --- Kayenta-style (Mann-Whitney interval, vectorised over runs) ---------------------------------------------


def kayenta_z(a: Arms, ticks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per run and tick, Kayenta's statistic: the Mann-Whitney z of (new - 0.25 |HL|) against old ('High' when it
    exceeds the interval's critical value; kayenta.classify, one run at a time, gives the same answer). Output
    length is judged either way (Kayenta's direction Either): the larger of the High and the Low statistic."""
    runs = a.old.shape[0]
    old, new = a.old.astype(float), a.new.astype(float)
    z = np.zeros((runs, len(ticks)))
    for j, t in enumerate(ticks):
        i1, i2 = rng.integers(0, t, size=HL_PAIRS), rng.integers(0, t, size=HL_PAIRS)
        bound = kayenta.FRACTION * np.abs(np.median(new[:, i2] - old[:, i1], axis=1))
        z[:, j] = _mw_z(old[:, :t], new[:, :t] - bound[:, None])
        if a.kind == "length":
            z[:, j] = np.maximum(z[:, j], -_mw_z(old[:, :t], new[:, :t] + bound[:, None]))
    return z


def _mw_z(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Row-wise Mann-Whitney z of new against old (normal approximation, tie-corrected)."""
    t = old.shape[1]
    comb = np.concatenate([old, new], axis=1)
    u = stats.rankdata(comb, axis=1)[:, t:].sum(axis=1) - t * (t + 1) / 2
    var = t * t / 12 * ((2 * t + 1) - _tie_term(comb) / (2 * t * (2 * t - 1)))
    return np.where(var > 0, (u - t * t / 2) / np.sqrt(np.maximum(var, 1e-300)), 0.0)


def _tie_term(comb: np.ndarray) -> np.ndarray:
    """Per row, sum over tied groups of (c^3 - c)."""
    s = np.sort(comb, axis=1)
    rows = s.shape[0]
    start = np.ones_like(s, dtype=bool)
    start[:, 1:] = s[:, 1:] != s[:, :-1]
    group = np.cumsum(start.ravel()) - 1
    counts = np.bincount(group).astype(float)
    row_of_group = np.repeat(np.arange(rows), start.sum(axis=1))
    return np.bincount(row_of_group, weights=counts**3 - counts, minlength=rows)


# --- today's gates (the code the rollout runs) ---------------------------------------------------------------


def today_first(a: Arms, ticks: np.ndarray, th: GateThresholds) -> np.ndarray:
    """First tick at which today's gate for this metric fails: the shadow distribution test (compare_metric) for
    TPOT, output length and finish_reason, the TPOT p99 ratio gate, the error-rate gate."""
    runs = a.old.shape[0]
    first = np.full(runs, sequential.NEVER)
    for i in range(runs):
        for t in ticks:
            if _today_fails(a, i, int(t), th):
                first[i] = t
                break
    return first


def _today_fails(a: Arms, i: int, t: int, th: GateThresholds) -> bool:
    old, new = a.old[i, :t], a.new[i, :t]
    if a.metric == "error":
        stats_ = WindowStats(source="ledger", window_s=t, new=ArmWindow(requests=t, errors=int(new.sum())))
        return evaluate(stats_, [GateName.ERROR_RATE], th)[0].verdict == "fail"
    if a.metric == "truncated":
        label = np.where(old, "length", "stop").tolist(), np.where(new, "length", "stop").tolist()
        return (
            compare_metric(
                "finish_reason",
                label[0],
                label[1],
                alpha=th.alpha,
                noise_margin=th.noise_margin,
                min_samples=th.min_samples,
            ).verdict
            == "differs"
        )
    if a.metric == "tpot_ms":
        p_old, p_new = float(np.percentile(old, 99)), float(np.percentile(new, 99))
        stats_ = WindowStats(
            source="ledger",
            window_s=t,
            old=ArmWindow(tpot_p99_ms=p_old, tpot_n=t),
            new=ArmWindow(tpot_p99_ms=p_new, tpot_n=t, requests=t),
        )
        if evaluate(stats_, [GateName.TPOT_P99_RATIO], th)[0].verdict == "fail":
            return True
    return (
        compare_metric(
            a.metric,
            old.tolist(),
            new.tolist(),
            alpha=th.alpha,
            noise_margin=th.noise_margin,
            min_samples=th.min_samples,
        ).verdict
        == "differs"
    )


# --- summary -------------------------------------------------------------------------------------------------


def n_text(first: np.ndarray, pairs: int, q: float) -> str:
    v = np.quantile(np.where(first == sequential.NEVER, np.inf, first), q, method="inverted_cdf")
    return f">{pairs}" if math.isinf(v) else f"{math.ceil(v)}"


def rate_text(first: np.ndarray) -> str:
    k = int((first != sequential.NEVER).sum())
    return f"{k / len(first):.2%} ({k}/{len(first)})"


def on_grid(first: np.ndarray, tick: int) -> np.ndarray:
    """A judge's first tick rounded up to the ticks another gate is read at (for a like-for-like comparison)."""
    return np.where(first == sequential.NEVER, first, np.ceil(first / tick).astype(np.int64) * tick)


def p90(first: np.ndarray) -> float:
    return float(np.quantile(np.where(first == sequential.NEVER, np.inf, first), 0.9, method="inverted_cdf"))


@dataclass
class Study:
    """The parsed command line and what every section shares."""

    args: argparse.Namespace
    traces: dict[str, Trace]
    cfg: JudgeConfig
    th: GateThresholds
    ticks: np.ndarray
    today_ticks: np.ndarray
    crit98: float

    def head(self, a: Arms, n: int) -> Arms:
        return Arms(a.metric, a.old[:n], a.new[:n], a.kind)


@dataclass
class Calibration:
    """Per gate, the judge's calibrated alpha and Kayenta's calibrated critical value (from the calibration A/A
    rollouts), and the judge's measured A/A rate at its default alpha (from the evaluation A/A rollouts)."""

    judge_alpha: dict[tuple[str, str], float]
    kayenta_crit: dict[str, float]
    tpot_on_ticks: float  # the TPOT bulk test's calibrated alpha when it is read only at Kayenta's ticks
    judge_fa: dict[tuple[str, str], float]
    kayenta_peak: dict[str, np.ndarray]


def calibrate(st: Study) -> Calibration:
    """Both judges calibrated the same way on A/A rollouts drawn with their own seed (--seed + CAL_SEED)."""
    rng = np.random.default_rng(st.args.seed + CAL_SEED)
    tr = st.traces[st.args.engine]
    cal = Calibration({}, {}, 0.0, {}, {})
    for metric, make in AA.items():
        a = make(tr, rng, st.args.runs, st.args.pairs)
        runs = JudgeRuns.of(a, st.cfg, TAIL_EVERY)
        for test in runs.tests():
            cal.judge_alpha[(metric, test)] = calibrated_alpha(runs, test)
        if metric == "tpot_ms":
            cal.tpot_on_ticks = calibrated_on_ticks(runs, st.ticks)
        z = kayenta_z(a, st.ticks, rng)  # as many calibration rollouts as the judge's: calibrated the same way
        # Kayenta at its own 98 % unless that, watched at every tick, alarms on more than 1 % of A/A rollouts
        cal.kayenta_crit[metric] = max(st.crit98, float(np.quantile(z.max(axis=1), 1 - FA_TARGET)))
    return cal


def aa_section(st: Study, cal: Calibration, rng: np.random.Generator) -> bool:
    """A/A rollouts (their own draws, not the calibration's): every gate's false alarms; True when the judge's
    default gates all stay <= 1 %."""
    ok = True
    print("A/A (false alarms under continuous watching; target <= 1 % per rollout per gate). judge: alpha 0.01,")
    print("the default; judge cal.: at its calibrated alpha; Kayenta cal.: at its calibrated critical value (both")
    print(f"calibrated on other A/A rollouts, seed {st.args.seed} + {CAL_SEED}, so these rates are out of sample)")
    print(
        f"{'trace':13} {'gate':28} {'judge':>16} {'judge cal.':>22} {'Kayenta 98 %':>16} {'Kayenta cal.':>16} "
        f"{'today':>14}"
    )
    for engine, tr in st.traces.items():
        for metric, make in AA.items():
            a = make(tr, rng, st.args.runs, st.args.pairs)
            runs = JudgeRuns.of(a, st.cfg, TAIL_EVERY)
            for test in runs.tests():
                first = runs.first(test, st.cfg.alpha)
                fa = float((first != sequential.NEVER).mean())
                ok &= fa <= FA_TARGET
                cal_cell = ""
                if engine == st.args.engine:
                    cal.judge_fa[(metric, test)] = fa
                    alpha = cal.judge_alpha[(metric, test)]
                    cal_cell = f"{rate_text(runs.first(test, alpha))} a={alpha:g}"
                print(f"{engine:13} {metric + ' ' + test:28} {rate_text(first):>16} {cal_cell:>22}")
                if engine == st.args.engine and (metric, test) == ("tpot_ms", "bulk_ratio"):
                    on = bulk_on_ticks(runs, cal.tpot_on_ticks, st.ticks)
                    cell = f"{rate_text(on)} a={cal.tpot_on_ticks:g}"
                    print(f"{'':13} {'  read on Kayenta ticks':28} {'':>16} {cell:>22}")
            if engine != st.args.engine:
                continue
            z = kayenta_z(st.head(a, st.args.kayenta_runs), st.ticks, rng)
            cal.kayenta_peak[metric] = z.max(axis=1)
            k98 = np.where((z > st.crit98).any(axis=1), 1, sequential.NEVER)
            kcal = np.where((z > cal.kayenta_crit[metric]).any(axis=1), 1, sequential.NEVER)
            td = today_first(st.head(a, st.args.today_runs), st.today_ticks, st.th)
            crit = f"z>{cal.kayenta_crit[metric]:.2f}"
            print(
                f"{engine:13} {metric + ' (Kayenta, today)':28} {'':>16} {'':>22} {rate_text(k98):>16} "
                f"{rate_text(kcal) + ' ' + crit:>16} {rate_text(td):>14}"
            )
    return ok


def ab_section(st: Study, cal: Calibration, rng: np.random.Generator) -> bool:
    """A/B rollouts: requests to detect each regression; True when the calibrated judge beats calibrated Kayenta
    on the +10 % TPOT p50 regression (p90 of runs, on Kayenta's ticks)."""
    args, beat = st.args, False
    print("\nA/B: requests per arm to detect (median / p90 of rollouts; >N: not within the rollout)")
    print(
        f"{'regression':33} {'judge test':15} {'judge':>12} {'judge cal.':>12} {'Kayenta 98 %':>12} "
        f"{'Kayenta cal.':>12} {'today':>12}"
    )
    for name, make in AB.items():
        a = make(st.traces[args.engine], rng, args.runs, args.pairs)
        runs = JudgeRuns.of(a, st.cfg, TAIL_EVERY)
        test = "p99_ratio" if "p99" in name else runs.tests()[0]
        first, first_cal = runs.first(test, st.cfg.alpha), runs.first(test, cal.judge_alpha[(a.metric, test)])
        z = kayenta_z(st.head(a, args.kayenta_runs), st.ticks, rng)
        k_cal = sequential.first_true(z > cal.kayenta_crit[a.metric], st.ticks)
        k98 = sequential.first_true(z > st.crit98, st.ticks)
        td = today_first(st.head(a, args.today_runs), st.today_ticks, st.th)

        def cell(f: np.ndarray) -> str:
            return f"{n_text(f, args.pairs, 0.5)} / {n_text(f, args.pairs, 0.9)}"

        print(
            f"{name:33} {test:15} {cell(first):>12} {cell(first_cal):>12} {cell(k98):>12} {cell(k_cal):>12} "
            f"{cell(td):>12}"
        )
        if name != "TPOT p50 +10 %":
            continue
        like = bulk_on_ticks(runs, cal.tpot_on_ticks, st.ticks)
        mine, theirs = p90(like), p90(k_cal)
        beat = mine < theirs
        print(
            f"{'':33} TARGET, calibrated vs calibrated, like for like (both read every {args.tick} pairs, each at its "
            f"largest alpha / smallest critical value with <= 1 % false alarms on the calibration A/A rollouts): "
            f"judge {cell(like)} vs Kayenta cal. {cell(k_cal)}; p90 {mine:g} vs {theirs:g} -> "
            f"{'fewer' if beat else 'NOT fewer'}"
        )
        print(
            f"{'':33} judge cal. read after every pair: p90 {p90(first_cal):g} requests; rounded up to Kayenta's "
            f"ticks {p90(on_grid(first_cal, args.tick)):g} vs Kayenta cal. {theirs:g}"
        )
        mine0, theirs0 = p90(on_grid(first, args.tick)), p90(k98)
        print(
            f"{'':33} default vs default, p90 on Kayenta's ticks: judge (alpha {st.cfg.alpha:g}) {mine0:g} vs "
            f"Kayenta 98 % {theirs0:g} -> {'fewer' if mine0 < theirs0 else 'NOT fewer'}"
        )
        # the same false-alarm rate read literally: Kayenta held to the default judge's own measured A/A rate
        fa, peak = cal.judge_fa[("tpot_ms", test)], cal.kayenta_peak["tpot_ms"]
        same = max(st.crit98, float(np.quantile(peak, 1 - fa))) if fa > 0 else float(peak.max())
        k_same = sequential.first_true(z > same, st.ticks)
        print(f"{'':33} Kayenta held to the default judge's A/A rate ({fa:.1%}): {cell(k_same)}")
    return beat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=Path, default=TRACES)
    ap.add_argument("--engine", default="llama_server", help="the trace replayed for the A/B rollouts")
    ap.add_argument("--runs", type=int, default=1000, help="rollouts per scenario for the judge and Kayenta")
    ap.add_argument("--kayenta-runs", type=int, default=500)
    ap.add_argument("--today-runs", type=int, default=30, help="today's gates are slow: fewer rollouts")
    ap.add_argument("--pairs", type=int, default=3000, help="requests per arm in one rollout")
    ap.add_argument(
        "--tick", type=int, default=10, help=f"pairs between reads of Kayenta (the first at {KAYENTA_FIRST} pairs)"
    )
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not (100 <= args.pairs <= 20_000 and 10 <= args.runs <= 100_000 and 10 <= args.tick <= args.pairs):
        ap.error("--pairs 100-20000, --runs 10-100000, --tick 10..pairs")
    doc = orjson.loads(args.traces.read_bytes())
    traces = {k: Trace.of(v) for k, v in doc["traces"].items()}
    if args.engine not in traces:
        ap.error(f"--engine must be one of {', '.join(traces)}")
    th = GateThresholds()
    st = Study(
        args=args,
        traces=traces,
        cfg=JudgeConfig(enabled=True),
        th=th,
        ticks=np.arange(max(KAYENTA_FIRST, args.tick), args.pairs + 1, args.tick),
        today_ticks=np.array([t for t in TODAY_TICKS if th.min_samples <= t <= args.pairs]),
        crit98=float(stats.norm.ppf(0.5 + kayenta.CONF_LEVEL / 2)),
    )
    started = time.monotonic()
    print(f"traces: {doc['how']}; recorded {doc['recorded']}")
    for name, tr in traces.items():
        print(
            f"  {name}: {len(tr.error)} requests, TPOT p50 {np.median(tr.tpot):.2f} ms p99 "
            f"{np.quantile(tr.tpot, 0.99):.2f} ms, errors {tr.error.mean():.2%}, "
            f"output tokens p50 {np.median(tr.tokens):.0f}"
        )
    cfg = st.cfg
    print(
        f"judge: alpha {cfg.alpha} per test, floors shift {cfg.shift_floor:.0%}, p99 {cfg.tail_floor:.0%}, "
        f"rate {cfg.rate_floor * 100:g} pp; read after every pair (p99 every {TAIL_EVERY}); "
        f"{args.pairs} pairs per rollout."
    )
    print(
        f"Kayenta read at {st.ticks[0]} pairs, then every {args.tick} ({args.kayenta_runs} rollouts); today's gates at "
        f"{', '.join(str(t) for t in st.today_ticks)} pairs ({args.today_runs} rollouts)\n"
    )
    cal = calibrate(st)
    rng = np.random.default_rng(args.seed)
    ok = aa_section(st, cal, rng)
    ok &= ab_section(st, cal, rng)
    print(f"\n{time.monotonic() - started:.0f} s; targets {'met' if ok else 'NOT met'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
