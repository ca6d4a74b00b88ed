"""Which cap binds in a step: the verdict from scraped gauges, the flag to raise at the version served, the advice."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from switchover.bench.capbind import MIN_SCRAPES, engine_version, judge, request_cap, scrapes_by_endpoint
from switchover.bench.steptable import limit_columns
from switchover.evidence.bench_caps import Scrape, StepLimit, advice, raise_flag


def _s(running: float | None, waiting: float | None, kv: float | None = None, t: int = 0) -> Scrape:
    return Scrape(t_ns=t, running=running, waiting=waiting, kv_usage=kv)


@pytest.mark.parametrize(
    ("scrapes", "cap", "binding"),
    [
        ([], None, "unknown"),
        ([_s(None, None)] * 6, None, "unknown"),  # the engine serves neither gauge
        ([_s(4, 0), _s(3, 0)] * 3, 4, "none"),  # nobody waited
        ([_s(4, 2), _s(4, 3), _s(4, 0)] * 2, 4, "requests"),  # waited with every slot busy
        ([_s(2, 5, 0.99), _s(2, 6, 0.97)] * 3, 8, "kv_cache"),  # waited with the KV cache full, below the cap
        ([_s(3, 1, 0.40), _s(3, 2, 0.50)] * 3, 8, "tokens"),  # waited below the cap, KV not full: the step budget
        ([_s(6, 2, 0.3), _s(6, 1, 0.3), _s(2, 1, 0.3)] * 2, None, "requests"),  # cap inferred from the peak (6)
        ([_s(4, 2, 0.99), _s(4, 2, 0.2), _s(4, 1, 0.2)] * 2, 4, "requests"),  # the majority of the waiting scrapes
    ],
)
def test_the_binding_cap_is_what_most_scrapes_with_requests_waiting_show(
    scrapes: list[Scrape], cap: int | None, binding: str
) -> None:
    got, detail, shares = judge(scrapes, cap)
    assert got == binding, detail
    if binding not in ("unknown", "none"):
        assert shares[binding] == max(shares.values()) and "scrapes with requests waiting" in detail


def test_an_inferred_cap_says_it_is_inferred() -> None:
    _, detail, _ = judge([_s(6, 2), _s(6, 1)] * 3, None)
    assert "inferred" in detail
    _, detail, _ = judge([_s(6, 2), _s(6, 1)] * 3, 6)
    assert "inferred" not in detail


@pytest.mark.parametrize("n", [0, 1, 2, MIN_SCRAPES - 1])
def test_a_step_with_fewer_scrapes_than_needed_is_not_measured_instead_of_a_guess(n: int) -> None:
    # before: 2 scrapes that both showed a queue at the cap gave "requests" (vLLM CPU flipped between runs so)
    got, detail, shares = judge([_s(1, 3)] * n, 1)
    assert (got, shares) == ("unknown", {})
    assert detail.startswith(f"not measured: {n} scrapes in the step (< {MIN_SCRAPES} needed)")
    assert judge([_s(1, 3)] * MIN_SCRAPES, 1)[0] == "requests"


def test_scrapes_that_lack_a_gauge_do_not_count_towards_the_readings_needed() -> None:
    partial = [_s(1, None), _s(None, 3)] * 4 + [_s(1, 3)] * (MIN_SCRAPES - 1)
    assert judge(partial, 1)[1].startswith(f"not measured: {MIN_SCRAPES - 1} scrapes")


def test_scrape_rows_sum_running_and_waiting_over_label_sets_and_keep_the_highest_kv_usage() -> None:
    rows = [
        {"endpoint": "new", "t_ns": 5, "intent": "running", "value": 2.0, "labels": '{"engine":"0"}'},
        {"endpoint": "new", "t_ns": 5, "intent": "running", "value": 3.0, "labels": '{"engine":"1"}'},
        {"endpoint": "new", "t_ns": 5, "intent": "kv_usage", "value": 0.5},
        {"endpoint": "new", "t_ns": 5, "intent": "kv_usage", "value": 0.9},
        {"endpoint": "new", "t_ns": 1, "intent": "waiting", "value": 1.0},
        {"endpoint": "new", "t_ns": 5, "intent": "ttft", "value": 9.0},  # not a gauge the verdict reads
        {"endpoint": "old", "t_ns": 5, "intent": "waiting", "value": 4.0},
    ]
    by = scrapes_by_endpoint(rows)
    assert [(s.t_ns, s.running, s.waiting, s.kv_usage) for s in by["new"]] == [
        (1, None, 1.0, None),
        (5, 5.0, None, 0.9),
    ]
    assert by["old"][0].waiting == 4.0


def test_the_flag_to_raise_is_checked_in_the_release_data_at_the_version_served() -> None:
    f = raise_flag("vllm", "0.6.3", "requests")
    assert f is not None and f.flag == "--max-num-seqs" and f.status == "present"
    assert f.url == "https://github.com/vllm-project/vllm/blob/v0.6.3/vllm/engine/arg_utils.py"
    slots = raise_flag("llamacpp", "b11434", "requests")
    assert slots is not None and slots.flag == "--parallel" and "b11434" in (slots.url or "")
    newest = raise_flag("vllm", None, "tokens")
    assert newest is not None and "assumed" in newest.note  # no version: said, not guessed
    assert raise_flag("llamacpp", "b11434", "tokens") is None  # llama.cpp has no per-step token budget flag
    assert raise_flag(None, None, "requests") is None


def test_the_version_and_request_cap_come_from_what_the_endpoint_reported() -> None:
    assert engine_version("vllm", {"/version": {"version": "0.32.0"}}) == "0.32.0"
    assert engine_version("llamacpp", {"/props": {"build_info": "b11434-0a1b2c3", "total_slots": 2}}) == "b11434"
    assert engine_version("vllm", {}) is None
    cap, source = request_cap("llamacpp", {"/props": {"total_slots": 2}})
    assert cap == 2 and source and "total_slots" in source
    assert request_cap("vllm", {"/props": {"total_slots": 2}}) == (None, None)


def _limit(endpoint: str, step: int, binding: str, load: str, flag: str | None = "--max-num-seqs") -> StepLimit:
    return StepLimit(
        endpoint=endpoint,
        bucket="128",
        step=step,
        repeat=0,
        load=load,
        binding=binding,  # type: ignore[arg-type]
        detail="",
        scrapes=3,
        raise_flag=raise_flag("vllm", "0.32.0", binding) if flag else None,
        requests=10,
        oom=2,
    )


def test_advice_names_the_lowest_load_where_each_cap_bound_and_the_flag_with_its_source() -> None:
    lines = advice(
        [
            _limit("new", 2, "requests", "c=8"),
            _limit("new", 1, "requests", "c=4"),
            _limit("new", 0, "none", "c=1"),
            _limit("old", 1, "kv_cache", "c=4"),
        ],
        {"new": "vllm", "old": "vllm"},
    )
    assert lines == [
        "on vllm at c=4 the request-count cap bound: raise --max-num-seqs "
        "(https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/engine/arg_utils.py)",
        "on vllm at c=4 the KV cache (token budget) bound: raise --gpu-memory-utilization "
        "(https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/engine/arg_utils.py)",
    ]


def test_the_step_table_shows_the_cap_and_the_oom_answers_of_each_step() -> None:
    cap, oom = limit_columns([_limit("new", 1, "kv_cache", "c=4")])
    step = SimpleNamespace(endpoint="new", bucket="128", step=1, repeat=0)
    other = SimpleNamespace(endpoint="old", bucket="128", step=1, repeat=0)
    assert cap[1](step) == "kv cache" and oom[1](step) == "2/10"  # type: ignore[arg-type]
    assert cap[1](other) == "—" and oom[1](other) == "—"  # type: ignore[arg-type]


def test_the_step_table_says_a_step_with_too_few_scrapes_was_not_measured_with_their_count() -> None:
    # before: the cell said "unknown", the same as an engine serving no gauges
    binding, detail, _ = judge([_s(1, 3)] * 2, 1)
    lim = _limit("new", 1, binding, "c=4", flag=None).model_copy(update={"detail": detail, "scrapes": 2})
    cap, _ = limit_columns([lim])
    assert cap[1](SimpleNamespace(endpoint="new", bucket="128", step=1, repeat=0)) == "not measured (2 scrapes)"  # type: ignore[arg-type]


def test_step_limits_read_the_scrapes_inside_each_step_and_its_oom_answers(tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from switchover.bench.scrape import SCRAPE_SCHEMA

    def scrape(t: int, intent: str, value: float) -> dict[str, object]:
        return {
            "endpoint": "new",
            "t_ns": t,
            "wall": 0.0,
            "intent": intent,
            "name": intent,
            "labels": "{}",
            "value": value,
        }

    # step 0 (t 0-100): nobody waits; step 1 (t 200-300): both slots busy, one waits; a scrape between the steps
    readings = (
        [(t, 1, 0) for t in range(10, 60, 10)] + [(150, 2, 9)] + [(t, 2, 1 + t % 20 // 10) for t in range(210, 260, 10)]
    )
    rows = [scrape(t, intent, v) for t, run, wait in readings for intent, v in (("running", run), ("waiting", wait))]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCRAPE_SCHEMA), tmp_path / "metrics.parquet")
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "endpoint": "new",
                    "bucket": "128",
                    "step": 1,
                    "repeat": 0,
                    "warmup": False,
                    "status": 500,
                    "failure_message": "Context size has been exceeded.",
                }
            ]
        ),
        tmp_path / "requests.parquet",
    )
    times = [
        SimpleNamespace(endpoint="new", bucket="128", step=i, repeat=0, start_ns=a, end_ns=b)
        for i, (a, b) in enumerate([(0, 100), (200, 300)])
    ]
    steps = [
        SimpleNamespace(endpoint="new", bucket="128", step=i, repeat=0, concurrency=c, rate=None, requests=1)
        for i, c in enumerate([1, 3])
    ]
    ep = SimpleNamespace(label="new", engine="llamacpp", info={"/props": {"total_slots": 2, "build_info": "b11434"}})
    report = SimpleNamespace(endpoints=[ep], steps=steps, step_times=times)

    from switchover.bench.capbind import step_limits

    first, second = step_limits(tmp_path, report)
    assert (first.binding, first.scrapes, first.load, first.oom) == ("none", 5, "c=1", 0)
    assert (second.binding, second.scrapes, second.request_cap, second.waiting_max) == ("requests", 5, 2, 2)
    assert second.oom == 1 and second.requests == 1 and second.raise_flag and second.raise_flag.flag == "--parallel"
    assert set(second.series) == {"running", "waiting"}  # the names scraped (here the intents), each checked
    assert step_limits(tmp_path, report, caps={"new": 4})[1].binding == "tokens"  # below a cap of 4: not the cap


def test_a_llama_build_without_its_git_history_is_an_unknown_version_and_the_advice_says_what_is_assumed() -> None:
    assert engine_version("llamacpp", {"/props": {"build_info": "b0-unknown"}}) is None
    lim = StepLimit(
        endpoint="new",
        bucket="",
        step=0,
        repeat=0,
        load="c=4",
        binding="requests",
        detail="",
        scrapes=2,
        raise_flag=raise_flag("llamacpp", None, "requests"),
    )
    (line,) = advice([lim], {"new": "llamacpp"})
    assert line.startswith("on llamacpp at c=4 the request-count cap bound: raise --parallel (https://github.com/")
    assert "is assumed" in line


def test_the_series_a_verdict_read_is_checked_in_the_release_data_at_the_version_served() -> None:
    from switchover.bench.capbind import series_check

    got = series_check(
        "vllm", "0.32.0", {"running": "vllm:num_requests_running", "kv_usage": "vllm:gpu_cache_usage_perc"}
    )
    assert got["running"].startswith("vllm:num_requests_running: present at 0.32.0 (https://github.com/vllm-project/")
    assert got["kv_usage"] == "vllm:gpu_cache_usage_perc: absent at 0.32.0"  # V0's name, gone by 0.32.0
    assert series_check(None, None, {"running": "x"}) == {}


def test_a_scrape_sent_before_the_step_and_answered_inside_it_is_not_the_steps(tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from switchover.bench.capbind import step_limits
    from switchover.bench.scrape import SCRAPE_SCHEMA

    # before: a scrape counted by its arrival alone, so three slow answers that read the idle engine before the step
    # (sent at 100-120, answered at 201-203) were three of the step's readings
    slow = [(100, 201, 0, 0), (110, 202, 0, 0), (120, 203, 0, 0)]  # (sent, answered, running, waiting)
    readings = slow + [(t - 5, t, 2, 1) for t in range(210, 260, 10)]
    rows = [
        {"endpoint": "new", "t_ns": t, "sent_ns": sent, "wall": 0.0, "intent": k, "name": k, "labels": "{}", "value": v}
        for sent, t, run, wait in readings
        for k, v in (("running", run), ("waiting", wait))
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCRAPE_SCHEMA), tmp_path / "metrics.parquet")
    times = [SimpleNamespace(endpoint="new", bucket="128", step=0, repeat=0, start_ns=200, end_ns=300)]
    steps = [SimpleNamespace(endpoint="new", bucket="128", step=0, repeat=0, concurrency=3, rate=None, requests=1)]
    ep = SimpleNamespace(label="new", engine="llamacpp", info={"/props": {"total_slots": 2, "build_info": "b11434"}})
    (lim,) = step_limits(tmp_path, SimpleNamespace(endpoints=[ep], steps=steps, step_times=times))
    assert (lim.scrapes, lim.waiting_scrapes, lim.binding) == (5, 5, "requests")


# ---- the flag to raise, read from the profiles through engines/data/matrix/cap_raises.yaml -----------------------


@pytest.mark.parametrize(
    ("engine", "version", "binding", "flag", "status"),
    [
        ("vllm", "0.6.3", "requests", "--max-num-seqs", "present"),
        ("vllm", "0.32.0", "tokens", "--max-num-batched-tokens", "present"),
        ("vllm", "0.32.0", "kv_cache", "--gpu-memory-utilization", "present"),  # the fraction, not the byte size
        ("sglang", "0.5.2", "requests", "--max-running-requests", "present"),
        ("sglang", "0.5.2", "tokens", "--chunked-prefill-size", "present"),
        ("sglang", "0.5.2", "kv_cache", "--mem-fraction-static", "present"),
        ("llamacpp", "b11434", "requests", "--parallel", "present"),
        ("llamacpp", "b11434", "kv_cache", "--ctx-size", "present"),  # --fit takes no fraction: the explicit size
        ("tgi", "v3.1.1", "requests", "--max-batch-size", "present"),
        ("trtllm", None, "kv_cache", "--kv_cache_free_gpu_memory_fraction", "present"),
    ],
)
def test_each_engines_flag_for_a_binding_is_its_profiles_flag_for_the_bindings_intent(
    engine: str, version: str | None, binding: str, flag: str, status: str
) -> None:
    got = raise_flag(engine, version, binding)
    assert got is not None and (got.flag, got.status) == (flag, status)


def test_the_flags_at_the_newest_release_are_the_table_the_data_replaced() -> None:
    from switchover.evidence.bench_caps import cap_flag

    def newest(engine: str) -> dict[str, str]:
        got = {b: cap_flag(engine, None, b) for b in ("requests", "tokens", "kv_cache")}
        return {b: r.flag for b, r in got.items() if r is not None and r.flag is not None and r.status == "present"}

    # the table this data replaced, for the engines it covered
    assert newest("vllm") == {
        "requests": "--max-num-seqs",
        "tokens": "--max-num-batched-tokens",
        "kv_cache": "--gpu-memory-utilization",
    }
    assert newest("sglang") == {
        "requests": "--max-running-requests",
        "tokens": "--chunked-prefill-size",
        "kv_cache": "--mem-fraction-static",
    }
    assert newest("llamacpp") == {"requests": "--parallel", "kv_cache": "--ctx-size"}
    assert cap_flag("openai", None, "requests") is None  # no profile: no flag


def test_llamacpps_batch_size_is_not_advice_where_it_was_read_and_unknown_before_that() -> None:
    assert raise_flag("llamacpp", "b11434", "tokens") is None  # a request waits only for a slot (cited)
    older = raise_flag("llamacpp", "b3995", "tokens")
    assert older is not None and (older.flag, older.status) == ("--batch-size", "unknown")
    assert "read at b11434 only" in older.note


def test_a_profile_without_the_bindings_intent_says_unknown_and_the_advice_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from switchover.evidence import bench_caps

    data = bench_caps.CapRaises.model_validate({"bindings": {"tokens": [{"intent": "no_such_intent"}]}})
    monkeypatch.setattr(bench_caps, "cap_raises", lambda: data)
    bench_caps.cap_flag.cache_clear()
    try:
        got = raise_flag("vllm", "0.32.0", "tokens")
        assert got is not None and (got.flag, got.status) == (None, "unknown")
        assert got.note == "the vllm profile has no launch flag for no_such_intent at 0.32.0"
        lim = _limit("new", 1, "tokens", "c=4").model_copy(update={"raise_flag": got})
        assert advice([lim], {"new": "vllm"}) == [
            "on vllm at c=4 the per-step token budget bound: unknown (the vllm profile has no launch flag for "
            "no_such_intent at 0.32.0)"
        ]
    finally:
        bench_caps.cap_flag.cache_clear()


def test_a_not_raising_fact_without_a_url_source_is_refused() -> None:
    from switchover.engines.matrixfile import validated
    from switchover.errors import BadInput
    from switchover.evidence.bench_caps import CapRaises

    fact = {"engine": "e", "binding": "tokens", "intent": "i", "versions": ">=1", "read_at": "1", "why": "w"}
    with pytest.raises(BadInput, match=r"not_raising\.0\.source"):
        validated(CapRaises, {"bindings": {}, "not_raising": [fact | {"source": "seed"}]}, "cap_raises.yaml")


# --- the request cap an endpoint reports, where its engine's profile says it does (profile `request_cap:`) ---------

TOTAL_SLOTS_URL = "https://github.com/ggml-org/llama.cpp/blob/b11434/tools/server/server-context.cpp"


@pytest.mark.parametrize(
    ("engine", "info", "cap"),
    [
        ("llamacpp", {"/props": {"build_info": "b11434-0a1b2c3", "total_slots": 2}}, 2),  # a build read
        ("llamacpp", {"/props": {"build_info": "b9096-0a1b2c3", "total_slots": 3}}, 3),  # between builds read
        ("llamacpp", {"/props": {"build_info": "b0-unknown", "total_slots": 4}}, 4),  # build not reported
        ("llamacpp", {"/props": {"total_slots": 0}}, None),  # not a cap
        ("llamacpp", {"/props": {"total_slots": True}}, None),  # not a number
        ("llamacpp", {"/props": {"total_slots": "2"}}, None),
        ("llamacpp", {"/version": {"version": "x"}}, None),  # no /props answer
        ("vllm", {"/props": {"total_slots": 2}, "/version": {"version": "0.32.0"}}, None),  # profile has no entry
        ("sglang", {"/props": {"total_slots": 2}}, None),
        ("nosuchengine", {"/props": {"total_slots": 2}}, None),  # no profile
        (None, {"/props": {"total_slots": 2}}, None),
    ],
)
def test_the_request_cap_is_read_only_where_the_engine_profile_says_the_server_reports_it(
    engine: str | None, info: dict, cap: int | None
) -> None:
    got, source = request_cap(engine, info)
    assert got == cap
    if cap is not None:
        assert source == f"/props total_slots ({TOTAL_SLOTS_URL})"  # the wording users saw before, for b11434


def test_any_engine_whose_profile_names_a_request_cap_field_gets_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    # no engine-name branch: SGLang given a profile entry (made up for the test) is read the same way
    from switchover.engines import profile
    from switchover.engines.profile import RequestCapSource, load_profile

    entry = RequestCapSource(path="/props", field="limits.slots", versions=">=0.4", source="https://example.test/x")
    fake = load_profile("sglang").model_copy(update={"request_cap": [entry]})
    monkeypatch.setattr(profile, "load_profile", lambda name, version=None: fake)
    info = {"/version": {"version": "0.5.1"}, "/props": {"limits": {"slots": 6}}}
    assert request_cap("sglang", info) == (6, "/props limits.slots (https://example.test/x)")
    older = {"/version": {"version": "0.3.0"}, "/props": {"limits": {"slots": 6}}}
    cap, why = request_cap("sglang", older)
    assert cap is None and why is not None and "0.3.0" in why and ">=0.4" in why


def test_a_llamacpp_build_older_than_the_data_gets_no_request_cap_and_says_why() -> None:
    cap, why = request_cap("llamacpp", {"/props": {"build_info": "b3000-0a1b2c3", "total_slots": 2}})
    assert cap is None
    assert why is not None and why.startswith("not read:") and "b3000" in why and "b3135" in why


def test_a_llamacpp_build_newer_than_the_data_keeps_its_cap_and_says_it_is_assumed() -> None:
    cap, source = request_cap("llamacpp", {"/props": {"build_info": "b99999-0a1b2c3", "total_slots": 2}})
    assert cap == 2
    assert source is not None and source.startswith(f"/props total_slots ({TOTAL_SLOTS_URL}; ")
    assert "b99999 is newer than the newest release read" in source


@pytest.mark.parametrize(
    ("engine", "info", "version"),
    [
        ("llamacpp", {"/props": {"build_info": "b11434-0a1b2c3"}}, "b11434"),
        ("llamacpp", {"/props": {"build_info": "b0-unknown"}}, None),  # built without its git history
        ("llamacpp", {"/props": {"build_info": "unknown"}}, None),
        ("llamacpp", {"/props": {"build_info": 11434}}, None),
        ("vllm", {"/props": {"build_info": "b11434-0a1b2c3"}}, None),  # vLLM is not numbered by build tags
        ("nosuchengine", {"/props": {"build_info": "b11434"}}, None),
        ("sglang", {"/version": {"version": "0.5.1"}}, "0.5.1"),
    ],
)
def test_the_engine_version_is_read_from_what_the_endpoint_reported(
    engine: str, info: dict, version: str | None
) -> None:
    assert engine_version(engine, info) == version
