"""TensorRT-LLM releases (>= 1.0) for trtllm-serve. PyPI's tensorrt-llm archives are placeholders and the repository
is too big to fetch here, so the source is read from either

* a git clone (`--git DIR`): every `v1.*` tag, its version read from tensorrt_llm/version.py at the tag, cited at the
  tag; or
* the source cache (<cache>/trtllm/<version>/): copies of the files read (tensorrt_llm/commands/serve.py,
  tensorrt_llm/version.py, tensorrt_llm/metrics/collector.py, ...) taken from one commit of NVIDIA/TensorRT-LLM or a
  GitHub fork of it, with source.json {"repo": ..., "commit": ...}; the version is tensorrt_llm/version.py of that
  same commit (a copy whose version.py is missing, unreadable or of another commit is not a release), cited at the
  commit (GitHub serves a fork's commits under the parent repository too).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

from packaging.version import InvalidVersion, Version

from engine_sources.common import Release, cached_tree, say, unpack

SOURCE_URL = "https://github.com/NVIDIA/TensorRT-LLM/blob/{ref}/{path}"
REPO = "https://github.com/NVIDIA/TensorRT-LLM"
SINCE = Version("1.0.0")
VERSION_PY = "tensorrt_llm/version.py"
FILES = ("tensorrt_llm/commands/serve.py", "tensorrt_llm/commands/common_llm_options.py",
         "tensorrt_llm/metrics/collector.py", VERSION_PY)
_VERSION = re.compile(r'^__version__\s*=\s*"([^"]+)"\s*$', re.M)


def version_of(text: str) -> str | None:
    """The `__version__` a version.py declares once and cleanly (a file with merge-conflict markers or two
    declarations states no version)."""
    found = _VERSION.findall(text)
    if len(found) != 1 or re.search(r"^(<<<<<<<|=======|>>>>>>>)", text, re.M):
        return None
    try:
        Version(found[0])
    except InvalidVersion:
        return None
    return found[0]


def _git(repo: Path, *argv: str) -> str:
    git_dir = repo / ".git" if (repo / ".git").exists() else repo
    return subprocess.run(["git", f"--git-dir={git_dir}", *argv], check=True, capture_output=True, text=True).stdout


def git_releases(repo: Path) -> list[Release]:
    """Every `v*` tag of a clone whose version.py states a version >= 1.0."""
    out = []
    for tag in _git(repo, "tag", "--list", "v*").split():
        try:
            text = _git(repo, "show", f"{tag}:{VERSION_PY}")
        except subprocess.CalledProcessError:
            continue
        version = version_of(text)
        if version is None or Version(version) < SINCE:
            continue
        date = _git(repo, "log", "-1", "--format=%cs", tag).strip() or None
        out.append(Release(version=version, ref=tag, archive=f"git tag {tag} of {REPO}", date=date))
    return out


def cached_releases(cache: Path) -> list[Release]:
    """Every copy in the source cache whose version.py (same commit) states a version >= 1.0."""
    out = []
    for meta in sorted((cache / "trtllm").glob("*/source.json")):
        where = json.loads(meta.read_text())
        version_py = meta.parent / VERSION_PY
        version = version_of(version_py.read_text()) if version_py.exists() else None
        if version is None or version != meta.parent.name or Version(version) < SINCE:
            say(f"trtllm: {meta.parent} skipped: its {VERSION_PY} does not state version {meta.parent.name}")
            continue
        if "tag" in where:  # copied out of a clone by an earlier --git run
            out.append(Release(version=version, ref=where["tag"], archive=f"git tag {where['tag']} of {REPO}"))
            continue
        out.append(Release(version=version, ref=where["commit"],
                           archive=f"{', '.join(where.get('files', FILES))} of https://github.com/{where['repo']} at "
                                   f"commit {where['commit']} (copies from the public code index)"))
    return out


def releases(args: argparse.Namespace) -> list[Release]:
    """The clone's tags when --git is given, else the cached copies; oldest first."""
    found = git_releases(Path(args.git)) if getattr(args, "git", None) else cached_releases(args.cache)
    if not found:
        raise SystemExit("trtllm: no release to read: pass --git DIR (a clone of "
                         f"{REPO} with its tags) or put copies in {args.cache / 'trtllm'}/<version>/ "
                         "with source.json")
    return sorted({r.version: r for r in found}.values(), key=lambda r: Version(r.version))


def fetch(release: Release, args: argparse.Namespace) -> Path:
    """The release's files: the cached copy, or (with --git) the files at the tag copied into the cache."""
    if not getattr(args, "git", None):
        return args.cache / "trtllm" / release.version

    def copy(dest: Path) -> None:
        present = [p for p in FILES if _git(Path(args.git), "ls-tree", "--name-only", release.ref, "--", p).strip()]
        git_dir = Path(args.git) / ".git" if (Path(args.git) / ".git").exists() else Path(args.git)
        tar = subprocess.run(["git", f"--git-dir={git_dir}", "archive", "--format=tar", release.ref, "--", *present],
                             check=True, capture_output=True).stdout
        unpack(tar, "source.tar", dest, keep=lambda p: True, strip=lambda p: p)
        (dest / "source.json").write_text(json.dumps({"repo": "NVIDIA/TensorRT-LLM", "tag": release.ref}) + "\n")

    return cached_tree(args.cache, "trtllm", release.version, copy)
