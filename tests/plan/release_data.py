"""Synthetic release data for the plan tests (engines.extract.compact over hand-written facts), so each launch rule
is proven on the few options it needs and no result moves with the packaged data."""

from __future__ import annotations

from typing import Any

from switchover.engines.extract import Extracted, Snapshot, compact
from switchover.engines.releases import EngineReleases, ParserRules


def span(takes_value: bool = True, **extra: Any) -> dict[str, Any]:
    """One option's facts at a release (FlagSpan fields) as an extractor records them, declared in args.py."""
    return {"path": "args.py", "takes_value": takes_value, **extra}


def releases_of(engine: str, facts: dict[str, Extracted], tag: str = "v") -> EngineReleases:
    """The engine's release data from the facts read at each version (tagged `tag` + version)."""
    snaps = [Snapshot(version=v, ref=f"{tag}{v}", archive="test", date=None, facts=f) for v, f in facts.items()]
    return compact(engine, snaps, source_url="https://example.invalid/{ref}/{path}", generated_by="test")


def engine_data(
    engine: str, rules: ParserRules, by_version: dict[str, dict[str, dict[str, Any]]], tag: str = "v"
) -> EngineReleases:
    """The engine's release data from its option table at each version, every one parsed by `rules`."""
    return releases_of(
        engine, {v: Extracted(parser=rules, flags=flags, files=["args.py"]) for v, flags in by_version.items()}, tag
    )
