"""Checkpoint integrity: the shards the safetensors index names are on disk, and the tensors in their headers
match config.json (decoder layers, hidden size, vocabulary, parameter count), checked before anything is planned
on a half-downloaded or mislabelled checkpoint."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from switchover.errors import BadInput
from switchover.model.inventory import mtp_layers, text_config, weight_groups
from switchover.model.sizing import Tensor, safetensors_table
from switchover.model.source import read_json

INDEX = "model.safetensors.index.json"
PARAMS_TOLERANCE = 0.05  # the inventory leaves out biases and small extras; past 5 % a tensor group is missing
# decoder layers: model.layers.N (Llama family), model.language_model.layers.N and language_model.model.layers.N
# (multimodal wrappers); vision and audio towers have their own layers and are not counted
_LAYER = re.compile(r"(?:^|\.)(?:model|language_model)\.layers\.(\d+)\.")
_TOWER = re.compile(r"vision|visual|audio|mm_projector")
_SHOWN = 5  # names listed in a message; the count says how many more

Severity = Literal["error", "warning", "ok", "unchecked"]


class IntegrityFinding(BaseModel):
    """One check of a checkpoint: what was compared, the verdict and the figures, in words."""

    check: str = Field(description="shards | index_tensors | layers | hidden_size | vocab | params")
    severity: Severity
    message: str


class CheckpointIntegrity(BaseModel):
    """Every check of a model folder's weights against its index and config.json."""

    folder: str
    findings: list[IntegrityFinding] = Field(default_factory=list)

    @property
    def errors(self) -> list[IntegrityFinding]:
        """The findings that mean an engine cannot load the checkpoint as configured."""
        return [f for f in self.findings if f.severity == "error"]


def _names(items: list[str] | set[str]) -> str:
    ordered = sorted(items)
    more = f" and {len(ordered) - _SHOWN} more" if len(ordered) > _SHOWN else ""
    return ", ".join(ordered[:_SHOWN]) + more


def _shard_findings(
    folder: Path, weight_map: dict[str, str], tables: dict[Path, list[Tensor]]
) -> list[IntegrityFinding]:
    """Shards the index names that are absent, and tensors the index places in a shard whose header lacks them."""
    listed = set(weight_map.values())
    present = {p.name for p in tables}
    missing = listed - present
    if missing and missing == listed:
        return [
            IntegrityFinding(
                check="shards",
                severity="unchecked",
                message=(
                    f"none of the {len(listed)} shard(s) {INDEX} names is on disk: sizes come from the index, the "
                    "weights themselves are not checked"
                ),
            )
        ]
    if missing:
        return [
            IntegrityFinding(
                check="shards",
                severity="error",
                message=(
                    f"{len(missing)} of the {len(listed)} shard(s) {INDEX} names are missing from {folder}: "
                    f"{_names(missing)} (an interrupted download? fetch them again)"
                ),
            )
        ]
    in_headers = {p.name: {t[0] for t in table} for p, table in tables.items()}
    absent = {name for name, shard in weight_map.items() if name not in in_headers.get(shard, set())}
    if absent:
        return [
            IntegrityFinding(
                check="index_tensors",
                severity="error",
                message=(
                    f"{len(absent)} tensor(s) {INDEX} places in a shard are not in that shard's header: "
                    f"{_names(absent)} (a shard from another revision of the checkpoint?)"
                ),
            )
        ]
    return [
        IntegrityFinding(check="shards", severity="ok", message=f"all {len(listed)} shard(s) {INDEX} names are on disk")
    ]


def _layer_finding(cfg: dict[str, Any], names: list[str]) -> IntegrityFinding:
    """Decoder layers in the headers against num_hidden_layers (+ the MTP layers a checkpoint may carry)."""
    found = {int(m.group(1)) for n in names if not _TOWER.search(n) for m in [_LAYER.search(n)] if m}
    configured = cfg.get("num_hidden_layers")
    if not found or not isinstance(configured, int):
        return IntegrityFinding(
            check="layers",
            severity="unchecked",
            message=("no tensor is named model.layers.N: the decoder layer count is not checked"),
        )
    extra = mtp_layers(cfg)
    expected = configured + extra
    how = f"num_hidden_layers {configured}" + (f" + {extra} MTP layer(s)" if extra else "")
    gaps = sorted(set(range(max(found) + 1)) - found)
    if len(found) < configured or gaps:
        missing = sorted(set(range(configured)) - found)
        return IntegrityFinding(
            check="layers",
            severity="error",
            message=(
                f"the weights hold {len(found)} decoder layer(s) for {how}"
                + (f"; layers {_names({str(i) for i in missing})} have no tensors" if missing else "")
            ),
        )
    if len(found) > expected:
        return IntegrityFinding(
            check="layers",
            severity="warning",
            message=(f"the weights hold {len(found)} decoder layers for {how}: the extra layers are not loaded"),
        )
    return IntegrityFinding(check="layers", severity="ok", message=f"{len(found)} decoder layers, as {how}")


def _embedding_findings(cfg: dict[str, Any], shapes: dict[str, list[int]]) -> list[IntegrityFinding]:
    """The token embedding's [vocab, hidden] shape against vocab_size and hidden_size."""
    embeds = [(n, s) for n, s in shapes.items() if n.endswith("embed_tokens.weight") and not _TOWER.search(n)]
    if len(embeds) != 1 or len(embeds[0][1]) != 2:
        return [
            IntegrityFinding(
                check="hidden_size",
                severity="unchecked",
                message=("no single 2-D embed_tokens.weight tensor: hidden size and vocabulary are not checked"),
            )
        ]
    name, (rows, cols) = embeds[0]
    out: list[IntegrityFinding] = []
    for check, field, got in (("hidden_size", "hidden_size", cols), ("vocab", "vocab_size", rows)):
        want = cfg.get(field)
        if not isinstance(want, int):
            out.append(IntegrityFinding(check=check, severity="unchecked", message=f"config.json has no {field}"))
        elif want != got:
            out.append(
                IntegrityFinding(
                    check=check,
                    severity="error",
                    message=(f"{name} is [{rows}, {cols}]: {got} does not match config.json {field} {want}"),
                )
            )
        else:
            out.append(IntegrityFinding(check=check, severity="ok", message=f"{field} {want}, as {name}"))
    return out


def _params_finding(raw: dict[str, Any], cfg: dict[str, Any], shapes: dict[str, list[int]]) -> IntegrityFinding:
    """Parameters in the headers against the config's parameter inventory (16-bit checkpoints only: packed
    quantized tensors have other shapes)."""
    if raw.get("quantization_config") or isinstance(raw.get("vision_config"), dict):
        return IntegrityFinding(
            check="params",
            severity="unchecked",
            message=("quantized or multimodal checkpoint: packed or tower tensors make the inventory not comparable"),
        )
    stored = sum(math.prod(s) for s in shapes.values())
    if cfg.get("tie_word_embeddings") and "lm_head.weight" in shapes:
        stored -= math.prod(shapes["lm_head.weight"])  # a tied copy stored anyway is not a parameter of its own
    try:
        expected = sum(g.params for g in weight_groups(raw))
    except (KeyError, TypeError, ValueError):
        return IntegrityFinding(
            check="params", severity="unchecked", message="config.json lacks the fields for a parameter inventory"
        )
    if expected <= 0:
        return IntegrityFinding(check="params", severity="unchecked", message="the inventory has no parameters")
    drift = (stored - expected) / expected
    figures = f"{stored:,} parameters in the headers, {expected:,} from config.json ({drift:+.1%})"
    if abs(drift) > PARAMS_TOLERANCE:
        return IntegrityFinding(
            check="params",
            severity="warning",
            message=(f"{figures}: past {PARAMS_TOLERANCE:.0%}, the config does not describe these weights"),
        )
    return IntegrityFinding(check="params", severity="ok", message=figures)


def checkpoint_integrity(folder: Path, raw: dict[str, Any]) -> CheckpointIntegrity | None:
    """Checks of the safetensors in `folder` against its index and config.json; None when there are neither
    shards nor an index (a bare config.json, or GGUF)."""
    index = read_json(folder / INDEX)
    weight_map = (index or {}).get("weight_map")
    if isinstance(weight_map, dict) and not all(isinstance(v, str) for v in weight_map.values()):
        raise BadInput(f"{folder / INDEX}: weight_map must map tensor names to shard file names")
    shards = sorted(folder.glob("*.safetensors"))
    if isinstance(weight_map, dict) and weight_map:
        listed = set(weight_map.values())
        shards = [p for p in shards if p.name in listed]
    if not shards and not weight_map:
        return None
    tables = {p: safetensors_table(p) for p in shards}
    report = CheckpointIntegrity(folder=str(folder))
    if isinstance(weight_map, dict) and weight_map:
        report.findings += _shard_findings(folder, weight_map, tables)
        if any(f.severity in ("error", "unchecked") for f in report.findings):
            return report  # the tensors below would be counted over part of the checkpoint
    shapes = {t[0]: t[2] for table in tables.values() for t in table}
    cfg = text_config(raw)
    report.findings.append(_layer_finding(cfg, list(shapes)))
    report.findings += _embedding_findings(cfg, shapes)
    report.findings.append(_params_finding(raw, cfg, shapes))
    return report
