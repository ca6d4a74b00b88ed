"""PyPI releases of a Python engine (vLLM, SGLang) brought into the source cache: the sdist (or, where a release has
none, its smallest wheel), unpacked to the package's .py files, read once by the extractor, and pruned to the files
that reading opened, so a rerun needs no network and the cache stays a few hundred KB per release."""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from engine_sources.common import Release, cached_tree, download, pypi_releases, say, unpack

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from switchover.engines.extract import Extracted, SourceTree  # noqa: E402
from switchover.engines.extract.pyenv import may_read  # noqa: E402

_SKIP_DIRS = ("/tests/", "/test/", "/benchmarks/", "/examples/")
_EXTRACT = ROOT / "src" / "switchover" / "engines" / "extract"
_STAMP = ".reader"


class RecordingTree(SourceTree):
    """A SourceTree that remembers every file read; with `listed`, a listing of the whole package shows only the
    files `listed(text)` accepts (the environment scan's files: the others hold nothing it reads)."""

    def __init__(self, root: Path, package: str = "", listed: Callable[[str], bool] | None = None) -> None:
        super().__init__(root)
        self.opened: set[str] = set()
        self._package, self._listed = package, listed

    def read(self, path: str) -> str | None:
        text = super().read(path)
        if text is not None:
            self.opened.add(path)
        return text

    def paths(self, prefix: str = "", suffix: str = "") -> list[str]:
        found = super().paths(prefix, suffix)
        if self._listed is None or prefix != f"{self._package}/":
            return found
        listed = self._listed
        return [p for p in found if listed(SourceTree.read(self, p) or "")]


def listed(project: str, since: str) -> list[tuple[Release, list[dict]]]:
    """Every final and post release since `since`, with its PyPI files."""
    return pypi_releases(project, since=since, final_only=True)


def archive_of(files: list[dict]) -> dict:
    """The sdist, else the smallest wheel (its .py files are the same tree)."""
    sdists = [f for f in files if f["packagetype"] == "sdist"]
    return sdists[0] if sdists else min(files, key=lambda f: f["size"])


def fill(
    dest: Path,
    url: str,
    filename: str,
    package: str,
    extract: Callable[[SourceTree], Extracted],
    env_prefixes: tuple[str, ...],
) -> None:
    """Download one archive, unpack the package's .py files, read them, keep only what the reading opened. The
    environment scan lists the whole package but reads only files that can name a variable with one of
    `env_prefixes` (`pyenv.may_read`), so the listing leaves the others out and they are not kept."""
    payload = download(url)

    def keep(rel: str) -> bool:
        return rel.startswith(package + "/") and rel.endswith(".py") and not any(d in "/" + rel for d in _SKIP_DIRS)

    def strip(member: str) -> str | None:
        if filename.endswith(".whl"):
            return member
        parts = member.split("/", 1)  # sdist: <name>-<version>/<package>/...
        return parts[1] if len(parts) == 2 else None

    count = unpack(payload, filename, dest, keep, strip)
    (dest / _STAMP).write_text(reader_stamp(package) + "\n")
    view = RecordingTree(dest, package, lambda text: may_read(text, env_prefixes))
    facts = extract(view)  # the scan itself skips the files the listing leaves out, so these are the tree's facts
    for path in dest.rglob("*.py"):
        if path.relative_to(dest).as_posix() not in view.opened:
            path.unlink()
    for folder in sorted((p for p in dest.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(folder.iterdir()):
            folder.rmdir()
    again = extract(SourceTree(dest))
    if again != facts:
        raise SystemExit(
            f"{dest}: reading the pruned tree gives different facts from the full one; the extractor "
            "lists files it does not read"
        )
    say(f"    kept {len(view.opened)} of {count} files")


def reader_stamp(package: str) -> str:
    """A digest of the extractor's source: a cache pruned by another version of the reader may lack a file this
    one reads, so it is filled again."""
    digest = hashlib.sha256()
    for path in sorted(_EXTRACT.glob("*.py")):
        if path.name.startswith(("py", package)) or path.name == "__init__.py":
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def fetch_release(
    project: str,
    package: str,
    release: Release,
    files: list[dict],
    args: argparse.Namespace,
    extract: Callable[[SourceTree], Extracted],
    env_prefixes: tuple[str, ...],
) -> Path:
    chosen = archive_of(files)
    dest = args.cache / project / release.version
    stamp = dest / _STAMP
    if dest.exists() and (not stamp.is_file() or stamp.read_text().strip() != reader_stamp(package)):
        say(f"  {project} {release.version}: cached by another version of the reader, reading it again")
        shutil.rmtree(dest)
    return cached_tree(
        args.cache,
        project,
        release.version,
        lambda dest: fill(dest, chosen["url"], chosen["filename"], package, extract, env_prefixes),
    )


class PyPISource:
    """One Python engine's releases on PyPI as the driver reads them: `releases(args)` lists them (remembering each
    release's files) and `fetch(release, args)` brings one into the cache; a source module binds both to its names."""

    def __init__(
        self,
        project: str,
        package: str,
        since: str,
        extract: Callable[[SourceTree], Extracted],
        env_prefixes: tuple[str, ...],
    ) -> None:
        self.project, self.package, self.since = project, package, since
        self.extract, self.env_prefixes = extract, env_prefixes
        self._files: dict[str, list[dict]] = {}

    def releases(self, args: argparse.Namespace) -> list[Release]:
        """Every final and post release since `since`, oldest first."""
        out = []
        for release, files in listed(self.project, self.since):
            self._files[release.version] = files
            out.append(release)
        return out

    def fetch(self, release: Release, args: argparse.Namespace) -> Path:
        """The cached source folder of a release (downloaded and pruned the first time)."""
        if release.version not in self._files:
            self.releases(args)
        return fetch_release(
            self.project, self.package, release, self._files[release.version], args, self.extract, self.env_prefixes
        )

    def main(self, argv: list[str] | None = None) -> int:
        """`python scripts/engine_sources/<engine>.py fetch VERSION [--cache DIR]`: fill the cache for one release
        (what CI runs before the real-source tests), without writing any data."""
        ap = argparse.ArgumentParser(description=PyPISource.main.__doc__)
        ap.add_argument("command", choices=["fetch"])
        ap.add_argument("version")
        ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "switchover" / "engine-sources")
        args = ap.parse_args(argv)
        found = {r.version: r for r in self.releases(args)}
        if args.version not in found:
            raise SystemExit(f"{self.project} {args.version} is not a release on PyPI since {self.since}")
        print(self.fetch(found[args.version], args))
        return 0


__all__ = ["PyPISource", "RecordingTree", "archive_of", "fetch_release", "listed", "reader_stamp"]
