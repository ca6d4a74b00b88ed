"""The endpoints of a bench run: reach them (exit 3 when they cannot be reached), pick the model, read a
fingerprint (/version, /props, /v1/models) and the engine profile's way to force the output length."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from switchover.bench.scrape import Scraper
from switchover.bench.workload import TokenCounter
from switchover.config import Migration
from switchover.config.bench import BenchSection
from switchover.errors import BadInput, Unreachable
from switchover.evidence.bench import BenchPlan, EndpointInfo, EndpointSpec
from switchover.inputs import base_url
from switchover.wire import EngineClient, Timeouts


@dataclass
class Endpoint:
    """One endpoint under load, with its client, fingerprint and counters."""

    spec: EndpointSpec
    client: EngineClient
    info: EndpointInfo
    extra: dict[str, Any]
    counter: TokenCounter
    min_field: str | None = None
    scraper: Scraper | None = None
    finished: int = 0
    failed: int = 0


def _trim(obj: Any) -> Any:
    raw = orjson.dumps(obj)
    if len(raw) <= 16384 or not isinstance(obj, dict):
        return obj if len(raw) <= 16384 else "(omitted: larger than 16 KB)"
    return {k: v for k, v in obj.items() if isinstance(v, str | int | float | bool) and len(str(v)) < 512}


async def open_endpoint(spec: EndpointSpec, plan: BenchPlan) -> Endpoint:
    """Reach the endpoint (exit 3 if not), pick the model, read its fingerprint and engine profile."""
    t = Timeouts(connect=5, first_byte=plan.timeout_s, idle=min(60.0, plan.timeout_s), total=plan.timeout_s)
    peak = max(plan.concurrency or [1]) if not plan.rates else (plan.max_inflight or 256)
    client = EngineClient(spec.url, api_key_env=spec.api_key_env, timeouts=t, max_connections=peak + 8)
    res = await client.request("GET", "/v1/models", timeout=15)
    if res.failure is not None:
        await client.close()
        raise Unreachable(f"{spec.label} endpoint: {res.failure.message}")
    served: list[str] = []
    if res.status == 200:
        try:
            served = [str(m["id"]) for m in res.json().get("data", [])]
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
            served = []
    model = spec.model or (served[0] if served else None)
    if model is None:
        await client.close()
        raise BadInput(f"{spec.label} endpoint {spec.url}: /v1/models lists no model; pass --model")
    info: dict[str, Any] = {}
    for path in ("/version", "/props"):
        r = await client.request("GET", path, timeout=5)
        if r.status == 200:
            with contextlib.suppress(orjson.JSONDecodeError):
                info[path] = _trim(r.json())
    extra: dict[str, Any] = {}
    min_field = None
    profile_version = version = version_note = None
    tokenize_path = "/tokenize"
    if spec.engine:
        from switchover.engines.server_facts import served_profile

        # the spellings of the release served (BadInput names the known engines)
        prof, version, version_note = served_profile(spec.engine, info)
        profile_version = prof.version_read
        tokenize_path = prof.api.tokenize_path or ""
        if prof.api.ignore_eos_field:
            extra[prof.api.ignore_eos_field] = True
        min_field = prof.api.min_tokens_field
        parts = [f"{k}=true" for k in extra] + ([f"{min_field}=max_tokens"] if min_field else [])
        control = ", ".join(parts) or f"{prof.display_name} has neither an ignore-EOS nor a min-tokens field"
    else:
        control = "no engine given: output may stop at EOS before max_tokens (N is still read from usage)"
    counter = TokenCounter(
        client,
        plan.api,
        model,
        use_tokenize=plan.use_tokenize and bool(tokenize_path),
        tokenize_path=tokenize_path or "/tokenize",
    )
    ep_info = EndpointInfo(
        label=spec.label,
        url=spec.url,
        engine=spec.engine,
        engine_profile=profile_version,
        engine_version=version,
        engine_version_note=version_note,
        model=model,
        served_models=served,
        info=info,
        output_control=control,
    )
    return Endpoint(spec, client, ep_info, extra, counter, min_field)


def load_tokenizer(path: str) -> Any:
    """The re-tokenizer for --tokenizer (a folder with tokenizer.json, or the file), loaded the one bounded way."""
    from switchover.model.tokenizer import encoder_from_file

    p = Path(path)
    file = p / "tokenizer.json" if p.is_dir() else p
    if not file.exists():
        raise BadInput(f"--tokenizer: {file} does not exist (give a folder with tokenizer.json)")
    try:
        return encoder_from_file(file, "--tokenizer (tokenizer.json)")
    except ImportError:
        raise BadInput("--tokenizer needs the `tokenizers` package (pip install 'switchover[model]')") from None
    except BadInput as exc:
        raise BadInput(f"--tokenizer: {exc.message}") from None


def endpoints_from(
    migration: Migration | None,
    old: str | None,
    new: str | None,
    url: str | None,
    old_engine: str | None,
    new_engine: str | None,
    engine: str | None,
    model: str | None,
    api_key_env: str | None = None,
) -> tuple[list[EndpointSpec], BenchSection | None]:
    """The endpoints to load: from switchover.yaml (`--config`, loaded by the caller), overridden by --old/--new, or
    one --url."""
    section = None
    eps: list[EndpointSpec] = []
    if migration is not None:
        section = migration.bench
        for label, ep in (("old", migration.old), ("new", migration.new)):
            eps.append(
                EndpointSpec(
                    label=label,
                    url=ep.url,
                    engine=ep.engine.value if ep.engine.value != "openai" else None,
                    model=ep.model,
                    api_key_env=ep.api_key_env,
                )
            )
    over = {"old": (old, old_engine), "new": (new, new_engine)}
    for label, (u, eng) in over.items():
        if u is None and eng is None:
            continue
        found = next((e for e in eps if e.label == label), None)
        if found is None:
            if u is None:
                raise BadInput(f"--{label}-engine given without --{label}")
            eps.append(EndpointSpec(label=label, url=u, engine=eng, model=model, api_key_env=api_key_env))
        else:
            i = eps.index(found)
            eps[i] = found.model_copy(update={k: v for k, v in (("url", u), ("engine", eng)) if v is not None})
    if url is not None:
        if eps:
            raise BadInput("give either --url (one endpoint) or --old/--new/--config, not both")
        eps.append(EndpointSpec(label="target", url=url, engine=engine, model=model, api_key_env=api_key_env))
    if not eps:
        raise BadInput("nothing to bench: give --url, --old and --new, or --config switchover.yaml")
    for e in eps:
        try:
            e.url = base_url(e.url)
        except ValueError as exc:
            raise BadInput(f"{e.label} URL {exc}") from None
        if model and e.model is None:
            e.model = model
    return eps, section
