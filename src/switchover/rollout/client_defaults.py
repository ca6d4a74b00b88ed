"""What the clients really send, and which of their defaults behave differently on new (docs/rollout.md#client-
defaults): from the ledger's `client` field (gateway/ledger.py client_sampling), the share of requests that set
each sampling field, the share relying on the engine's default, the common fixed prompt endings (as keyed hashes),
and the findings where old's and new's engine profiles differ for what those requests rely on.

A request that sets a field carries it over as sent; one that leaves it unset gets the engine's default, which
is the model's generation_config.json where the engine applies it (both profiles say whether) and the engine's
built-in otherwise. Only the built-ins are data here, so a difference found where either engine applies
generation_config.json says so: the model's file may set the field for both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from switchover.ledger_record import LedgerRecord, LedgerRow

# the sampling fields whose engine defaults the profiles hold (api.default_sampling), as the ledger names them
DEFAULTED = ("temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty")
# the profile's name for a field where an engine spells it differently (llama.cpp's repeat_penalty)
_ALIASES = {"repetition_penalty": ("repetition_penalty", "repeat_penalty")}
COMMON_SUFFIX = 0.10  # an ending on at least this share of requests (and two of them) is "common"


class FieldUse(BaseModel):
    """One sampling field across the requests: how many set it, and the values most sent."""

    field: str
    set: int = Field(description="Requests that set it")
    share_set: float
    share_default: float = Field(description="Share relying on the engine's default (did not set it)")
    values: dict[str, int] = Field(default_factory=dict, description="The most sent values -> requests (up to 5)")


class SuffixUse(BaseModel):
    """A fixed prompt ending many requests share (its keyed hash, never the text)."""

    role: str = Field(description="system or user")
    hash: str
    requests: int
    share: float


class Finding(BaseModel):
    """A client default that behaves differently on new, with the share of requests it touches."""

    field: str
    share: float = Field(description="Share of the requests it touches")
    detail: str
    source: str | None = Field(default=None, description="Where new's (or old's) fact comes from")


class ClientMix(BaseModel):
    """The client mix of a ledger window and what differs on new."""

    requests: int = Field(description="Request rows with the client's fields")
    without_fields: int = Field(default=0, description="Request rows without them (older gateways, non-JSON)")
    fields: list[FieldUse] = Field(default_factory=list)
    response_formats: dict[str, int] = Field(default_factory=dict)
    seeded: int = 0
    stop_sizes: dict[str, int] = Field(default_factory=dict, description="stop strings sent -> requests")
    suffixes: list[SuffixUse] = Field(default_factory=list)
    old_engine: str | None = None
    new_engine: str | None = None
    findings: list[Finding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class ClientMixCounter:
    """Counts the client fields of request rows as they stream past (holds counters, never the rows)."""

    def __init__(self) -> None:
        self.requests = self.without = self.seeded = 0
        self.set: Counter[str] = Counter()
        self.values: dict[str, Counter[str]] = {}
        self.formats: Counter[str] = Counter()
        self.stops: Counter[int] = Counter()
        self.endings: Counter[tuple[str, str]] = Counter()
        self.max_tokens_unset = 0

    def add(self, row: LedgerRow) -> None:
        if not isinstance(row, LedgerRecord) or row.outcome in ("bad_request", "unauthorized"):
            return
        c = row.client
        if c is None:
            self.without += 1
            return
        self.requests += 1
        self.set.update(c.set)
        for name in ("temperature", "top_p", "top_k", "presence_penalty", "frequency_penalty", "max_tokens"):
            value = getattr(c, name)
            if value is not None:
                self.values.setdefault(name, Counter())[f"{value:g}"] += 1
        self.max_tokens_unset += c.max_tokens is None
        self.seeded += c.seed
        if c.response_format:
            self.formats[c.response_format] += 1
        if c.stop is not None:
            self.stops[c.stop] += 1
        for role, h in (("system", c.system_suffix), ("user", c.user_suffix)):
            if h:
                self.endings[(role, h)] += 1

    def watch(self, rows: Iterable[LedgerRow]) -> Iterator[LedgerRow]:
        """Pass `rows` on, counting each (so one pass over the ledger feeds this and another reader)."""
        for r in rows:
            self.add(r)
            yield r

    def mix(self) -> ClientMix:
        n = self.requests
        names = sorted({*DEFAULTED, "max_tokens", "seed", "stop", "response_format", *self.set}) if n else []
        fields = [
            FieldUse(
                field=f,
                set=self.set[f],
                share_set=self.set[f] / n,
                share_default=1 - self.set[f] / n,
                values=dict(self.values.get(f, Counter()).most_common(5)),
            )
            for f in names
        ]
        common = sorted(self.endings.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        suffixes = [
            SuffixUse(role=role, hash=h, requests=k, share=k / n)
            for (role, h), k in common
            if k >= 2 and k / n >= COMMON_SUFFIX
        ]
        return ClientMix(
            requests=n,
            without_fields=self.without,
            fields=fields,
            response_formats=dict(self.formats),
            seeded=self.seeded,
            stop_sizes={str(k): v for k, v in sorted(self.stops.items())},
            suffixes=suffixes,
        )


def _default(api: Any, name: str) -> Any:
    return next((api.default_sampling[a] for a in _ALIASES.get(name, (name,)) if a in api.default_sampling), None)


def findings(counter: ClientMixCounter, old: Any, new: Any) -> list[Finding]:
    """Where old's and new's profiles (api facts) differ for what the requests rely on (pure)."""
    n = counter.requests
    if not n:
        return []
    out: list[Finding] = []
    gen = old.api.generation_config_applied or new.api.generation_config_applied
    caveat = (
        " (unless the model's generation_config.json sets it: "
        + ", ".join(f"{p.name} applies it" for p in (old, new) if p.api.generation_config_applied)
        + ")"
        if gen
        else ""
    )
    for name in DEFAULTED:
        share = 1 - counter.set[name] / n
        a, b = _default(old.api, name), _default(new.api, name)
        if share > 0 and a != b:
            out.append(
                Finding(
                    field=name,
                    share=share,
                    source=new.api.sources.get("default_sampling"),
                    detail=f"{share:.0%} of requests leave {name} unset: {old.name}'s default "
                    f"{_shown(a)}, {new.name}'s {_shown(b)}{caveat}",
                )
            )
    unset = counter.max_tokens_unset / n
    if unset and old.api.max_tokens_omitted != new.api.max_tokens_omitted:
        out.append(
            Finding(
                field="max_tokens",
                share=unset,
                source=new.api.sources.get("max_tokens_omitted"),
                detail=f"{unset:.0%} of requests send no max_tokens: {old.name} generates "
                f"{old.api.max_tokens_omitted}; {new.name} {new.api.max_tokens_omitted}",
            )
        )
    limit, before = new.api.max_stop_strings, old.api.max_stop_strings
    over = sum(
        v for k, v in counter.stops.items() if limit is not None and k > limit and (before is None or k <= before)
    )  # refused on new only
    if over:
        out.append(
            Finding(
                field="stop",
                share=over / n,
                source=new.api.sources.get("max_stop_strings"),
                detail=f"{over / n:.0%} of requests send more than {new.name}'s {limit} stop strings "
                f"({old.name} takes them)",
            )
        )
    schema = counter.formats.get("json_schema", 0)
    if schema and old.api.openai_json_schema and not new.api.openai_json_schema:
        out.append(
            Finding(
                field="response_format",
                share=schema / n,
                source=new.api.sources.get("openai_json_schema"),
                detail=f"{schema / n:.0%} of requests ask for a json_schema response_format, which "
                f"{new.name} does not take in the OpenAI shape",
            )
        )
    if counter.seeded and old.api.seed_per_request != new.api.seed_per_request:
        out.append(
            Finding(
                field="seed",
                share=counter.seeded / n,
                source=new.api.sources.get("seed_per_request"),
                detail=f"{counter.seeded / n:.0%} of requests send a seed: {old.name} "
                f"{old.api.seed_per_request}, {new.name} {new.api.seed_per_request}",
            )
        )
    return out


def _shown(v: Any) -> str:
    return "not in the profile (unknown)" if v is None else f"{v:g}" if isinstance(v, int | float) else str(v)


def client_mix(
    counter: ClientMixCounter,
    old_engine: str | None,
    new_engine: str | None,
    old_version: str | None = None,
    new_version: str | None = None,
) -> ClientMix:
    """The mix, with findings when both engines have a profile (a plain OpenAI server has none: said)."""
    from switchover.engines import load_profile

    mix = counter.mix()
    mix.old_engine, mix.new_engine = old_engine, new_engine
    if counter.without:
        mix.notes.append(
            f"{counter.without} request rows carry no client fields (written by an older gateway, or "
            "not a JSON generation request)"
        )
    if not old_engine or not new_engine:
        mix.notes.append("an endpoint has no engine profile (engine: openai): its defaults are unknown, not compared")
        return mix
    mix.findings = findings(counter, load_profile(old_engine, old_version), load_profile(new_engine, new_version))
    return mix


def ledger_of(m: Any, config_path: Path | None) -> Path | None:
    """The ledger a migration file points at: rollout.ledger, else the gateway's run_dir; None: neither."""
    base = config_path.resolve().parent if config_path is not None else Path.cwd()
    if m.rollout is not None and m.rollout.ledger:
        p = Path(m.rollout.ledger).expanduser()
        return p if p.is_absolute() else base / p
    if m.gateway is not None:
        return Path(m.gateway.resolved_run_dir(config_path or base / "switchover.yaml"))
    return None


def ledger_mix(m: Any, config_path: Path | None, since_s: float | None = None) -> ClientMix:
    """`check`'s clients part: the client mix of the migration's gateway ledger (the last `since_s` seconds, or
    all of it), with what differs on new; a missing ledger is said in the notes, with no requests."""
    import time

    from switchover.ledger_files import LedgerSkips, stream_ledger_rows

    path = ledger_of(m, config_path)
    engines = [None if ep.engine.value == "openai" else str(ep.engine.value) for ep in (m.old, m.new)]
    if path is None or not path.exists():
        mix = ClientMix(requests=0, old_engine=engines[0], new_engine=engines[1])
        mix.notes.append(
            "no gateway ledger to read (gateway.run_dir or rollout.ledger"
            + (f"; {path} does not exist" if path is not None else ": neither is set")
            + ")"
        )
        return mix
    counter = ClientMixCounter()
    skipped = LedgerSkips()
    for row in stream_ledger_rows(path, time.time() - since_s if since_s else None, skipped):
        counter.add(row)
    mix = client_mix(counter, engines[0], engines[1], m.old.engine_version, m.new.engine_version)
    note = skipped.note()
    if note:
        mix.notes.append(note)
    return mix
