"""Compiled engines: a TensorRT-LLM engine directory read as what it is (an engine built for one GPU
architecture, with its ranks and the TensorRT-LLM version that built it), not as a checkpoint. The layout is the
format matrix's (`trtllm-engine` in engines/data/matrix/formats.yaml, cited)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from switchover.errors import BadInput
from switchover.textfile import load_json

FORMAT = "trtllm-engine"
_RANK = re.compile(r"^rank(\d{1,4})\.engine$")
MAX_RANKS = 4096
MAX_CONFIG_BYTES = 16 << 20  # an engine's config.json is a few KiB


class CompiledEngine(BaseModel):
    """A TensorRT-LLM engine directory: what built it, for what model and layout, and which rank files it has."""

    path: str
    format: str = FORMAT
    version: str | None = Field(default=None, description="the TensorRT-LLM version that built it (config.json)")
    architecture: str | None = None
    dtype: str | None = None
    quant_algo: str | None = None
    world_size: int = Field(description="ranks the engine was built for (tp_size x pp_size): GPUs it needs")
    tp_size: int | None = None
    pp_size: int | None = None
    rank_files: list[str] = Field(default_factory=list)
    missing_ranks: list[int] = Field(default_factory=list, description="ranks below world_size with no file")


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_RANKS else None


def _text(value: Any) -> str | None:
    return value[:80] if isinstance(value, str) and value else None


def read_compiled_engine(ref: str | Path) -> CompiledEngine | None:
    """The engine directory at `ref` (or its config.json); None when it is not a compiled engine (a checkpoint, a
    .gguf, a repo id). BadInput naming the field when config.json says engine but is malformed."""
    p = Path(ref).expanduser()
    folder = p.parent if p.is_file() and p.name == "config.json" else p
    if not folder.is_dir():
        return None
    config = folder / "config.json"
    cfg = load_json(config, max_bytes=MAX_CONFIG_BYTES, what="config.json") if config.is_file() else None
    if not isinstance(cfg, dict) or "build_config" not in cfg or "pretrained_config" not in cfg:
        return None
    pretrained = cfg["pretrained_config"]
    if not isinstance(pretrained, dict) or not isinstance(cfg["build_config"], dict):
        raise BadInput(
            f"{folder / 'config.json'}: pretrained_config and build_config must be objects in a "
            "TensorRT-LLM engine's config.json"
        )
    mapping: dict[str, Any] = pretrained["mapping"] if isinstance(pretrained.get("mapping"), dict) else {}
    tp, pp = _positive(mapping.get("tp_size")), _positive(mapping.get("pp_size"))
    world = _positive(mapping.get("world_size")) or ((tp or 1) * (pp or 1))
    if world > MAX_RANKS:
        raise BadInput(f"{folder / 'config.json'}: pretrained_config.mapping names {world} ranks")
    ranks = sorted((int(m.group(1)), f.name) for f in folder.iterdir() for m in [_RANK.match(f.name)] if m)
    present = {r for r, _ in ranks}
    quant: dict[str, Any] = pretrained["quantization"] if isinstance(pretrained.get("quantization"), dict) else {}
    return CompiledEngine(
        path=str(folder),
        version=_text(cfg.get("version")),
        architecture=_text(pretrained.get("architecture")),
        dtype=_text(pretrained.get("dtype")),
        quant_algo=_text(quant.get("quant_algo")),
        world_size=world,
        tp_size=tp,
        pp_size=pp,
        rank_files=[name for _, name in ranks],
        missing_ranks=[r for r in range(world) if r not in present],
    )
