"""TGI releases: the `vX.Y.Z` tags (>= v2.0.0) of a git clone or mirror of huggingface/text-generation-inference
(`--git DIR`; default: the mirror at /work/.mirror/huggingface+text-generation-inference/repo when it exists). Only
the files the extractors read are copied into the cache: the launcher's, router's and backends' Rust sources and the
Python server's sources (server/text_generation_server, for the environment variables it reads)."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from packaging.version import Version

from engine_sources.common import Release, cached_tree, unpack

SOURCE_URL = "https://github.com/huggingface/text-generation-inference/blob/{ref}/{path}"
REPO = "https://github.com/huggingface/text-generation-inference"
MIRROR = Path("/work/.mirror/huggingface+text-generation-inference/repo")
SINCE = Version("2.0.0")
_READ = ("launcher/src/", "router/", "backends/", "server/text_generation_server/")
_PYTHON = "server/text_generation_server/"
# TGI's own variables mostly have no prefix (ATTENTION, USE_FLASH_ATTENTION): a name no tag reads is unknown (the
# libraries it loads, huggingface_hub, torch, NCCL, read their own) unless it is in TGI's one namespace
ENV_PREFIXES = ("TGI_",)
LAYOUT = "rust+server-python"  # what a cached tree holds; a tree cached with another layout is read again


def git_dir(args: argparse.Namespace) -> Path:
    """The repository to read: --git, else the known mirror; SystemExit naming both when neither exists."""
    chosen = getattr(args, "git", None) or (MIRROR if MIRROR.exists() else None)
    if chosen is None:
        raise SystemExit(
            f"tgi: no git repository to read tags from: pass --git DIR (a clone of {REPO}); {MIRROR} does not exist"
        )
    return Path(chosen)


def _git(repo: Path, *argv: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={_dot_git(repo)}", *argv], check=True, capture_output=True, text=True
    ).stdout


def _dot_git(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


def releases(args: argparse.Namespace) -> list[Release]:
    """Every final `vX.Y.Z` tag >= v2.0.0, oldest first, dated by the tagged commit."""
    repo = git_dir(args)
    out = []
    for line in _git(
        repo, "for-each-ref", "--format=%(refname:short) %(*committerdate:short)%(committerdate:short)", "refs/tags"
    ).splitlines():
        tag, _, date = line.partition(" ")
        if not tag.startswith("v") or not all(p.isdigit() for p in tag[1:].split(".")) or tag.count(".") != 2:
            continue
        if Version(tag[1:]) < SINCE:
            continue
        out.append(Release(version=tag[1:], ref=tag, archive=f"git tag {tag} of {REPO}", date=date[:10] or None))
    return sorted(out, key=lambda r: Version(r.version))


def fetch(release: Release, args: argparse.Namespace) -> Path:
    """The release's launcher, router and backends Rust files, copied out of the repository into the cache."""
    repo = git_dir(args)

    def copy(dest: Path) -> None:
        listed = _git(repo, "ls-tree", "--name-only", release.ref, "--", *(p.rstrip("/") for p in _READ)).split()
        tar = subprocess.run(
            ["git", f"--git-dir={_dot_git(repo)}", "archive", "--format=tar", release.ref, "--", *listed],
            check=True,
            capture_output=True,
        ).stdout
        unpack(tar, "source.tar", dest, keep=keep, strip=lambda p: p)
        (dest / ".layout").write_text(LAYOUT + "\n")

    stale = args.cache / "tgi" / release.version
    if (stale / ".complete").exists() and not _layout_is(stale, LAYOUT):
        (stale / ".complete").unlink()
    return cached_tree(args.cache, "tgi", release.version, copy)


def keep(path: str) -> bool:
    """The files read: Rust sources (launcher, router, backends) and the Python server's modules."""
    return path.endswith(".rs") or (path.startswith(_PYTHON) and path.endswith(".py"))


def _layout_is(tree: Path, layout: str) -> bool:
    marker = tree / ".layout"
    return marker.exists() and marker.read_text().strip() == layout
