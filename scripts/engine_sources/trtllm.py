"""TensorRT-LLM releases (>= 1.0) for trtllm-serve. PyPI's tensorrt-llm archives are placeholders and NVIDIA's
repository is too big to fetch here, so the source is read from one of

* a git clone of NVIDIA/TensorRT-LLM (`--git DIR`): every `v1.*` tag, its version read from tensorrt_llm/version.py
  at the tag, cited at the tag;
* the one readable copy (the default): tensorrt_llm vendored under third_party/tensorrt_llm of the third-party
  repository nctu6/vllm-tensorrt at commit 95c8e29a2 (2026-02-07; its version.py says 1.3.0rc3, five days before
  PyPI's 1.3.0rc3 upload, so it is a snapshot labelled 1.3.0rc3, not necessarily the release), read from its git
  mirror (/work/.mirror/nctu6+vllm-tensorrt/repo) and cited in that repository at that commit, labelled as such in
  each release's `archive`;
* the source cache (<cache>/trtllm/<version>/): the files an earlier run read (source.json says from where), or
  copies from one commit of NVIDIA/TensorRT-LLM or a fork with source.json {"repo": ..., "commit": ...}; the version
  is tensorrt_llm/version.py of that same commit (a copy whose version.py is missing, unreadable or of another
  commit is not a release).

One data file has one URL template (`SOURCE_URL`), so releases from the vendored copy and from NVIDIA's repository
are not mixed in one run: `releases()` sets the template of the source it lists.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from pathlib import Path

from packaging.version import InvalidVersion, Version

from engine_sources.common import Release, cached_tree, say
from switchover.engines.extract import SourceTree
from switchover.engines.extract.trtllm import extract

NVIDIA_URL = "https://github.com/NVIDIA/TensorRT-LLM/blob/{ref}/{path}"
REPO = "https://github.com/NVIDIA/TensorRT-LLM"
VENDORED_REPO = "nctu6/vllm-tensorrt"
VENDORED_COMMIT = "95c8e29a28cb60170413e25671dffba8b68cd863"
VENDORED_PREFIX = "third_party/tensorrt_llm"
VENDORED_MIRROR = Path("/work/.mirror/nctu6+vllm-tensorrt/repo")
VENDORED_URL = f"https://github.com/{VENDORED_REPO}/blob/{{ref}}/{VENDORED_PREFIX}/{{path}}"
SOURCE_URL = VENDORED_URL  # set by releases() to the template of the source it lists
SINCE = Version("1.0.0")
NOTES = [
    "yaml:KEY entries are not command-line options but the keys of the YAML file given to --config / "
    "--extra_llm_api_options: every field of TorchLlmArgs (the PyTorch backend, trtllm-serve's default; the LLM "
    "constructor refuses any other top-level key) in tensorrt_llm/llmapi/llm_args.py, with the fields of each nested "
    "config class as yaml:SECTION.KEY (speculative_config: the keys of every decoding config, decoding_type choosing "
    "one). A key of kind json with no yaml:KEY.* entry is a free-form mapping, and one of kind unknown a type that "
    "could not be read: the keys inside either are unknown, not absent. The TensorRT backend's TrtLlmArgs keys are "
    "not listed.",
    "Counters are stored as prometheus_client serves them (with _total).",
]
VERSION_PY = "tensorrt_llm/version.py"
FILES = (
    "tensorrt_llm/commands/serve.py",
    "tensorrt_llm/commands/common_llm_options.py",
    "tensorrt_llm/metrics/collector.py",
    "tensorrt_llm/llmapi/llm_args.py",
    VERSION_PY,
)  # named in archives
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
        if "prefix" in where:  # read out of a vendored copy by an earlier run
            out.append(
                Release(
                    version=version,
                    ref=where["commit"],
                    date=where.get("date"),
                    archive=vendored_archive(
                        where["repo"], where["commit"], where.get("date"), version, where["prefix"]
                    ),
                )
            )
            continue
        out.append(
            Release(
                version=version,
                ref=where["commit"],
                archive=f"{', '.join(where.get('files', FILES))} of https://github.com/{where['repo']} at "
                f"commit {where['commit']} (copies from the public code index)",
            )
        )
    return out


def vendored_archive(repo: str, commit: str, date: str | None, version: str, prefix: str) -> str:
    """What a vendored copy is, said where each release read names its archive."""
    return (
        f"{prefix} of github.com/{repo} at {commit[:9]} ({date or 'date unknown'}; its version.py says "
        f"{version}): a third-party copy, NVIDIA's repository could not be read here"
    )


def is_vendored(release: Release) -> bool:
    return release.archive.startswith(f"{VENDORED_PREFIX} of github.com/")


class GitTree(SourceTree):
    """The files of one commit of a git repository under a folder, read on demand (`git show`), remembering each
    file read so only those are cached."""

    def __init__(self, git_dir: Path, commit: str, prefix: str) -> None:
        super().__init__()
        self.git_dir, self.commit, self.prefix = git_dir, commit, prefix
        self.fetched: dict[str, str | None] = {}

    def read(self, path: str) -> str | None:
        if path not in self.fetched:
            spec = f"{self.commit}:{self.prefix}/{path}" if self.prefix else f"{self.commit}:{path}"
            done = subprocess.run(["git", f"--git-dir={self.git_dir}", "show", spec], capture_output=True)
            self.fetched[path] = done.stdout.decode("utf-8", errors="replace") if done.returncode == 0 else None
        return self.fetched[path]


def mirror_of(args: argparse.Namespace) -> Path:
    """The vendored copy's git mirror: `args.mirror` when given, else the known path."""
    return Path(getattr(args, "mirror", None) or VENDORED_MIRROR)


def vendored_release(mirror: Path = VENDORED_MIRROR, commit: str = VENDORED_COMMIT) -> Release | None:
    """The vendored copy as a release (its own version.py), or None when the mirror is absent or states none."""
    if not mirror.exists():
        return None
    text = GitTree(mirror, commit, VENDORED_PREFIX).read(VERSION_PY)
    version = version_of(text) if text is not None else None
    if version is None:
        return None
    date = _git(mirror, "log", "-1", "--format=%cs", commit).strip() or None
    return Release(
        version=version,
        ref=commit,
        date=date,
        archive=vendored_archive(VENDORED_REPO, commit, date, version, VENDORED_PREFIX),
    )


def releases(args: argparse.Namespace) -> list[Release]:
    """The clone's tags when --git is given, else the cached copies and the vendored copy; oldest first. Sets
    SOURCE_URL to the template of what is listed (NVIDIA's repository, or the vendored copy's)."""
    global SOURCE_URL
    if getattr(args, "git", None):
        found = git_releases(Path(args.git))
    else:
        found = cached_releases(args.cache)
        vendored = vendored_release(mirror_of(args))
        if vendored is not None and not any(r.ref == vendored.ref for r in found):
            found.append(vendored)
    if not found:
        raise SystemExit(
            "trtllm: no release to read: pass --git DIR (a clone of "
            f"{REPO} with its tags), have the mirror {mirror_of(args)}, or put copies in "
            f"{args.cache / 'trtllm'}/<version>/ with source.json"
        )
    if len({is_vendored(r) for r in found}) > 1:
        listed = ", ".join(f"{r.version} ({r.archive})" for r in found)
        raise SystemExit(
            "trtllm: releases from the vendored copy and from NVIDIA's repository cannot share one data "
            f"file (one URL template per engine): {listed}"
        )
    SOURCE_URL = VENDORED_URL if is_vendored(found[0]) else NVIDIA_URL
    return sorted({r.version: r for r in found}.values(), key=lambda r: Version(r.version))


def fetch(release: Release, args: argparse.Namespace) -> Path:
    """The release's files: the cached copy, or the files the extractor reads (and version.py) copied into the cache
    from the clone at the tag (--git) or from the vendored copy's mirror."""
    if getattr(args, "git", None):
        git_dir = Path(args.git) / ".git" if (Path(args.git) / ".git").exists() else Path(args.git)
        tree = GitTree(git_dir, release.ref, "")
        where: dict[str, str | None] = {"repo": "NVIDIA/TensorRT-LLM", "tag": release.ref}
    elif is_vendored(release) and mirror_of(args).exists():
        tree = GitTree(mirror_of(args), release.ref, VENDORED_PREFIX)
        where = {"repo": VENDORED_REPO, "commit": release.ref, "date": release.date, "prefix": VENDORED_PREFIX}
    else:
        return args.cache / "trtllm" / release.version
    return cached_tree(args.cache, "trtllm", release.version, lambda dest: _copy_read(tree, where, dest))


def _copy_read(tree: GitTree, where: dict[str, str | None], dest: Path) -> None:
    """Every file the extractor reads (and version.py) into `dest`, with source.json saying whence."""
    extract(tree)
    tree.read(VERSION_PY)
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    for path, text in tree.fetched.items():
        if text is None:
            continue
        (tmp / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp / path).write_text(text, encoding="utf-8")
    (tmp / "source.json").write_text(json.dumps(where) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
