"""bench/translate_accuracy.py's own reading and counting, on tiny made-up launches (never entries of the held-out
set: these only show that each counter can count, and that the launch tokenizer reads what a shell would)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "translate_accuracy.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("translate_accuracy_under_test", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _inputs(bench: ModuleType, text: str, files: dict[str, str] | None = None) -> list[tuple[str, str | None, str]]:
    return [(i.typed, i.value, i.via) for i in bench.launch_inputs(text, files)]


def _record(typed: str, outcome: str = "translated", validity: str = "ok", via: str = "argv") -> dict[str, Any]:
    return {"input": {"typed": typed, "option": typed, "via": via, "validity": validity}, "outcome": outcome}


def _launch(*inputs: dict[str, Any]) -> dict[str, Any]:
    return {"id": "made-up", "engine": "vllm", "version": "0.0.1", "inputs": list(inputs)}


def _fake_view(options: dict[str, Any], metrics: dict[str, str]) -> SimpleNamespace:
    """A release view: options -> span (None: absent); metrics -> type of a served series."""

    def option(typed: str) -> SimpleNamespace:
        span = options.get(typed)
        return SimpleNamespace(status="absent" if span is None else "present", span=span, reason=f"{typed}: made up")

    def metric(name: str) -> SimpleNamespace:
        kind = metrics.get(name)
        return SimpleNamespace(
            status="absent" if kind is None else "present", span=SimpleNamespace(type=kind), reason=f"{name}: made up"
        )

    return SimpleNamespace(option=option, metric=metric)


# ---- the tokenizer ---------------------------------------------------------------------------------------------


def test_a_shell_line_gives_env_prefixes_flags_and_inline_values(bench: ModuleType) -> None:
    text = "FOO_X=1 BAR=two serve-engine --a 1 --b=x \\\n  --switch --neg -5 --last"
    bench.ENGINE_COMMANDS.append((r"serve-engine",))
    try:
        got = _inputs(bench, text)
    finally:
        bench.ENGINE_COMMANDS.pop()
    assert got == [
        ("FOO_X", "1", "env"),
        ("BAR", "two", "env"),
        ("--a", "1", "argv"),
        ("--b", "x", "argv"),
        ("--switch", None, "argv"),
        ("--neg", "-5", "argv"),
        ("--last", None, "argv"),
    ]


def test_docker_env_options_and_an_env_file_are_read_and_docker_options_are_not_engine_flags(bench: ModuleType) -> None:
    text = (
        "export EARLY=y\ndocker run --gpus all -e ONE=1 --env=TWO=2 --env-file my.env -p 80:80 img:tag "
        "--model m --port 80"
    )
    got = _inputs(bench, text, {"my.env": "# comment\nTHREE=3\n"})
    assert ("EARLY", "y", "env") in got and ("ONE", "1", "env") in got and ("TWO", "2", "env") in got
    assert ("THREE", "3", "env") in got
    assert [g for g in got if g[2] == "argv"] == [("--model", "m", "argv"), ("--port", "80", "argv")]


def test_a_container_args_list_and_its_env_list_are_read_as_argv(bench: ModuleType) -> None:
    text = "args:\n  - --x\n  - '7'\n  - --y=z\nenv:\n  - {name: K, value: v}\n"
    assert _inputs(bench, text) == [("K", "v", "env"), ("--x", "7", "argv"), ("--y", "z", "argv")]
    compose = "command: ['--p', '1']\nenvironment: {A: b}\n"
    assert _inputs(bench, compose) == [("A", "b", "env"), ("--p", "1", "argv")]


def test_config_keys_come_from_inline_json_or_a_posted_file(bench: ModuleType) -> None:
    inline = _inputs(bench, 'trtllm-serve m --config \'{"k1": 1, "k2": {"a": 2}}\'')
    assert [g for g in inline if g[2] == "config"] == [("k1", None, "config"), ("k2", None, "config")]
    posted = _inputs(bench, "trtllm-serve m --extra_llm_api_options /c.yaml", {"/c.yaml": "key_a: 1\nkey_b: x\n"})
    assert [g[0] for g in posted if g[2] == "config"] == ["key_a", "key_b"]
    assert [g for g in _inputs(bench, "trtllm-serve m --config /missing.yaml") if g[2] == "config"] == []


def test_a_rendered_command_parses_into_options_after_the_engine_command(bench: ModuleType) -> None:
    argv = ["vllm", "serve", "M", "--a", "1", "--b", "--c=x", "--d", "p", "q", "-t", "-3"]
    assert bench.parse_argv(argv) == [("--a", ["1"]), ("--b", []), ("--c", ["x"]), ("--d", ["p", "q"]), ("-t", ["-3"])]
    assert bench.parse_argv(["python3", "-m", "sglang.launch_server", "--x", "1"]) == [("--x", ["1"])]


def test_values_compare_by_meaning(bench: ModuleType) -> None:
    assert bench.same_value(8, "8.0") and bench.same_value(True, None) and bench.same_value(False, "off")
    assert bench.same_value({"a": 1}, '{"a": 1, "b": 2}') and not bench.same_value({"a": 1}, "a=1")
    assert bench.same_value(["half", "float16"], "float16") and not bench.same_value("half", "float16")


def test_annotations_that_differ_from_the_command_are_a_data_error(bench: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "launches.yaml").write_text(
        "launches:\n- id: x\n  engine: vllm\n  version: 0.0.1\n  command: vllm serve m --a 1\n"
        "  inputs:\n  - {typed: --b, via: argv}\n"
    )
    (tmp_path / "expected.yaml").write_text("targets: {}\noptions: {}\nlaunches: {}\n")
    with pytest.raises(SystemExit, match="annotated inputs differ"):
        bench.load(tmp_path)


# ---- each counter can count ----------------------------------------------------------------------------------


def test_a_valid_input_reported_unknown_is_a_false_unknown(bench: ModuleType) -> None:
    launch = _launch({"typed": "--ok-flag", "exists": "present"})
    fails = bench.check_inputs(launch, "x@1", {"flags": [_record("--ok-flag", validity="unknown")]})
    assert [f.counter for f in fails] == ["false_unknowns"]
    assert bench.check_inputs(launch, "x@1", {"flags": [_record("--ok-flag")]}) == []


def test_an_invalid_input_reported_ok_is_a_wrong_mapping(bench: ModuleType) -> None:
    absent = _launch({"typed": "--gone", "exists": "absent"})
    bad_value = _launch({"typed": "--switch", "exists": "present", "value_ok": False})
    assert [f.counter for f in bench.check_inputs(absent, "x@1", {"flags": [_record("--gone")]})] == ["wrong_mappings"]
    assert [f.counter for f in bench.check_inputs(bad_value, "x@1", {"flags": [_record("--switch")]})] == [
        "wrong_mappings"
    ]
    assert bench.check_inputs(absent, "x@1", {"flags": [_record("--gone", "lost", "refused")]}) == []


def test_an_input_in_no_list_is_a_silent_drop_env_only_when_the_engine_reads_it(bench: ModuleType) -> None:
    launch = _launch(
        {"typed": "--flag", "exists": "present"},
        {"typed": "CUDA_VISIBLE_DEVICES", "via": "env"},
        {"typed": "SOME_LIB_VAR", "via": "env", "exists": "external"},
        {"typed": "ENGINE_ARG", "via": "env", "exists": "present", "engine_arg": True},
        {"typed": "key", "via": "config", "exists": "present"},
    )
    fails = bench.check_inputs(launch, "x@1", {"flags": []})
    assert sorted(f.what for f in fails if f.counter == "silent_drops") == [
        "--flag (argv)",
        "CUDA_VISIBLE_DEVICES (env)",
        "ENGINE_ARG (env)",
        "key (config)",
    ]


def test_an_unmet_expectation_is_a_wrong_mapping(bench: ModuleType) -> None:
    launch = _launch({"typed": "--len", "intent": "ctx"})
    out = {
        "argv": ["eng", "serve", "M", "--max-len", "100", "--max-len", "200"],
        "flags": [_record("--len")],
        "env": {"ENV_LEN": "300"},
        "yaml_config": {"a": {"b": 1}},
        "steps": ["convert it"],
    }
    rule = {"option": "--max-len", "value": 100}
    fail = bench.check_expectation(launch, "eng", "ctx", rule, out)  # the repeat carries another value
    assert fail is not None and fail.counter == "wrong_mappings" and "--max-len 100 | --max-len 200" in fail.got
    assert bench.check_expectation(launch, "eng", "ctx", {"option": "--nope", "value": 1}, out) is not None
    assert (
        bench.check_expectation(launch, "eng", "ctx", {"option": "--nope", "value": 300, "env_alt": "ENV_LEN"}, out)
        is None
    )
    assert bench.check_expectation(launch, "eng", "ctx", {"yaml": "a.b", "value": 1}, out) is None
    assert bench.check_expectation(launch, "eng", "ctx", {"yaml": "a.c", "value": 1}, out) is not None
    assert bench.check_expectation(launch, "eng", "ctx", {"steps": "convert"}, out) is None
    assert bench.check_expectation(launch, "eng", "ctx", {"lost": "none there"}, out) is not None
    assert bench.check_expectation(launch, "eng", "ctx", {"positional": True, "value": "M"}, out) is None
    gone = {"option": "--x", "value": 1, "must_not_appear": ["--max-len 200"]}
    assert (
        bench.check_expectation(launch, "eng", "ctx", {**gone, "option": "--max-len", "value": [100, 200]}, out)
        is not None
    )


def test_a_noop_value_may_be_the_targets_default_instead_of_lost(bench: ModuleType) -> None:
    launch = _launch({"typed": "--pp", "intent": "pp"})
    out = {"flags": [_record("--pp", outcome="default_matches")]}
    assert bench.check_expectation(launch, "e", "pp", {"lost": "none", "noop": 1, "value": 1}, out) is None
    assert bench.check_expectation(launch, "e", "pp", {"lost": "none", "noop": 1, "value": 2}, out) is not None


def test_a_rendered_option_the_target_release_lacks_or_misreads_is_a_wrong_mapping(bench: ModuleType) -> None:
    view = _fake_view(
        {
            "--switch": SimpleNamespace(takes_value=False, choices=[], choices_open=False),
            "--pick": SimpleNamespace(takes_value=True, choices=["a", "b"], choices_open=False),
        },
        {},
    )
    out = {"argv": ["vllm", "serve", "M", "--switch", "yes", "--pick", "c", "--absent", "--pick", "a"]}
    fails = bench.check_rendered("made-up", "x@1", out, view)
    assert [f.what for f in fails] == ["--switch", "--pick c", "--absent"]
    assert all(f.counter == "wrong_mappings" for f in fails)
    assert bench.check_rendered("made-up", "x@1", out, None) == []


def test_a_valued_option_rendered_without_its_value_is_a_wrong_mapping(bench: ModuleType) -> None:
    view = _fake_view(
        {
            "--need": SimpleNamespace(takes_value=True, value_optional=False, choices=None, choices_open=False),
            "--maybe": SimpleNamespace(takes_value=True, value_optional=True, choices=None, choices_open=False),
            "--port": SimpleNamespace(takes_value=True, value_optional=False, choices=None, choices_open=False),
        },
        {},
    )
    out = {"argv": ["vllm", "serve", "M", "--need", "--maybe", "--port", "80"]}
    fails = bench.check_rendered("made-up", "x@1", out, view)
    assert [(f.what, f.counter) for f in fails] == [("--need", "wrong_mappings")]


def test_a_translated_rule_reading_a_series_the_target_lacks_is_a_dead_series(
    bench: ModuleType, tmp_path: Path
) -> None:
    rules = tmp_path / "r.yaml"
    rules.write_text("groups:\n- name: g\n  rules:\n  - record: vllm:my_recorded\n    expr: sum(vllm:a)\n")
    report = {
        "rules": [
            {
                "group": "g",
                "rule": "r1",
                "status": "translated",
                "expr_after": "rate(vllm:hist_bucket[5m]) + vllm:count_total + vllm:my_recorded + node_load1",
            },
            {"group": "g", "rule": "r2", "status": "unchanged", "expr_after": "vllm:gone > 1"},
            {"group": "g", "rule": "r3", "status": "untranslated", "expr_after": "vllm:also_gone"},
        ]
    }
    view = _fake_view({}, {"vllm:hist": "histogram", "vllm:count": "counter", "vllm:count_total": "counter"})
    fails = bench.dead_series(rules, "vllm", "9.9", report, view)
    assert [(f.counter, f.what) for f in fails] == [("dead_series", "g/r2: vllm:gone")]
    assert bench.series_served(_fake_view({}, {"vllm:g": "gauge"}), "vllm:g_bucket")[0] is False


def test_a_refused_translation_is_a_failed_run(bench: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "translate", lambda launch, target: "exit 2: no engine launch found")
    expected = {"targets": {e: {"version": "1"} for e in bench.ENGINES}, "options": {}, "launches": {}}
    tallies = bench.score([{**_launch(), "id": "made-up"}], expected, only_launch="made-up")
    assert tallies["vllm"].counts["failed_runs"] == len(bench.ENGINES) and tallies["vllm"].runs == 5
    assert "failed_runs" in bench.render(tallies, json_out=False) and '"failed_runs": 5' in bench.render(
        tallies, json_out=True
    )


def test_a_set_scores_its_own_rule_files_and_the_shared_ones(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared, own = tmp_path / "shared", tmp_path / "set" / "alerts"
    shared.mkdir()
    own.mkdir(parents=True)
    for path in (shared / "vllm-a.yaml", own / "vllm-b.yaml"):
        path.write_text(
            "# engine: vllm\n# version: 0.0.1\ngroups:\n- name: g\n  rules:\n  - alert: A\n    expr: vllm:gone > 1\n"
        )
    monkeypatch.setattr(bench, "SHARED_ALERTS", shared)
    files = bench.alert_files(tmp_path / "set")
    assert [p.name for p in files] == ["vllm-b.yaml", "vllm-a.yaml"]
    report = {"rules": [{"group": "g", "rule": "A", "status": "unchanged", "expr_after": "vllm:gone > 1"}]}
    monkeypatch.setattr(bench, "run_alerts", lambda path, source, target: report)
    monkeypatch.setattr(bench, "release_view", lambda engine, version: _fake_view({}, {}))
    expected = {"targets": {e: {"version": "9"} for e in bench.ENGINES}, "options": {}, "launches": {}}
    tallies = bench.score([], expected, rule_files=files)
    assert tallies["vllm"].rule_files == 2 and tallies["vllm"].counts["dead_series"] == 2 * len(bench.ENGINES)


def test_the_set_is_chosen_on_the_command_line_and_an_unknown_one_is_refused(bench: ModuleType) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.main(["--set", "nope"])
    assert exc.value.code == 2
    assert bench.SETS == ("heldout", "dev")
    assert "the second set (held out until its first measurement" in bench.render({}, json_out=False)
    assert '"set": "dev"' in bench.render({}, json_out=True, set_name="dev")


@pytest.mark.parametrize("set_name", ["heldout", "dev"])
def test_the_shipped_set_is_consistent(bench: ModuleType, set_name: str) -> None:
    """Structure only (no entry is read into a test): annotations match the commands, every expectation names a
    launch, every launch cites its source and the release it was read at."""
    launches, expected = bench.load(bench.DATA / set_name)
    ids = {x["id"] for x in launches}
    assert len(ids) == len(launches) and set(expected["launches"]) <= ids
    assert set(expected["targets"]) == set(bench.ENGINES)
    assert all(x.get("link") and x.get("version") and x.get("read_at") for x in launches)


def test_the_held_out_set_shares_no_launch_and_no_source_page_with_the_development_set(bench: ModuleType) -> None:
    """The second set measured the translator honestly once only because none of it had been seen while fixing the
    translator (structure only)."""
    held, _ = bench.load(bench.DATA / "heldout")
    dev, _ = bench.load(bench.DATA / "dev")

    def page(link: str) -> str:
        return link.split("#")[0].split("?")[0]

    assert not {x["id"] for x in held} & {x["id"] for x in dev}
    assert not {page(x["link"]) for x in held} & {page(x["link"]) for x in dev}
    assert len(held) >= 45
