"""One side of an alert-rule migration: an engine at a release, its metric intents at that release, and whether a
series name is served there (engines.releases: what each release read defines, with a URL to the source).

A series belongs to an engine by its prefix (`vllm:`, `sglang:`, `tgi_`, `llamacpp:`, `trtllm_`: the profiles'
`metric_prefix`), or by being a name one of its releases served without it; another engine never serves it. Whether
the engine itself serves it at the release is the release data's answer: present, absent (the rule would watch
nothing) or unknown (the release is not covered: said, never assumed).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

from switchover.engines import releases
from switchover.engines.profile import EngineProfile, list_profiles, load_profile, metric_variants, profile_key
from switchover.engines.versions import split_engine_ref
from switchover.errors import BadInput

Status = Literal["present", "absent", "unknown"]
PARTS = ("_bucket", "_sum", "_count", "_created")


@dataclass(frozen=True)
class Served:
    """Whether an engine release serves a series, why, and where to read it."""

    status: Status
    reason: str
    url: str | None = None


@cache
def prefixes() -> dict[str, str]:
    """metric prefix -> engine, for every engine with a profile."""
    return {load_profile(name).metric_prefix: name for name in list_profiles()}


@cache
def _unprefixed() -> dict[str, str]:
    """Series an engine serves (any release read) or names in its profile without its prefix -> the engine (the first
    TensorRT-LLM collector served `e2e_request_latency_seconds`, no `trtllm_`)."""
    out: dict[str, str] = {}
    for engine in list_profiles():
        prefix = load_profile(engine).metric_prefix
        data = releases.load_releases(engine)
        names = list(data.metrics) if data else []
        names += [spec.name for specs in metric_variants(engine).values() for spec in specs]
        for name in names:
            if not name.startswith(prefix):
                out.setdefault(name.removesuffix("_total"), engine)
    return out


def engine_of(series: str) -> str | None:
    """The engine whose namespace a series name is in (its prefix, or a name one of its releases served without it), or
    None for any other series (node exporter, the gateway's, recording rules)."""
    found = next((engine for prefix, engine in prefixes().items() if series.startswith(prefix)), None)
    if found is not None:
        return found
    base = series
    for part in PARTS:
        base = base.removesuffix(part)
    return _unprefixed().get(base.removesuffix("_total")) or _unprefixed().get(series.removesuffix("_total"))


@dataclass(frozen=True)
class EngineRelease:
    """An engine at a release: the profile resolved there, the release data's view, and what to tell the user."""

    engine: str
    version: str | None  # the release looked up: as asked, else the newest read; None when there is no release data
    asked: str | None
    profile: EngineProfile
    view: releases.ReleaseView | None

    @property
    def label(self) -> str:
        """How the output names this side ('vllm 0.6.3')."""
        return f"{self.engine} {self.version}" if self.version else self.engine

    @property
    def note(self) -> str | None:
        """What the user must know about the version (assumed, between reads, not covered, no data)."""
        if self.view is None:
            return f"no release data for {self.engine}: the series its releases serve are not checked"
        return self.view.resolution.note

    def serves(self, series: str) -> Served:
        """Whether this release serves `series` (a scraped name: histogram parts and counters' _total included)."""
        owner = engine_of(series)
        if owner != self.engine:
            where = f"a {owner} series" if owner else "not an engine series"
            return Served("absent", f"{series} is {where}: {self.label} never serves it")
        if self.view is None:
            return Served("unknown", self.note or "")
        first = self.view.metric(series)
        if first.status == "present":
            return Served("present", first.reason, first.url)
        for part in PARTS:  # a histogram's (or summary's) part: look the metric up
            if series.endswith(part):
                base = self.view.metric(series.removesuffix(part))
                kind = base.span.type if isinstance(base.span, releases.MetricSpan) else "unknown"
                if base.status == "present" and _has_part(kind, part):
                    return Served("present", base.reason, base.url)
                if base.status == "unknown":
                    return Served("unknown", base.reason)
        return Served(first.status, first.reason, first.url or self._last_url(first))

    def _last_url(self, lookup: releases.Lookup) -> str | None:
        """For a series gone at this release: its source at the last release read that served it."""
        if self.view is None or lookup.span is None:
            return None
        ref = next((r.ref for r in self.view.data.releases if r.version == lookup.span.last), None)
        return self.view.data.url(ref, lookup.span.path) if ref else None


def _has_part(kind: str, part: str) -> bool:
    if part == "_bucket":
        return kind in ("histogram", "unknown")
    if part in ("_sum", "_count"):
        return kind in ("histogram", "summary", "unknown")
    return True  # _created: every counter, histogram and summary of prometheus_client


def engine_release(ref: str, option: str) -> EngineRelease:
    """`vllm`, `vllm@0.6.3` or `vllm==0.6.3` resolved: the version as asked, else the newest release read (said in
    `note`); BadInput naming the option for an unknown engine or a malformed version."""
    try:
        name, asked = split_engine_ref(ref)
    except ValueError as exc:
        raise BadInput(f"{option}: {exc}", hint="give ENGINE or ENGINE@VERSION, e.g. vllm@0.6.3") from None
    try:
        key = profile_key(name)
    except BadInput as exc:
        raise BadInput(f"{option}: {exc.message}", hint=exc.hint) from None
    view = releases.view(key, asked)
    version = asked
    if version is None and view is not None and view.resolution.before is not None:
        version = view.resolution.before.version
    return EngineRelease(engine=key, version=version, asked=asked, profile=load_profile(key, version), view=view)
