"""What a running server reports about itself, read where its profile says (engines/server_facts.py): the GET paths
asked, the release it reports; the request cap's cases are in tests/bench/test_capbind.py and tests/probe."""

from __future__ import annotations

import pytest

from switchover.bench import capbind
from switchover.engines.profile import load_profile
from switchover.engines.server_facts import engine_version, info_paths, request_cap, served_version


@pytest.mark.parametrize(
    ("engine", "paths"),
    [
        ("llamacpp", ["/version", "/props"]),  # numbered by build tags (/props build_info) and its request_cap entry
        ("vllm", ["/version"]),  # no request_cap entry: nothing more is asked
        ("sglang", ["/version"]),
    ],
)
def test_the_paths_asked_are_the_version_and_each_request_cap_entry_once(engine: str, paths: list[str]) -> None:
    assert info_paths(load_profile(engine)) == paths


@pytest.mark.parametrize(
    ("engine", "info", "version"),
    [
        ("vllm", {"/version": {"version": "0.32.0"}}, "0.32.0"),
        ("llamacpp", {"/props": {"build_info": "b11434-0a1b2c3"}}, "b11434"),
        ("llamacpp", {"/props": {"build_info": "b0-unknown"}}, None),  # built without its git history
        ("vllm", {"/props": {"build_info": "b11434-0a1b2c3"}}, None),  # vLLM is not numbered by build tags
        (None, {"/version": {"version": "1.2"}}, "1.2"),  # no engine named: /version is still read
        ("llamacpp", {"/version": {"version": 3}}, None),  # not text
    ],
)
def test_the_release_is_what_the_server_reported_in_the_form_its_profile_numbers_releases(
    engine: str | None, info: dict, version: str | None
) -> None:
    profile = load_profile(engine) if engine else None
    assert served_version(profile, info) == version == engine_version(engine, info)


def test_bench_reads_the_same_functions_probe_does() -> None:
    """One home for the fact: bench's binding cap uses these, not a copy."""
    assert capbind.request_cap is request_cap and capbind.engine_version is engine_version


@pytest.mark.parametrize(
    ("info", "version", "kv_name", "note"),
    [
        ({"/version": {"version": "0.8.0"}}, "0.8.0", "vllm:gpu_cache_usage_perc", None),  # read exactly
        ({"/version": {"version": "0.32.0"}}, "0.32.0", "vllm:kv_cache_usage_perc", None),
        ({}, None, "vllm:kv_cache_usage_perc", "reported no release number"),
        ({"/version": {"version": "weird!"}}, None, "vllm:kv_cache_usage_perc", "in no form the release data reads"),
        ({"/version": {"version": "99.0.0"}}, "99.0.0", "vllm:kv_cache_usage_perc", "newer than the newest release"),
    ],
)
def test_the_profile_served_has_the_spellings_of_the_release_reported_and_says_what_it_assumed(
    info: dict, version: str | None, kv_name: str, note: str | None
) -> None:
    from switchover.engines.server_facts import served_profile

    prof, got, said = served_profile("vllm", info)
    assert got == version and prof.metrics["kv_usage"].name == kv_name
    assert (said is None) if note is None else (note in (said or ""))


def test_a_long_or_hostile_release_text_is_quoted_short_and_escaped_in_the_note() -> None:
    from switchover.engines.server_facts import served_profile

    _, version, note = served_profile("vllm", {"/version": {"version": "\x1b[2J" + "x" * 5000}})
    assert version is None and note is not None
    assert "\x1b" not in note and len(note) < 300
