"""The migration file `switchover.yaml`: pydantic models, a line-aware loader, and its JSON Schema."""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from switchover import yamlfile
from switchover.config.bench import BenchSection
from switchover.config.check import CheckSection
from switchover.config.gateway import GatewayConfig
from switchover.config.rollout import RolloutSettings
from switchover.errors import BadInput
from switchover.inputs import BaseUrl, EngineRelease, EnvVarName


class Engine(StrEnum):
    """Inference engines whose semantics switchover knows (engines/data/<engine>.yaml); openai: any other
    OpenAI-compatible server, where only the documented API is assumed."""

    # engines/names.py's ENGINES plus openai, spelled here because config imports no package that reads the
    # migration file (tests/unit/test_package_cycles.py); tests/wire/test_discovery.py holds the two equal
    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"
    TGI = "tgi"
    LLAMACPP = "llamacpp"
    OPENAI = "openai"


class Endpoint(BaseModel):
    """One side of the migration: where it is served, by what, and under which model name."""

    model_config = ConfigDict(extra="forbid")

    url: BaseUrl = Field(description="Base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    engine: Engine = Field(description="Engine serving this endpoint")
    model: str | None = Field(
        default=None, description="Model name sent in requests; default: the first id from /v1/models"
    )
    api_key_env: EnvVarName | None = Field(
        default=None,
        description="Name of the environment variable holding the API key (the key itself never goes in this file)",
    )

    engine_version: EngineRelease | None = Field(
        default=None,
        description="Engine release this endpoint runs, as the engine spells it: 0.11.0, 0.8.5.post1, 1.2.0rc1, "
        "v2.0.2 (TGI), b3216 (llama.cpp). `check` plans and compares at it, `hw diff --migration` checks "
        "its build against the target host; unset: the newest release known (said)",
    )

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


def load_migration(path: str | Path) -> Migration:
    """Read and validate a migration file; any problem raises BadInput naming the field and line."""
    p = Path(path)
    if not p.exists():
        raise BadInput(f"{p}: no such file", hint="create one; `switchover schema` prints the format")
    doc = yamlfile.load_file(p, what="migration file (YAML)")
    if not isinstance(doc.data, dict):
        raise BadInput(f"{p}: expected a mapping with `old:` and `new:` at the top level")
    try:
        return Migration.model_validate(doc.data)
    except ValidationError as exc:
        raise BadInput(_describe(p, exc, doc), hint="`switchover schema` prints every field") from None


def _describe(path: Path, exc: ValidationError, doc: yamlfile.YamlDoc) -> str:
    parts = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        field = ".".join(str(x) for x in loc) or "(top level)"
        line = doc.line_of(loc)
        where = f"line {line}: " if line else ""
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field is missing"
        parts.append(f"{where}{field}: {msg}")
    return f"{path}: " + "; ".join(parts)
