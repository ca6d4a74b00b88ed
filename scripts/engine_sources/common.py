"""Downloading and unpacking release archives into the source cache, for the per-engine source modules.

The cache (default ~/.cache/switchover/engine-sources, `--cache`) keeps, per engine and release, only the files an
extractor reads (a few MB instead of a 50 MB sdist), so a second run reads no network at all.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import tarfile
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

from packaging.version import InvalidVersion, Version

TIMEOUT_S = 180


@dataclass(frozen=True)
class Release:
    """A release that can be read: its version, git ref (for URLs), archive URL (or description) and date."""

    version: str
    ref: str
    archive: str
    date: str | None = None


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
        return resp.read()


def pypi_releases(
    project: str,
    *,
    since: str | None = None,
    kinds: tuple[str, ...] = ("sdist", "bdist_wheel"),
    final_only: bool = False,
) -> list[tuple[Release, list[dict]]]:
    """Every release of a PyPI project (oldest first) with its files, from the JSON API."""
    url = f"https://pypi.org/pypi/{project}/json"
    data = json.loads(_get(url))
    out = []
    for version, files in data["releases"].items():
        try:
            v = Version(version)
        except InvalidVersion:
            continue
        if since and v < Version(since):
            continue
        if final_only and (v.is_prerelease or v.is_devrelease):
            continue
        usable = [f for f in files if f["packagetype"] in kinds and not f.get("yanked")]
        if not usable:
            continue
        for f in usable:
            f["url"] = urljoin(url, f["url"])
        date = min(f["upload_time"] for f in usable)[:10]
        out.append(
            (
                Release(
                    version=version,
                    ref=f"v{version}",
                    archive=f"https://pypi.org/project/{project}/{version}/",
                    date=date,
                ),
                usable,
            )
        )
    return sorted(out, key=lambda item: Version(item[0].version))


def unpack(
    payload: bytes, name: str, dest: Path, keep: Callable[[str], bool], strip: Callable[[str], str | None]
) -> int:
    """Write the members of a .tar.gz / .tgz / .whl / .zip that `keep` accepts to `dest`, each at `strip(path)`
    (None drops it). Returns the number of files written."""
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    written = 0

    def put(path: str, data: bytes) -> None:
        nonlocal written
        rel = strip(path)
        if rel is None or not keep(rel) or ".." in Path(rel).parts or rel.startswith("/"):
            return
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written += 1

    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(io.BytesIO(payload)) as zf:
            for info in zf.infolist():
                if not info.is_dir():
                    put(info.filename, zf.read(info))
    else:
        with tarfile.open(fileobj=io.BytesIO(payload), mode="r:*") as tf:
            for member in tf:
                if member.isfile():
                    fh = tf.extractfile(member)
                    if fh is not None:
                        put(member.name, fh.read())
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return written


def cached_tree(cache: Path, engine: str, version: str, fetch: Callable[[Path], None]) -> Path:
    """The cached source folder of one release, filled by `fetch(dest)` the first time."""
    dest = cache / engine / version
    if not (dest / ".complete").exists():
        say(f"  fetching {engine} {version} ...")
        fetch(dest)
        (dest / ".complete").write_text("ok\n")
    return dest


def download(url: str) -> bytes:
    say(f"    GET {url}")
    return _get(url)
