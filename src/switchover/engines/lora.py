"""LoRA semantics per engine, as cited data (engines/data/matrix/lora.yaml): how adapters are mounted (start-up or
run time), how a request picks one, how several combine and scale, the adapter file each engine reads, the offline
merge, and how a running server lists what it has mounted (read by the `lora.adapters` probe)."""

from __future__ import annotations

from functools import cache
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field

from switchover.engines.matrixfile import packaged, validated
from switchover.engines.versions import release_key


class AdapterListing(BaseModel):
    """Where a running server lists its mounted adapters, and the shape of the answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    shape: Literal["models_parent", "lora_adapters"] = Field(
        description="models_parent: /v1/models entries whose parent is the base model; lora_adapters: a JSON list "
        "of {id, path, scale}"
    )


class LoraSemantics(BaseModel):
    """One engine's LoRA behaviour for a set of releases, read at `read_at`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    versions: str
    read_at: str
    adapter_format: str
    startup: str
    runtime_load: str
    per_request: str
    stacking: str = Field(description="how several adapters combine, and whether mount order matters")
    scale: str
    offline_merge: str
    listing: AdapterListing
    sources: list[str] = Field(min_length=1)

    def covers(self, version: str) -> bool:
        """Whether this entry holds at `version` (a PEP 440 set, or one llama.cpp build named exactly)."""
        try:
            return SpecifierSet(self.versions).contains(version, prereleases=True)
        except InvalidSpecifier:
            return self.versions == version


class LoraData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    engines: dict[str, list[LoraSemantics]]


@cache
def lora_data() -> LoraData:
    """The packaged data, validated (a malformed file is a packaging bug, refused with the field named)."""
    return validated(LoraData, packaged("lora.yaml"), "lora.yaml")


def lora_semantics(engine: str, version: str | None = None) -> tuple[LoraSemantics | None, str | None]:
    """(the entry holding at `version`, or the newest read with a note; note) — (None, note) for an engine the
    data does not cover."""
    entries = lora_data().engines.get(engine, [])
    if not entries:
        return None, f"{engine}: LoRA semantics are not in the data"
    newest = max(entries, key=lambda e: release_key(e.read_at))
    if version is None:
        return newest, None
    hit = next((e for e in entries if e.covers(version)), None)
    if hit is not None:
        return hit, None
    return newest, f"{engine} {version}: LoRA semantics not read at this release; those read at {newest.read_at} shown"


def listings() -> list[AdapterListing]:
    """Every distinct adapter listing the data knows, in data order (a probe that does not know the engine tries
    each)."""
    seen: dict[tuple[str, str], AdapterListing] = {}
    for entries in lora_data().engines.values():
        for e in entries:
            seen.setdefault((e.listing.path, e.listing.shape), e.listing)
    return list(seen.values())
