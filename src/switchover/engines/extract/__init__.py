"""Reading an engine release's source into the facts `engines.releases` serves: one `Snapshot` per release (every
launch option and metric name it defines), merged into spans of consecutive releases by `compact`.

Each engine has a module here (`vllm.py`, `sglang.py`, `tgi.py`, `llamacpp.py`, `trtllm.py`) with
`extract(tree: SourceTree) -> Extracted`: pure functions of the source text (no imports of the engine, no network).
`scripts/engine_releases.py` finds and downloads the releases and writes engines/data/releases/<engine>.json; the
tests re-run an extractor on a release's source and compare with the packaged data.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from switchover.engines.releases import EngineReleases, EnvSpan, FlagSpan, MetricSpan, ParserRules, ReleaseRead
from switchover.engines.versions import release_key


class SourceTree:
    """A release's source files by path relative to the package or repository root (a directory, or files held in
    memory when they came out of an archive)."""

    def __init__(self, root: Path | None = None, files: dict[str, str] | None = None) -> None:
        self.root = root
        self._files = dict(files or {})

    def read(self, path: str) -> str | None:
        """The text of a file, or None when the release has no such file."""
        if path in self._files:
            return self._files[path]
        if self.root is not None:
            full = self.root / path
            if full.is_file():
                return full.read_text(encoding="utf-8", errors="replace")
        return None

    def paths(self, prefix: str = "", suffix: str = "") -> list[str]:
        """Every file path under `prefix` ending with `suffix`, sorted."""
        found = {p for p in self._files if p.startswith(prefix) and p.endswith(suffix)}
        if self.root is not None:
            base = self.root / prefix if prefix else self.root
            if base.is_dir():
                found |= {p.relative_to(self.root).as_posix() for p in base.rglob(f"*{suffix}") if p.is_file()}
            elif base.is_file() and base.name.endswith(suffix):
                found.add(prefix)
        return sorted(found)


@dataclass
class Extracted:
    """What one release's source defines: options by canonical name (FlagSpan fields but first/last), metric names
    with their type and file, the parser's matching rules, and the files read."""

    parser: ParserRules
    flags: dict[str, dict[str, Any]] = field(default_factory=dict)
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    environment: dict[str, dict[str, Any]] = field(default_factory=dict)  # EnvSpan fields but first/last
    env_prefix_aliases: dict[str, str] = field(default_factory=dict)  # ReleaseRead.env_prefix_aliases


@dataclass
class Snapshot:
    """One release read: where from, and what it defines."""

    version: str
    ref: str
    archive: str
    date: str | None
    facts: Extracted


def compact(
    engine: str,
    snapshots: Iterable[Snapshot],
    *,
    source_url: str,
    generated_by: str,
    notes: list[str] | None = None,
    env_namespaces: list[str] | None = None,
) -> EngineReleases:
    """Merge per-release facts into spans: a span is a maximal run of consecutive releases read in which the
    option (or metric) is defined identically; a release that lacks it ends the span."""
    ordered = sorted(snapshots, key=lambda s: release_key(s.version))
    flags = {name: [FlagSpan(**span) for span in spans] for name, spans in _runs(ordered, "flags").items()}
    metrics = {name: [MetricSpan(**span) for span in spans] for name, spans in _runs(ordered, "metrics").items()}
    environment = {name: [EnvSpan(**span) for span in spans] for name, spans in _runs(ordered, "environment").items()}
    releases = [
        ReleaseRead(
            version=s.version,
            ref=s.ref,
            archive=s.archive,
            date=s.date,
            parser=s.facts.parser,
            files=sorted(set(s.facts.files)),
            env_prefix_aliases=dict(s.facts.env_prefix_aliases),
        )
        for s in ordered
    ]
    return EngineReleases(
        engine=engine,
        generated_by=generated_by,
        source_url=source_url,
        releases=releases,
        flags=flags,
        metrics=metrics,
        environment=environment,
        notes=list(notes or []),
        env_namespaces=list(env_namespaces or []),
    )


def _runs(ordered: list[Snapshot], attr: str) -> dict[str, list[dict[str, Any]]]:
    """name -> spans (fact fields plus first/last) over the releases in order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name in sorted({n for s in ordered for n in getattr(s.facts, attr)}):
        spans: list[dict[str, Any]] = []
        for snap in ordered:
            raw = getattr(snap.facts, attr).get(name)
            if raw is None:
                continue
            fact = _MODELS[attr](first=snap.version, last=snap.version, **raw).model_dump(exclude={"first", "last"})
            last = spans[-1] if spans else None
            if (
                last is not None
                and last["_next"] == snap.version
                and {k: v for k, v in last.items() if k not in ("first", "last", "_next")} == fact
            ):
                last["last"] = snap.version
            else:
                spans.append({**fact, "first": snap.version, "last": snap.version})
            spans[-1]["_next"] = _following(ordered, snap.version)
        out[name] = [{k: v for k, v in span.items() if k != "_next"} for span in spans]
    return out


_MODELS: dict[str, type[FlagSpan] | type[MetricSpan] | type[EnvSpan]] = {
    "flags": FlagSpan,
    "metrics": MetricSpan,
    "environment": EnvSpan,
}


def _following(ordered: list[Snapshot], version: str) -> str | None:
    versions = [s.version for s in ordered]
    i = versions.index(version)
    return versions[i + 1] if i + 1 < len(versions) else None


def expand(data: EngineReleases) -> list[Snapshot]:
    """The per-release facts behind packaged data (the inverse of `compact`), so one more release can be added."""
    out: list[Snapshot] = []
    for rel in data.releases:
        key = release_key(rel.version)
        facts = Extracted(parser=rel.parser, files=list(rel.files), env_prefix_aliases=dict(rel.env_prefix_aliases))
        for name, spans in data.flags.items():
            for span in spans:
                if release_key(span.first) <= key <= release_key(span.last):
                    facts.flags[name] = span.model_dump(exclude={"first", "last"})
        for name, mspans in data.metrics.items():
            for mspan in mspans:
                if release_key(mspan.first) <= key <= release_key(mspan.last):
                    facts.metrics[name] = mspan.model_dump(exclude={"first", "last"})
        for name, espans in data.environment.items():
            for espan in espans:
                if release_key(espan.first) <= key <= release_key(espan.last):
                    facts.environment[name] = espan.model_dump(exclude={"first", "last"})
        out.append(Snapshot(version=rel.version, ref=rel.ref, archive=rel.archive, date=rel.date, facts=facts))
    return out
