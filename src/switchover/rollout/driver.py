"""Apply a stage to the gateway by editing `gateway.weight` / `gateway.rollback` in the switchover.yaml it
watches (it hot-reloads). The edit is line-level, so every other line and every comment stays as written,
and the file is replaced atomically so the gateway never reads half a file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from switchover.errors import BadInput
from switchover.rollout.store import write_atomic
from switchover.yamlfile import load_document

_TOP_KEY = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)\s*:(?P<rest>.*)$")
_CHILD = re.compile(r"^(?P<indent>[ ]+)(?P<key>[A-Za-z_][\w-]*)\s*:(?P<rest>.*)$")


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _split_comment(rest: str) -> tuple[str, str]:
    """' 5   # note' -> ('5', '   # note'); keeps the spacing before the comment."""
    m = re.search(r"(\s+#.*)$", rest)
    if m is None:
        return rest.strip(), ""
    return rest[: m.start()].strip(), m.group(1)


def set_gateway_fields(text: str, updates: dict[str, Any]) -> str:
    """`text` with gateway.<key> set to each value; missing keys are added under `gateway:`."""
    lines = text.splitlines(keepends=True)
    start = None
    for i, line in enumerate(lines):
        m = _TOP_KEY.match(line.rstrip("\r\n"))
        if m and m.group("key") == "gateway":
            value, _ = _split_comment(m.group("rest"))
            if value not in ("", "|", ">"):
                raise BadInput(
                    "switchover.yaml: `gateway:` is written inline; the rollout edits it line by line",
                    hint="write the gateway section as a block mapping (one key per line)",
                )
            start = i
            break
    if start is None:
        raise BadInput(
            "switchover.yaml has no `gateway:` section for the rollout to drive",
            hint="add the gateway section (see docs/gateway.md) before starting a rollout",
        )
    indent = None
    found: dict[str, int] = {}
    for j in range(start + 1, len(lines)):
        raw = lines[j].rstrip("\r\n")
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if not raw.startswith((" ", "\t")):
            break
        m = _CHILD.match(raw)
        if m is None:
            continue
        if indent is None:
            indent = m.group("indent")
        if m.group("indent") == indent:
            found[m.group("key")] = j
    indent = indent or "  "
    newline = "\r\n" if lines and lines[start].endswith("\r\n") else "\n"
    inserts: list[str] = []
    for key, value in updates.items():
        if key in found:
            j = found[key]
            raw = lines[j]
            eol = raw[len(raw.rstrip("\r\n")) :]
            m = _CHILD.match(raw.rstrip("\r\n"))
            assert m is not None
            _, comment = _split_comment(m.group("rest"))
            lines[j] = f"{m.group('indent')}{key}: {_scalar(value)}{comment}{eol or newline}"
        else:
            inserts.append(f"{indent}{key}: {_scalar(value)}{newline}")
    if inserts:
        if not lines[start].endswith(("\n", "\r")):
            lines[start] += newline
        lines[start + 1 : start + 1] = inserts
    return "".join(lines)


def apply_to_gateway(config_path: Path, *, weight: int, rollback: bool) -> dict[str, Any]:
    """Set the gateway's weight (percent) and rollback flag in the file it watches; verify by re-reading."""
    if not 0 <= weight <= 100:
        raise BadInput(f"gateway weight must be 0..100, got {weight}")
    try:
        text = config_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"{config_path}: cannot read: {exc}") from None
    updated = set_gateway_fields(text, {"weight": weight, "rollback": rollback})
    before = load_document(text, str(config_path)).data or {}
    after = load_document(updated, str(config_path)).data or {}
    gw = after.get("gateway") or {}
    if gw.get("weight") != weight or gw.get("rollback") is not rollback:
        raise BadInput(
            f"{config_path}: could not set gateway.weight/rollback by a line edit",
            hint="keep `weight:` and `rollback:` as plain keys directly under `gateway:`",
        )
    rest_before = {k: v for k, v in before.items() if k != "gateway"}
    rest_after = {k: v for k, v in after.items() if k != "gateway"}
    gw_before = {k: v for k, v in (before.get("gateway") or {}).items() if k not in ("weight", "rollback")}
    gw_after = {k: v for k, v in gw.items() if k not in ("weight", "rollback")}
    if rest_before != rest_after or gw_before != gw_after:  # pragma: no cover - guarded by the line parser
        raise BadInput(f"{config_path}: the edit would change other fields; nothing was written")
    if updated != text:
        write_atomic(config_path, updated.encode("utf-8"))
    return {"weight": weight, "rollback": rollback}
