"""Endpoint discovery, written once: one GET /v1/models per endpoint gives the served models, the model to use and,
where the engine's profile says the server reports it there, the context length; another path (llama.cpp's /props)
is asked only when the profile names it. How an engine answers while it loads is the profile's `readiness` too.

Without an engine (a plain OpenAI-compatible server, or a caller that does not know), every profile's way is
tried and the one that answered is named: a rule is never assumed for an engine that was not read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from switchover.termtext import printable_bytes
from switchover.wire.client import EngineClient
from switchover.wire.records import Failure

if TYPE_CHECKING:
    from switchover.engines.profile import ContextLengthSource, EngineProfile

MODELS_PATH = "/v1/models"


@dataclass(frozen=True)
class ModelListing:
    """What one GET /v1/models said: the model entries, or the status and text of another answer, or the failure."""

    status: int | None
    entries: tuple[dict[str, Any], ...] = ()
    text: str = ""  # a non-200 answer's body, printable, first 300 characters
    failure: Failure | None = None

    @property
    def answered(self) -> bool:
        """An HTTP answer came back (any status)."""
        return self.failure is None

    @property
    def ids(self) -> list[str]:
        return [str(e["id"]) for e in self.entries if "id" in e]

    def entry(self, model: str | None) -> dict[str, Any] | None:
        """The entry listing `model` (None: the first listed)."""
        for e in self.entries:
            if model is None or str(e.get("id")) == model:
                return e
        return None


@dataclass(frozen=True)
class ContextLength:
    """The context length the server reports, where it was read, or why it is not known."""

    tokens: int | None
    source: str | None = None  # e.g. "/v1/models max_model_len (vllm profile)"
    reason: str | None = None  # why tokens is None


@dataclass(frozen=True)
class Discovered:
    """One endpoint as found: its listing, the model to use (as given, else the first listed) and its context."""

    url: str
    listing: ModelListing
    model: str | None
    context: ContextLength | None = None  # None: not asked for


@dataclass(frozen=True)
class Target:
    """One endpoint a verb talks to; `discovered`, when a composer already found it, spares a second /v1/models."""

    url: str
    model: str | None = None
    api_key_env: str | None = None
    context: int | None = None
    engine: str | None = None  # a profile name (engines/data): its facts are used and checked
    engine_version: str | None = None
    discovered: Discovered | None = None


def _entries(body: bytes) -> tuple[dict[str, Any], ...]:
    try:
        data = orjson.loads(body).get("data", [])
    except (orjson.JSONDecodeError, AttributeError):
        return ()
    return tuple(e for e in data if isinstance(e, dict)) if isinstance(data, list) else ()


async def list_models(client: EngineClient, timeout_s: float = 15.0) -> ModelListing:
    """GET /v1/models once; failures and non-200 answers are returned, never raised."""
    res = await client.request("GET", MODELS_PATH, timeout=timeout_s)
    if res.failure is not None:
        return ModelListing(status=None, failure=res.failure)
    if res.status != 200:
        return ModelListing(status=res.status, text=printable_bytes(res.body, 300).strip())
    return ModelListing(status=200, entries=_entries(res.body))


def pick_model(listing: ModelListing, given: str | None) -> str | None:
    """The model as given, else the first id listed; None when neither."""
    if given:
        return given
    ids = listing.ids
    return ids[0] if ids else None


def profiles_for(engine: str | None, version: str | None = None) -> list[EngineProfile]:
    """The engine's profile at its release; no engine: every profile (whichever engine's way answers is named)."""
    from switchover.engines.names import ENGINES
    from switchover.engines.profile import load_profile

    if engine:
        return [load_profile(engine, version)]
    return [load_profile(name) for name in ENGINES]


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


async def _read_source(
    client: EngineClient, src: ContextLengthSource, listing: ModelListing, model: str | None, fetched: dict[str, Any]
) -> int | None:
    """One source's value: from the listing already read, else from its path (each path fetched once)."""
    from switchover.engines.server_facts import dotted_field

    if src.path == MODELS_PATH:
        return _positive_int(dotted_field(listing.entry(model), src.field))
    if src.path not in fetched:
        res = await client.request("GET", src.path, timeout=10)
        try:
            fetched[src.path] = res.json() if res.failure is None and res.status == 200 else None
        except orjson.JSONDecodeError:
            fetched[src.path] = None
    return _positive_int(dotted_field(fetched[src.path], src.field))


async def read_context(
    client: EngineClient, listing: ModelListing, model: str | None, profiles: Sequence[EngineProfile]
) -> ContextLength:
    """The context length from the first profile source that answers (a positive integer), naming it; the sources
    read from the model list already fetched go first (they cost no request)."""
    fetched: dict[str, Any] = {}
    tried: list[str] = []
    sources = [(prof, src) for prof in profiles for src in prof.context_sources()]
    for prof, src in sorted(sources, key=lambda ps: ps[1].path != MODELS_PATH):
        tokens = await _read_source(client, src, listing, model, fetched)
        if tokens is not None:
            return ContextLength(tokens=tokens, source=f"{src.where} ({prof.name} profile)")
        tried.append(f"{src.where} ({prof.name})")
    if not tried:
        names = ", ".join(p.name + (f" {p.resolved_version}" if p.resolved_version else "") for p in profiles)
        return ContextLength(tokens=None, reason=f"no context-length source read from the source of {names}")
    return ContextLength(tokens=None, reason="not reported: " + "; ".join(tried))


def loading_engine(status: int | None, text: str, profiles: Sequence[EngineProfile]) -> str | None:
    """The display name of the engine whose "still loading" answer (profile readiness) this is; None: none's."""
    for prof in profiles:
        if prof.readiness.is_loading_answer(status, text):
            return prof.display_name
    return None


async def discover(
    client: EngineClient,
    *,
    model: str | None = None,
    engine: str | None = None,
    version: str | None = None,
    context: bool = True,
    timeout_s: float = 15.0,
) -> Discovered:
    """List the models once, pick the model and, when asked, read the context length the profile says where."""
    listing = await list_models(client, timeout_s)
    chosen = pick_model(listing, model)
    ctx = None
    if context and listing.answered:
        ctx = await read_context(client, listing, chosen, profiles_for(engine, version))
    return Discovered(url=client.base_url, listing=listing, model=chosen, context=ctx)


async def discover_target(
    client: EngineClient, target: Target, *, context: bool = True, timeout_s: float = 15.0
) -> Discovered:
    """A target's discovery: the one a composer passed in, else found now (a context given on it is kept)."""
    if target.discovered is not None:
        found = target.discovered
    else:
        found = await discover(
            client,
            model=target.model,
            engine=target.engine,
            version=target.engine_version,
            context=context and target.context is None,
            timeout_s=timeout_s,
        )
    if target.context is not None:
        found = Discovered(
            url=found.url,
            listing=found.listing,
            model=found.model,
            context=ContextLength(tokens=target.context, source="given"),
        )
    return found
