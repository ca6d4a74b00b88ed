"""The migration file `switchover.yaml`: pydantic models, a line-aware loader, and its JSON Schema."""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from switchover.bench.settings import BenchSection
from switchover.check.settings import CheckSection
from switchover.errors import BadInput
from switchover.gateway.config import GatewayConfig
from switchover.rollout.settings import RolloutSettings


class Engine(StrEnum):
    """Inference engines whose semantics switchover knows (engines/data/<engine>.yaml)."""

    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"
    TGI = "tgi"
    LLAMACPP = "llamacpp"
    OPENAI = "openai"  # any other OpenAI-compatible server: only the documented API is assumed


class Endpoint(BaseModel):
    """One side of the migration: where it is served, by what, and under which model name."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="Base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    engine: Engine = Field(description="Engine serving this endpoint")
    model: str | None = Field(
        default=None, description="Model name sent in requests; default: the first id from /v1/models"
    )
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the API key (the key itself never goes in this file)",
    )

    @field_validator("url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https://, got {value!r}")
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number in 0-65535
        except ValueError as exc:
            raise ValueError(f"not a valid URL ({exc}): {value!r}") from None
        if not parts.hostname:
            raise ValueError(f"no host in {value!r}")
        if "@" in parts.netloc or parts.query or parts.fragment or any(c in value for c in " \t\r\n\\"):
            raise ValueError(f"a base URL is scheme://host[:port][/path], without credentials, query or fragment: "
                             f"{value!r}")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and (not value or not value.replace("_", "").isalnum()):
            raise ValueError(f"must be an environment variable name like OPENAI_API_KEY, got {value!r}")
        return value

    def api_key(self) -> str | None:
        """The key from the environment, if one is configured and set."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None


class Migration(BaseModel):
    """The whole migration file."""

    model_config = ConfigDict(extra="forbid")

    old: Endpoint = Field(description="What serves the API today")
    new: Endpoint = Field(description="What should serve it after the switch")
    gateway: GatewayConfig | None = Field(default=None, description="Canary + shadow gateway (switchover gateway)")
    rollout: RolloutSettings | None = Field(default=None, description="Staged rollout (switchover rollout)")
    bench: BenchSection | None = Field(default=None, description="Bench workload defaults and SLOs (switchover bench)")
    check: CheckSection | None = Field(default=None, description="Pre-flight parts and thresholds (switchover check)")


def migration_schema() -> dict[str, Any]:
    """JSON Schema of switchover.yaml."""
    return Migration.model_json_schema()


class _LineLoader(yaml.SafeLoader):
    """The safe loader; composing with it keeps node positions so errors can name lines."""


def _compose_with_lines(text: str) -> tuple[Any, dict[tuple[Any, ...], int]]:
    node = yaml.compose(text, Loader=_LineLoader)
    lines: dict[tuple[Any, ...], int] = {}
    constructor = yaml.constructor.SafeConstructor()

    def walk(n: yaml.Node | None, path: tuple[Any, ...]) -> Any:
        if n is None:
            return None
        lines.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for k, v in n.value:
                key = constructor.construct_object(k)
                lines[(*path, key)] = k.start_mark.line + 1
                out[key] = walk(v, (*path, key))
            return out
        if isinstance(n, yaml.SequenceNode):
            return [walk(v, (*path, i)) for i, v in enumerate(n.value)]
        return constructor.construct_object(n, deep=True)

    return walk(node, ()), lines


def _line_for(loc: tuple[Any, ...], lines: dict[tuple[Any, ...], int]) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def load_migration(path: str | Path) -> Migration:
    """Read and validate a migration file; any problem raises BadInput naming the field and line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{p}: no such file", hint="create one; `switchover schema` prints the format") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{p}: cannot read: {exc}") from None
    try:
        data, lines = _compose_with_lines(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise BadInput(f"{p}: not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise BadInput(f"{p}: expected a mapping with `old:` and `new:` at the top level")
    try:
        return Migration.model_validate(data)
    except ValidationError as exc:
        raise BadInput(_describe(p, exc, lines), hint="`switchover schema` prints every field") from None


def _describe(path: Path, exc: ValidationError, lines: dict[tuple[Any, ...], int]) -> str:
    parts = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        field = ".".join(str(x) for x in loc) or "(top level)"
        line = _line_for(loc, lines)
        where = f"line {line}: " if line else ""
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field is missing"
        parts.append(f"{where}{field}: {msg}")
    return f"{path}: " + "; ".join(parts)
