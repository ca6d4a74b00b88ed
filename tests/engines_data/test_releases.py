"""engines.releases and engines.extract: spans from per-release facts, and lookups at any version (exact, between two
reads, outside what was read), with the parser's own spelling rules."""

from __future__ import annotations

from typing import Any

import pytest

from switchover.engines.extract import Extracted, Snapshot, compact, expand
from switchover.engines.releases import EngineReleases, FlagSpan, ParserRules, ReleaseView, resolve
from switchover.engines.versions import check_release_form, release_key, split_engine_ref

RULES = ParserRules(source="x.py")
ABBREV = ParserRules(abbrev=True, underscores=True, source="server_args.py")


def _flag(**extra: Any) -> dict[str, Any]:
    return {"path": "x.py", "takes_value": True, "kind": "int", **extra}


def _snap(
    version: str,
    flags: dict[str, dict[str, Any]],
    rules: ParserRules = RULES,
    metrics: dict[str, dict[str, Any]] | None = None,
) -> Snapshot:
    return Snapshot(
        version=version,
        ref=f"v{version}",
        archive="a",
        date=None,
        facts=Extracted(parser=rules, flags=flags, metrics=metrics or {}, files=["x.py"]),
    )


def _data(rules: ParserRules = RULES) -> EngineReleases:
    return compact(
        "vllm",
        [
            _snap(
                "0.4.0",
                {"--a": _flag(), "--swap-space": _flag()},
                rules,
                {"vllm:gpu_cache_usage_perc": {"path": "m.py", "type": "gauge"}},
            ),
            _snap(
                "0.5.0",
                {"--a": _flag(), "--swap-space": _flag()},
                rules,
                {"vllm:gpu_cache_usage_perc": {"path": "m.py", "type": "gauge"}},
            ),
            _snap(
                "0.6.0",
                {"--a": _flag(default="2")},
                rules,
                {"vllm:kv_cache_usage_perc": {"path": "m.py", "type": "gauge"}},
            ),
            _snap(
                "0.7.0",
                {"--a": _flag(default="2"), "--swap-space": _flag(), "--tp-size": _flag(), "--tp-rank": _flag()},
                rules,
            ),
        ],
        source_url="https://example.invalid/{ref}/{path}",
        generated_by="test",
    )


def test_compact_makes_one_span_per_run_of_identical_facts() -> None:
    data = _data()
    assert [(s.first, s.last, s.default) for s in data.flags["--a"]] == [
        ("0.4.0", "0.5.0", None),
        ("0.6.0", "0.7.0", "2"),
    ]
    assert [(s.first, s.last) for s in data.flags["--swap-space"]] == [("0.4.0", "0.5.0"), ("0.7.0", "0.7.0")]


def test_expand_gives_back_each_release() -> None:
    data = _data()
    again = compact("vllm", expand(data), source_url=data.source_url, generated_by="test")
    assert again == data


@pytest.mark.parametrize(
    ("version", "coverage", "status"),
    [
        ("0.4.0", "exact", "present"),
        ("0.6.0", "exact", "absent"),
        ("0.4.5", "between", "present"),  # 0.4.0 and 0.5.0 agree
        ("0.5.5", "between", "unknown"),  # 0.5.0 has it, 0.6.0 does not
        ("0.3.0", "older_than_read", "unknown"),
        ("0.9.0", "newer_than_read", "present"),
        (None, "newest_assumed", "present"),
    ],
)
def test_a_flag_at_a_version(version: str | None, coverage: str, status: str) -> None:
    v = ReleaseView(_data(), resolve(_data(), version))
    assert v.resolution.coverage == coverage
    assert v.option("--swap-space").status == status


def test_between_two_reads_that_both_define_it_differently_it_is_present_with_both_definitions() -> None:
    found = ReleaseView(_data(), resolve(_data(), "0.6.5")).option("--a")
    assert found.status == "present"
    assert [s.default for s in found.alternatives] == ["2", "2"] or len(found.alternatives) == 0
    changed = ReleaseView(_data(), resolve(_data(), "0.5.5")).option("--a")  # default None in 0.5.0, "2" in 0.6.0
    assert changed.status == "present"
    assert [getattr(s, "default", None) for s in changed.alternatives] == [None, "2"]


def test_absent_says_when_it_was_last_seen_with_a_url() -> None:
    found = ReleaseView(_data(), resolve(_data(), "0.6.0")).option("--swap-space")
    assert found.status == "absent"
    assert "last in 0.5.0" in found.reason and "https://example.invalid/v0.5.0/x.py" in found.reason


def test_a_flag_unknown_to_the_newest_read_is_unknown_not_absent_for_a_newer_release() -> None:
    assert ReleaseView(_data(), resolve(_data(), "0.9.0")).option("--brand-new").status == "unknown"


def test_abbreviations_and_underscores_follow_the_parser_rules() -> None:
    strict = ReleaseView(_data(), resolve(_data(), "0.7.0"))
    assert strict.option("--swap_space").status == "absent"
    loose = ReleaseView(_data(ABBREV), resolve(_data(ABBREV), "0.7.0"))
    assert loose.option("--swap_space").name == "--swap-space"
    assert loose.option("--swap").name == "--swap-space"
    assert "abbreviation" in (loose.option("--swap").matched_as or "")
    ambiguous = loose.option("--tp")
    assert ambiguous.status == "absent" and "ambiguous" in ambiguous.reason


def test_metrics_by_version() -> None:
    old = ReleaseView(_data(), resolve(_data(), "0.5.0"))
    new = ReleaseView(_data(), resolve(_data(), "0.6.0"))
    assert old.metric("vllm:gpu_cache_usage_perc").status == "present"
    assert new.metric("vllm:gpu_cache_usage_perc").status == "absent"
    assert new.metric_names() == ["vllm:kv_cache_usage_perc"]


def test_release_order_is_pep440_and_llamacpp_builds() -> None:
    assert release_key("1.2.0rc1") < release_key("1.2.0") < release_key("1.2.0.post1")
    assert release_key("b999") < release_key("b3216") < release_key("b10000")
    with pytest.raises(ValueError, match="is not a version number"):
        release_key("latest")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("vllm@0.6.3", ("vllm", "0.6.3")), ("llamacpp==b3216", ("llamacpp", "b3216")), ("sglang", ("sglang", None))],
)
def test_engine_refs(text: str, expected: tuple[str, str | None]) -> None:
    assert split_engine_ref(text) == expected


@pytest.mark.parametrize(
    ("engine", "version", "ok"),
    [
        ("llamacpp", "b3216", True),
        ("llamacpp", "3216", True),
        ("llamacpp", "0.6.3", False),
        ("llamacpp", "v2.0.2", False),
        ("vllm", "0.6.3", True),
        ("vllm", "b3216", False),
        ("tgi", "v2.0.2", True),
        ("sglang", "B12", False),
        ("trtllm", "1.2.0rc1", True),
    ],
)
def test_a_release_is_written_the_way_its_engine_numbers_releases(engine: str, version: str, ok: bool) -> None:
    from switchover.engines import load_profile

    scheme = load_profile(engine).release_scheme  # the profile says how the engine numbers releases
    if ok:
        check_release_form(engine, scheme, version)
    else:
        with pytest.raises(ValueError, match=version):
            check_release_form(engine, scheme, version)


def test_spans_must_name_releases_read() -> None:
    data = _data().model_dump()
    data["flags"]["--a"][0]["first"] = "0.4.9"
    with pytest.raises(ValueError, match="names a release not read"):
        EngineReleases.model_validate(data)


def test_flag_span_defaults() -> None:
    assert FlagSpan(first="1", last="1", path="p", takes_value=False).kind == "unknown"


def test_environment_variables_by_release_and_unknown_without_a_table() -> None:
    env = {"VLLM_USE_V1": {"path": "vllm/envs.py", "kind": "bool", "default": "1"}}
    data = compact(
        "vllm",
        [
            _snap("0.8.0", {"--a": _flag()}),
            Snapshot(
                version="0.9.0",
                ref="v0.9.0",
                archive="a",
                date=None,
                facts=Extracted(parser=RULES, flags={"--a": _flag()}, environment=env, files=["x.py"]),
            ),
        ],
        source_url="https://example.invalid/{ref}/{path}",
        generated_by="test",
    )
    assert ReleaseView(data, resolve(data, "0.9.0")).env_var("VLLM_USE_V1").status == "present"
    assert ReleaseView(data, resolve(data, "0.8.0")).env_var("VLLM_USE_V1").status == "absent"
    assert compact("vllm", expand(data), source_url=data.source_url, generated_by="test") == data
    assert ReleaseView(_data(), resolve(_data(), "0.4.0")).env_var("VLLM_USE_V1").status == "unknown"


def test_dotted_keys_underscores_before_prefixes_and_negation_wording() -> None:
    rules = ParserRules(abbrev=True, underscores=True, dotted_keys=True, source="vllm/utils.py")
    data = compact(
        "vllm",
        [
            _snap(
                "0.9.0",
                {
                    "--compilation-config": _flag(kind="json"),
                    "--max-model-len": _flag(),
                    "--enable-prefix-caching": _flag(takes_value=False, negation="--no-enable-prefix-caching"),
                },
                rules,
            )
        ],
        source_url="https://example.invalid/{ref}/{path}",
        generated_by="test",
    )
    v = ReleaseView(data, resolve(data, "0.9.0"))
    dotted = v.option("--compilation-config.level")
    assert (
        dotted.status == "present"
        and dotted.name == "--compilation-config"
        and "key 'level'" in (dotted.matched_as or "")
    )
    assert v.option("--max_model").name == "--max-model-len"  # converted, then matched as a prefix
    assert "turns off" in (v.option("--no-enable-prefix-caching").matched_as or "")


def _argparse_data() -> EngineReleases:
    rules = ParserRules(attached_short=True, attached_values={"-X": "--opt-level"}, source="vllm/utils.py")
    env = {"VLLM_A": {"path": "vllm/envs.py"}, "SGLANG_B": {"path": "environ.py"}}
    return compact(
        "vllm",
        [
            Snapshot(
                version="1.0",
                ref="v1.0",
                archive="a",
                date=None,
                facts=Extracted(
                    parser=rules,
                    flags={"-O": _flag(kind="json"), "--opt-level": _flag()},
                    environment=env,
                    files=["x.py"],
                    env_prefix_aliases={"SGL_": "SGLANG_"},
                ),
            )
        ],
        source_url="https://example.invalid/{ref}/{path}",
        generated_by="test",
        env_namespaces=["VLLM_", "SGLANG_"],
    )


def test_a_value_attached_to_a_short_option_where_the_parser_reads_one() -> None:
    v = ReleaseView(_argparse_data(), resolve(_argparse_data(), "1.0"))
    short = v.option("-O3")
    assert (short.status, short.name, short.attached_value) == ("present", "-O", "3")
    rewritten = v.option("-X2")
    assert (rewritten.name, rewritten.attached_value) == ("--opt-level", "2")
    assert v.option("-Q3").status == "absent"


def test_environment_names_aliases_and_namespaces() -> None:
    v = ReleaseView(_argparse_data(), resolve(_argparse_data(), "1.0"))
    assert v.env_var("VLLM_A").status == "present"
    assert v.env_var("VLLM_NOPE").status == "absent"  # an engine name the release does not read
    aliased = v.env_var("SGL_B")
    assert aliased.status == "present" and "read as SGLANG_B" in (aliased.matched_as or "")
    assert v.env_var("NCCL_DEBUG").status == "unknown"  # outside the engine's own prefixes: a library may read it


def test_a_spelling_both_reads_accept_as_different_options_is_present_with_both() -> None:
    """llama.cpp --no-mmap: its own switch up to b7347, the negation of --mmap from b7698."""
    data = compact(
        "llamacpp",
        [
            _snap("7347", {"--no-mmap": _flag(takes_value=False)}),
            _snap("7698", {"--mmap": _flag(takes_value=False, negation="--no-mmap")}),
        ],
        source_url="https://example.invalid/{ref}/{path}",
        generated_by="test",
    )
    found = ReleaseView(data, resolve(data, "7412")).option("--no-mmap")
    assert found.status == "present" and len(found.alternatives) == 2
    assert ReleaseView(data, resolve(data, "7698")).option("--no-mmap").name == "--mmap"
