"""Which cap binds in a bench step (docs/bench.md#binding-cap): the request-count cap (vLLM --max-num-seqs,
llama.cpp slots) or the token budget (vLLM --max-num-batched-tokens, a full KV cache), read from the engine's
/metrics scraped during the step. The advice "raise <flag>" names the flag only where the release data says the
engine has it at the version served.

Per scrape in the step, with requests waiting (the `waiting` gauge > 0):
- the KV cache at or above KV_FULL → the token budget (KV cache) binds;
- running at the request cap → the request cap binds (the cap the server reports where its profile's `request_cap:`
  says it does (llama.cpp /props total_slots), the launch, or, when none is known, the step's peak of `running`,
  said as inferred);
- running below the cap with the KV cache not full → the per-step token budget binds (vLLM schedules at most
  max_num_batched_tokens a step).
The verdict is the reason most scrapes with waiting requests show; no waiting request: nothing bound at this load;
fewer than MIN_SCRAPES readings in the step: not measured (said with the count).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from switchover.bench.oom import StepKey, StepOom, records, step_ooms
from switchover.engines.server_facts import engine_version, request_cap
from switchover.evidence.bench_caps import WORDS, Binding, Scrape, StepLimit, cap_flag, raise_flag

KV_FULL = 0.95  # "near 100 %": a gauge of 0..1 (vllm:kv_cache_usage_perc, llamacpp:kv_cache_usage_ratio)
# a verdict is the majority of a step's readings: below this many it would be the chance of one or two scrapes (on a
# loaded host vLLM CPU's /metrics answered once in 2 s, so a short step held 2-6 scrapes and the verdict flipped)
MIN_SCRAPES = 5


def judge(scrapes: list[Scrape], request_cap: int | None) -> tuple[Binding, str, dict[str, float]]:
    """The binding cap of one step from its scrapes (pure: the table tests drive it); a step with fewer than
    MIN_SCRAPES readings is not measured, not guessed."""
    if scrapes and (all(s.waiting is None for s in scrapes) or all(s.running is None for s in scrapes)):
        return "unknown", "the engine served no running/waiting gauges (see the scrape note)", {}
    scrapes = [s for s in scrapes if s.waiting is not None and s.running is not None]
    if len(scrapes) < MIN_SCRAPES:
        fix = "lengthen the step (--requests, --duration) or shorten --scrape-interval"
        return "unknown", f"not measured: {len(scrapes)} scrapes in the step (< {MIN_SCRAPES} needed); {fix}", {}
    queued = [s for s in scrapes if s.waiting]
    if not queued:
        return "none", "no request waited: neither cap bound at this load", {}
    peak = max(s.running or 0 for s in scrapes)
    cap = request_cap if request_cap is not None else peak
    why: Counter[str] = Counter()
    for s in queued:
        if s.kv_usage is not None and s.kv_usage >= KV_FULL:
            why["kv_cache"] += 1
        elif (s.running or 0) >= cap:
            why["requests"] += 1
        else:
            why["tokens"] += 1
    shares = {k: round(v / len(queued), 3) for k, v in why.most_common()}
    top = next(iter(shares))
    capword = f"{cap:g}" + ("" if request_cap is not None else " (inferred: the step's peak of running)")
    detail = {
        "requests": f"requests waited while {capword} ran",
        "kv_cache": f"requests waited with the KV cache at or above {KV_FULL:.0%}",
        "tokens": f"requests waited while fewer than {capword} ran and the KV cache was not full",
    }[top]
    return top, f"{detail} ({shares[top]:.0%} of {len(queued)} scrapes with requests waiting)", shares  # type: ignore[return-value]


def scrapes_by_endpoint(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Scrape]]:
    """Scrape rows (bench/scrape.py) to one Scrape per endpoint and time: running/waiting summed over label sets
    (engines, ranks), KV usage their maximum."""
    acc: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for r in rows:
        intent = r.get("intent")
        if intent not in ("running", "waiting", "kv_usage") or r.get("value") is None:
            continue
        slot = acc[(str(r["endpoint"]), int(r["t_ns"]))]
        value = float(r["value"])
        slot[intent] = max(slot.get(intent, value), value) if intent == "kv_usage" else slot.get(intent, 0.0) + value
    out: dict[str, list[Scrape]] = defaultdict(list)
    for (endpoint, t_ns), v in sorted(acc.items(), key=lambda kv: kv[0][1]):
        out[endpoint].append(
            Scrape(t_ns=t_ns, running=v.get("running"), waiting=v.get("waiting"), kv_usage=v.get("kv_usage"))
        )
    return out


def launch_cap(engine: str | None, version: str | None, argv: list[str]) -> int | None:
    """The request cap a launch command sets (vLLM --max-num-seqs N, llama.cpp -np N ...): the flag and its aliases
    as the release data knows them at `version`; None when the launch does not set it."""
    choice = cap_flag(engine, version, "requests") if engine else None
    flag = choice.flag if choice is not None else None
    if flag is None or engine is None:
        return None
    from switchover.engines.releases import FlagSpan, view

    v = view(engine, version)
    span = v.option(flag).span if v is not None else None
    names = {flag, *(span.aliases if isinstance(span, FlagSpan) else ())}
    for i, word in enumerate(argv):
        name, eq, value = word.partition("=")
        if name in names:
            value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            return int(value) if value.isdigit() and int(value) > 0 else None
    return None


def series_check(engine: str | None, version: str | None, names: Mapping[str, str]) -> dict[str, str]:
    """intent -> "<series>: present|absent|unknown at <version> (<url>)": the series the verdict read, checked in
    the release data (a series the data says the version does not serve is said, so a verdict on it is doubted)."""
    if not engine or not names:
        return {}
    from switchover.engines.releases import view

    v = view(engine, version)
    out = {}
    for intent, name in sorted(names.items()):
        if v is None:
            out[intent] = f"{name}: no release data for {engine}"
            continue
        look = v.metric(name)
        out[intent] = f"{name}: {look.status} at {version or v.resolution.label}" + (
            f" ({look.url})" if look.url else ""
        )
    return out


def step_limits(run_dir: Path, report: Any, caps: Mapping[str, int] | None = None) -> list[StepLimit]:
    """Every step's binding cap and OOM answers, from the run's metrics and request rows and its step times.
    `caps`: endpoint label -> a request cap known from its launch (bench sweep)."""
    import pyarrow.dataset as ds

    path = records(run_dir, "metrics")
    rows = ds.dataset(str(path), format="parquet").to_table().to_pylist() if path is not None else []
    by_ep = scrapes_by_endpoint(rows)
    names: dict[str, dict[str, str]] = defaultdict(dict)  # endpoint -> intent -> series name scraped
    sent: dict[tuple[str, int], int] = {}  # (endpoint, arrival) -> when the scrape was sent (runs before: unknown)
    for r in rows:
        if r.get("intent") in ("running", "waiting", "kv_usage"):
            names[str(r["endpoint"])][str(r["intent"])] = str(r["name"])
            if r.get("sent_ns") is not None:
                sent[(str(r["endpoint"]), int(r["t_ns"]))] = int(r["sent_ns"])
    ooms = step_ooms(run_dir)
    eps = {e.label: e for e in report.endpoints}
    loads = {(s.endpoint, s.bucket or "", s.step, s.repeat): s for s in report.steps}
    out = []
    for t in report.step_times:
        key: StepKey = (t.endpoint, t.bucket or "", t.step, t.repeat)
        ep = eps.get(t.endpoint)
        engine = ep.engine if ep is not None else None
        info = ep.info if ep is not None else {}
        cap, source = request_cap(engine, info)
        if caps and t.endpoint in caps:
            cap, source = caps[t.endpoint], "the launch command"
        # a scrape is the step's when it was sent and answered inside it (a slow answer may have read the step before)
        inside = [
            s
            for s in by_ep.get(t.endpoint, [])
            if t.start_ns <= sent.get((t.endpoint, s.t_ns), s.t_ns) and s.t_ns <= t.end_ns
        ]
        binding, detail, shares = judge(inside, cap)
        summary = loads.get(key)
        oom = ooms.get(key, StepOom(requests=summary.requests if summary else 0, oom=0, engine_dead=0, texts=[]))
        out.append(
            StepLimit(
                endpoint=t.endpoint,
                bucket=t.bucket or "",
                step=t.step,
                repeat=t.repeat,
                load=_load(summary),
                binding=binding,
                detail=detail,
                scrapes=len(inside),
                waiting_scrapes=sum(1 for s in inside if s.waiting),
                shares=shares,
                running_max=_max(s.running for s in inside),
                waiting_max=_max(s.waiting for s in inside),
                kv_usage_max=_max(s.kv_usage for s in inside),
                request_cap=cap,
                request_cap_source=source,
                raise_flag=raise_flag(engine, engine_version(engine, info), binding) if binding in WORDS else None,
                requests=oom.requests,
                oom=oom.oom,
                engine_dead=oom.engine_dead,
                oom_texts=oom.texts,
                series=series_check(engine, engine_version(engine, info), names.get(t.endpoint, {})),
            )
        )
    return out


def _max(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def _load(s: Any) -> str:
    if s is None:
        return "?"
    if s.concurrency is not None:
        return f"c={s.concurrency}"
    return f"{s.rate:g} req/s" if s.rate is not None else "trace"
