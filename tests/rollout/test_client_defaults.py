"""The client mix from the ledger and which client defaults behave differently on new."""

from __future__ import annotations

from typing import Any

from switchover.engines import load_profile
from switchover.ledger_record import ClientSampling, LedgerRecord, ShadowRecord
from switchover.rollout.client_defaults import ClientMixCounter, client_mix, findings


def _row(client: dict[str, Any] | None, outcome: str = "ok") -> LedgerRecord:
    return LedgerRecord(
        ts=0,
        request_id="r",
        path="/v1/chat/completions",
        outcome=outcome,
        status=200,  # type: ignore[arg-type]
        stream=False,
        client=ClientSampling(**client) if client is not None else None,
    )


def _counter(rows: list[LedgerRecord]) -> ClientMixCounter:
    c = ClientMixCounter()
    assert list(c.watch(rows)) == rows  # passed on unchanged
    return c


ROWS = [
    *[_row({"set": ["max_tokens", "temperature"], "temperature": 0.2, "max_tokens": 64, "user_suffix": "aa"})] * 6,
    *[_row({"set": [], "user_suffix": "bb", "system_suffix": "ss"})] * 3,
    _row({"set": ["seed", "stop"], "seed": True, "stop": 6, "response_format": "json_schema"}),
    _row(None),  # an older gateway's row
    _row({"set": ["temperature"], "temperature": 5}, outcome="bad_request"),  # the gateway answered: not counted
]


def test_the_mix_counts_which_fields_clients_set_and_the_common_endings() -> None:
    mix = _counter(ROWS).mix()
    assert (mix.requests, mix.without_fields, mix.seeded) == (10, 1, 1)
    temp = next(f for f in mix.fields if f.field == "temperature")
    assert (temp.set, temp.share_set, temp.share_default, temp.values) == (6, 0.6, 0.4, {"0.2": 6})
    assert mix.stop_sizes == {"6": 1} and mix.response_formats == {"json_schema": 1}
    assert [(s.role, s.hash, s.requests) for s in mix.suffixes] == [
        ("user", "aa", 6),
        ("system", "ss", 3),
        ("user", "bb", 3),
    ]


def test_vllm_to_llamacpp_names_the_defaults_the_unset_requests_will_get_differently() -> None:
    got = {f.field: f for f in findings(_counter(ROWS), load_profile("vllm"), load_profile("llamacpp"))}
    t = got["temperature"]
    assert t.share == 0.4 and "vllm's default 1, llamacpp's 0.8" in t.detail and "generation_config.json" in t.detail
    assert got["top_k"].share == 1.0 and "0" in got["top_k"].detail and "40" in got["top_k"].detail
    assert got["max_tokens"].share == 0.4  # llama.cpp generates until EOS or the slot is full
    assert "repetition_penalty" not in got  # 1.0 on both (llama.cpp calls it repeat_penalty)
    assert "stop" not in got  # llama.cpp has no documented stop-string limit


def test_a_default_one_profile_does_not_hold_is_unknown_not_assumed_equal() -> None:
    got = {f.field: f for f in findings(_counter(ROWS), load_profile("vllm"), load_profile("tgi"))}
    assert "tgi's not in the profile (unknown)" in got["frequency_penalty"].detail


def test_llamacpps_penalties_are_read_from_its_source_so_vllm_to_llamacpp_finds_them_equal() -> None:
    got = {f.field: f for f in findings(_counter(ROWS), load_profile("vllm"), load_profile("llamacpp"))}
    assert "frequency_penalty" not in got and "presence_penalty" not in got  # 0.0 on both (common/common.h)


def test_llamacpp_to_vllm_flags_stop_lists_over_vllms_limit() -> None:
    got = {f.field: f for f in findings(_counter(ROWS), load_profile("llamacpp"), load_profile("vllm"))}
    assert got["stop"].share == 0.1 and "4 stop strings" in got["stop"].detail


def test_the_same_engine_on_both_sides_has_no_finding_and_a_plain_openai_server_is_said_unknown() -> None:
    assert findings(_counter(ROWS), load_profile("vllm"), load_profile("vllm")) == []
    mix = client_mix(_counter(ROWS), None, "vllm")
    assert mix.findings == [] and any("openai" in n for n in mix.notes) and any("older gateway" in n for n in mix.notes)


def test_no_rows_no_findings_and_shadow_rows_are_not_requests() -> None:
    c = ClientMixCounter()
    c.add(
        ShadowRecord(
            ts=0,
            request_id="r",
            path="/v1/completions",
            outcome="ok",
            status=200,
            stream=False,
            shadow={"upstream": "new"},
        )
    )  # type: ignore[arg-type]
    assert c.mix().requests == 0 and findings(c, load_profile("vllm"), load_profile("llamacpp")) == []


def test_rollout_compare_shows_the_client_mix_and_what_differs_on_new(config_file, capsys, monkeypatch) -> None:
    import time

    import orjson

    from tests.rollout.builders import cli, row, write_ledger

    monkeypatch.chdir(config_file.parent)
    now = time.time()
    rows = [
        row(now - 100 + i, "old" if i % 2 else "new").model_copy(
            update={
                "client": ClientSampling(
                    set=["max_tokens"] if i % 4 else ["max_tokens", "temperature"],
                    temperature=None if i % 4 else 0.2,
                    max_tokens=32,
                    user_suffix="f00d" if i % 3 == 0 else None,
                )
            }
        )
        for i in range(40)
    ]
    write_ledger(config_file.parent / "gw", rows)
    code, out, _ = cli(capsys, "compare", "--mode", "arms", "--ledger", str(config_file.parent / "gw"), "--json")
    clients = orjson.loads(out)["clients"]
    assert (
        code == 0
        and clients["requests"] == 40
        and (clients["old_engine"], clients["new_engine"]) == ("vllm", "llamacpp")
    )
    temp = next(f for f in clients["findings"] if f["field"] == "temperature")
    assert temp["share"] == 0.75 and "vllm's default 1, llamacpp's 0.8" in temp["detail"]
    assert clients["suffixes"] == [{"role": "user", "hash": "f00d", "requests": 14, "share": 0.35}]
    code, out, _ = cli(capsys, "compare", "--mode", "arms", "--ledger", str(config_file.parent / "gw"))
    text = " ".join(out.split())
    assert "clients (40 requests) set: max_tokens 100%, temperature 25%" in text
    assert "differs on new: 75% of requests leave temperature unset" in text and "hash f00d" in text
