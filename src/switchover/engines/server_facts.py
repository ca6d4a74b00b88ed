"""What a running server reports about itself (its GET /version or /props answers): the release it runs and its
request-count cap, read where its engine's profile says (`release_scheme`, `request_cap:`), so that bench (the
binding cap) and probe (overload) read one function and a release outside the data's range is said, not guessed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from switchover.engines import profile as profiles
from switchover.engines.names import ENGINES
from switchover.engines.versions import build_tag
from switchover.errors import BadInput

if TYPE_CHECKING:
    from switchover.engines.profile import EngineProfile

VERSION_PATH = "/version"  # vLLM and SGLang: {"version": "0.6.3"}
BUILD_PATH = "/props"  # an engine numbered by build tags (llama.cpp): {"build_info": "b11434-0a1b2c3"}


def info_paths(profile: EngineProfile) -> list[str]:
    """The GET paths whose JSON answers `served_version` and `reported_cap` read for this engine, in order."""
    paths = [VERSION_PATH, *([BUILD_PATH] if profile.release_scheme == "build" else [])]
    return list(dict.fromkeys([*paths, *(src.path for src in profile.request_cap)]))


def served_version(profile: EngineProfile | None, info: Mapping[str, Any]) -> str | None:
    """The release an endpoint reported (`info`: path -> its JSON answer): /version's version, else for an engine
    numbered by build tags (its profile's release_scheme: llama.cpp) the /props build_info's tag; None: not said."""
    version = info.get(VERSION_PATH)
    if isinstance(version, dict) and isinstance(version.get("version"), str):
        return str(version["version"])
    props = info.get(BUILD_PATH)
    build = props.get("build_info") if isinstance(props, dict) else None
    if not isinstance(build, str) or profile is None or profile.release_scheme != "build":
        return None
    return build_tag(build)


def reported_cap(profile: EngineProfile, info: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """The request-count cap the endpoint reported where its profile's `request_cap:` says the server reports one:
    (cap, where it was read, cited); (None, why it was not used) at a release outside the range the data holds for;
    (None, None) when the endpoint reported none (no entry, no answer, or not a positive whole number)."""
    engine = profile.name
    version = served_version(profile, info)
    for src in profile.request_cap:
        cap = dotted_field(info.get(src.path), src.field)
        if not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0:
            continue
        try:
            holds = src.holds_at(version)
        except ValueError:
            return None, f"not read: {engine} {version!r} is not a release, so {src.where} cannot be placed"
        if not holds:
            return None, (
                f"not read: {src.where} is the request cap in {engine} {src.versions} ({src.source}); "
                f"{engine} {version} is outside that range"
            )
        return cap, f"{src.where} ({src.source}{_coverage(engine, version)})"
    return None, None


def served_profile(engine: str, info: Mapping[str, Any]) -> tuple[EngineProfile, str | None, str | None]:
    """The engine's profile with the flag and metric spellings of the release the endpoint reported: (profile, that
    release or None, a note or None). The note says what was assumed: the newest spellings when the server named no
    release or one in no form the release data reads, else the release data's own coverage note (between two
    releases read, newer or older than any read); None when the release was read exactly."""
    base = profiles.load_profile(engine)
    version = served_version(base, info)
    if version is None:
        return (
            base,
            None,
            f"{engine}: the server reported no release number; the newest spellings of its flags and metrics "
            "are assumed",
        )
    try:
        prof = profiles.load_profile(engine, version)
    except BadInput:
        return (
            base,
            None,
            (
                f"{engine}: the release the server reported ({version[:60]!r}) is in no form the release data "
                "reads; the newest spellings of its flags and metrics are assumed"
            ),
        )
    from switchover.engines.releases import view

    v = view(engine, version)
    return prof, version, v.resolution.note if v is not None else None


def engine_version(engine: str | None, info: Mapping[str, Any]) -> str | None:
    """`served_version` for an engine named by the user (None or an unknown name: /version only)."""
    return served_version(_profile(engine), info)


def request_cap(engine: str | None, info: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """`reported_cap` for an engine named by the user; (None, None) for None or an unknown name."""
    profile = _profile(engine)
    return reported_cap(profile, info) if profile is not None else (None, None)


def _profile(engine: str | None) -> EngineProfile | None:
    return profiles.load_profile(engine) if engine in ENGINES else None


def dotted_field(obj: Any, dotted: str) -> Any:
    """The value at a dotted path in nested JSON objects ("a.b" is obj["a"]["b"]); None where a level is missing."""
    for key in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _coverage(engine: str, version: str | None) -> str:
    """'; <the release data's note>' for a release newer than the newest read (what it has is assumed), else ''."""
    if version is None:
        return ""
    from switchover.engines.releases import view

    v = view(engine, version)
    note = v.resolution.note if v is not None and v.resolution.coverage == "newer_than_read" else None
    return f"; {note}" if note else ""
