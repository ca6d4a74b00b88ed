"""Serving features and OpenAI API fields per engine, each answer cited: from the engine profile where it states
the fact (structured output, prefix caching, API semantics), else from `engines/data/matrix/features.yaml`.
A feature or engine without a fact is "unknown" (supported None), never assumed."""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, model_validator

from switchover.engines.cited import CitedFact
from switchover.engines.matrixfile import packaged, validated
from switchover.engines.names import ENGINES
from switchover.engines.profile import EngineProfile
from switchover.errors import BadInput

#: features `plan choose --feature` accepts; the first two are read from the profiles
FEATURES = ("structured_output", "prefix_caching", "tool_calls", "lora", "speculative_decoding")
#: OpenAI request/response fields `plan choose --api-field` accepts (`stop:N` asks for N stop strings)
API_FIELDS = (
    "response_format.json_schema",
    "stream_options.include_usage",
    "seed",
    "n",
    "tools",
    "min_tokens",
    "ignore_eos",
    "stop",
    "usage.prompt_tokens_details.cached_tokens",
)


class FeatureFact(CitedFact):
    """One engine's support of one feature."""

    supported: bool
    how: str | None = None


class FeatureData(BaseModel):
    """features.yaml: feature -> engine -> fact."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    features: dict[str, dict[str, FeatureFact]]

    @model_validator(mode="after")
    def _known(self) -> FeatureData:
        for name, engines in self.features.items():
            if name not in FEATURES[2:]:
                raise ValueError(f"features.{name}: not a feature of this file (known: {', '.join(FEATURES[2:])})")
            bad = sorted(set(engines) - set(ENGINES))
            if bad:
                raise ValueError(f"features.{name}: unknown engines {bad}")
        return self


@cache
def load_features() -> FeatureData:
    """The packaged data (engines/data/matrix/features.yaml), validated."""
    return validated(FeatureData, packaged("features.yaml"), "features.yaml")


class Support(BaseModel):
    """An answer: supported True / False / None (unknown), with what it rests on."""

    what: str
    supported: bool | None
    detail: str
    source: str | None = None
    verified: bool = False


def _api_fact(profile: EngineProfile, fact: str) -> tuple[str | None, bool]:
    return profile.api.sources.get(fact), fact not in profile.api.unverified


def feature_support(profile: EngineProfile, feature: str, data: FeatureData | None = None) -> Support:
    """Whether the engine offers a serving feature."""
    if feature == "structured_output":
        src, ver = _api_fact(profile, "openai_json_schema")
        ok = profile.api.openai_json_schema
        return Support(
            what=feature,
            supported=ok,
            source=src,
            verified=ver,
            detail="response_format json_schema accepted"
            if ok
            else "OpenAI-shaped response_format json_schema not accepted (the engine's own grammar API differs)",
        )
    if feature == "prefix_caching":
        flag = profile.flag("prefix_caching")
        if flag is None:
            return Support(what=feature, supported=None, detail="the profile states no prefix-caching knob")
        how = flag.flag or flag.negation or "no flag"
        return Support(
            what=feature,
            supported=True,
            source=flag.source,
            verified=flag.verified,
            detail=f"{how}, default {flag.default}",
        )
    fact = (data or load_features()).features.get(feature, {}).get(profile.name)
    if fact is None:
        return Support(what=feature, supported=None, detail=f"no fact for {profile.name} in features.yaml")
    return Support(
        what=feature, supported=fact.supported, detail=fact.how or "", source=fact.source, verified=fact.verified
    )


def parse_api_field(text: str) -> tuple[str, int | None]:
    """`FIELD` or `stop:N`; BadInput naming the value and the known fields otherwise."""
    name, sep, count = text.strip().partition(":")
    if name not in API_FIELDS:
        raise BadInput(f"--api-field {text[:60]!r}: unknown field", hint=f"known: {', '.join(API_FIELDS)}")
    if sep:
        if name != "stop" or not (count.isascii() and count.isdigit()) or not 1 <= int(count) <= 1000:
            raise BadInput(f"--api-field {text[:60]!r}: only stop takes a count, e.g. stop:6 (1-1000)")
        return name, int(count)
    return name, None


def api_field_support(
    profile: EngineProfile, field: str, count: int | None = None, data: FeatureData | None = None
) -> Support:
    """Whether the engine honours an OpenAI API field the clients send (or read) as they use it."""
    api = profile.api
    label = f"{field}:{count}" if count else field
    if field == "tools":
        s = feature_support(profile, "tool_calls", data)
        return s.model_copy(update={"what": label})
    table: dict[str, tuple[str, bool | None, str]] = {
        "response_format.json_schema": (
            "openai_json_schema",
            api.openai_json_schema,
            "accepted" if api.openai_json_schema else "not accepted",
        ),
        "stream_options.include_usage": (
            "streaming_usage",
            api.streaming_usage,
            "final usage chunk sent" if api.streaming_usage else "ignored",
        ),
        "seed": (
            "seed_per_request",
            {"honored": True, "needs_flag": True, "unverified": None}[api.seed_per_request],
            f"per-request seed {api.seed_per_request.replace('_', ' ')}",
        ),
        "n": ("n_gt_1", {"supported": True, "limited": True, "ignored": False}[api.n_gt_1], f"n>1 {api.n_gt_1}"),
        "min_tokens": (
            "min_tokens_field",
            api.min_tokens_field is not None,
            f"field {api.min_tokens_field}" if api.min_tokens_field else "no such field",
        ),
        "ignore_eos": (
            "ignore_eos_field",
            api.ignore_eos_field is not None,
            f"field {api.ignore_eos_field}" if api.ignore_eos_field else "no such field",
        ),
        "usage.prompt_tokens_details.cached_tokens": (
            "cached_tokens_reported",
            {"always": True, "with_flag": True, "field_present": True, "never": False}[api.cached_tokens_reported],
            f"cached tokens reported: {api.cached_tokens_reported.replace('_', ' ')}",
        ),
    }
    if field == "stop":
        src, ver = _api_fact(profile, "max_stop_strings")
        limit = api.max_stop_strings
        if limit is None:
            return Support(what=label, supported=True, source=src, verified=ver, detail="no documented limit")
        ok = None if count is None else count <= limit
        return Support(
            what=label,
            supported=True if count is None else ok,
            source=src,
            verified=ver,
            detail=f"at most {limit} stop strings" + (f", clients send {count}" if count else ""),
        )
    fact, ok, detail = table[field]
    src, ver = _api_fact(profile, fact)
    return Support(what=label, supported=ok, source=src, verified=ver, detail=detail)
