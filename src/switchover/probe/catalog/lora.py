"""lora: which LoRA adapters a running server has mounted, read from the listings engines/data/matrix/lora.yaml
cites (llama-server's GET /lora-adapters; vLLM's and SGLang's /v1/models entries whose parent is the base model)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import orjson

from switchover.engines.lora import AdapterListing, listings
from switchover.probe.context import ProbeContext
from switchover.probe.registry import probe
from switchover.probe.report import Observation

MAX_ADAPTERS = 64  # names kept; a server with more is summarised by its count
MAX_NAME = 80


def _name(value: Any) -> str:
    return str(value)[:MAX_NAME]


def adapters_from(listing: AdapterListing, body: Any) -> tuple[list[str], dict[str, Any]] | None:
    """(adapter names, evidence) from one listing's JSON answer; None when the answer is not that listing's shape."""
    if listing.shape == "lora_adapters":
        if not isinstance(body, list) or not all(isinstance(x, dict) and "path" in x for x in body):
            return None
        names = [_name(PurePosixPath(str(x["path"])).stem) for x in body]
        scales = {n: x.get("scale") for n, x in zip(names, body, strict=True)}
        return names, {"scales": dict(list(scales.items())[:MAX_ADAPTERS])}
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    ids = {str(m.get("id")) for m in data if isinstance(m, dict)}
    found = [m for m in data if isinstance(m, dict) and m.get("parent") and m.get("parent") != m.get("id")]
    return [_name(m.get("id")) for m in found], {
        "base_models": sorted(_name(i) for i in ids)[:8],
        "parents": sorted({_name(m["parent"]) for m in found})[:8],
    }


@probe(
    id="lora.adapters",
    title="LoRA adapters the server has mounted",
    category="lora",
    request="GET /lora-adapters, then GET /v1/models (the adapter listings of engines/data/matrix/lora.yaml)",
    observes="the names of the mounted adapters: a /lora-adapters entry's file name, or a /v1/models entry whose "
    "parent is the base model",
    breaking=True,
    breaks="clients that pick an adapter by name (the model field) or by id (a lora list) get the "
    "base model or an error",
)
async def adapters(ctx: ProbeContext) -> Observation:
    tried: list[str] = []
    for listing in sorted(listings(), key=lambda x: x.shape != "lora_adapters"):  # the specific listing first
        res = await ctx.client.request("GET", listing.path)
        if res.failure is not None or res.status != 200:
            why = res.failure.message if res.failure is not None else f"HTTP {res.status}"
            tried.append(f"GET {listing.path}: {why}")
            continue
        try:
            read = adapters_from(listing, res.json())
        except orjson.JSONDecodeError:
            read = None
        if read is None:
            tried.append(f"GET {listing.path}: not an adapter listing")
            continue
        names, evidence = read
        shown = sorted(names)[:MAX_ADAPTERS]
        summary = (
            f"{len(names)} adapter(s): {', '.join(shown[:6])}" if names else "no adapters mounted"
        ) + f" (GET {listing.path})"
        return Observation(
            value=shown, summary=summary, detail={"listing": listing.path, "count": len(names), **evidence}
        )
    return Observation.skipped("not applicable: no LoRA adapter listing answered (" + "; ".join(tried)[:200] + ")")
