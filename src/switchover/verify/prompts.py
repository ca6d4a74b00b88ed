"""Prompt sets for `verify`: a built-in set (English, Chinese, code, JSON; packaged as data/prompts.jsonl) and user
JSONL files in the same format."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from switchover.errors import BadInput
from switchover.jsonl import jsonl_values
from switchover.textfile import check_text_file, read_text

MAX_PROMPTS_BYTES = 64 << 20  # every prompt is sent to both sides: far past any useful verify set


class PromptCase(BaseModel):
    """One prompt: chat messages or a plain completion prompt."""

    id: str
    kind: str = "user"
    messages: list[dict[str, Any]] | None = None
    prompt: str | None = None
    max_tokens: int = Field(default=48, ge=1, le=4096)

    @model_validator(mode="after")
    def _one_of(self) -> PromptCase:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("give exactly one of `messages` or `prompt`")
        return self

    def as_messages(self) -> list[dict[str, Any]]:
        return self.messages if self.messages is not None else [{"role": "user", "content": self.prompt}]


def parse_prompts(lines: Iterable[str], source: str) -> list[PromptCase]:
    """Prompts from JSONL lines, {"id"?, "kind"?, "messages" | "prompt", "max_tokens"?} per line; a bad line is
    BadInput naming `source` and the line number."""
    cases: list[PromptCase] = []
    for no, obj in jsonl_values(lines, source):
        if not isinstance(obj, dict):
            raise BadInput(f"{source} line {no}: expected a JSON object")
        obj.setdefault("id", f"line-{no}")
        try:
            cases.append(PromptCase.model_validate(obj))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "line"
            raise BadInput(f"{source} line {no}: {where}: {err['msg']}") from None
    if not cases:
        raise BadInput(f"{source}: no prompts in the file")
    return cases


BUILTIN: list[PromptCase] = parse_prompts(
    resources.files("switchover.verify").joinpath("data", "prompts.jsonl").read_text(encoding="utf-8").splitlines(),
    "built-in prompt set (switchover/verify/data/prompts.jsonl)",
)
"""English, Chinese, code and JSON prompts; the packaged file is in the format `verify --prompts FILE` reads."""


def load_jsonl(path: str | Path) -> list[PromptCase]:
    """Read prompts from a JSONL file (the format of parse_prompts)."""
    p = Path(path)
    try:  # a regular UTF-8 file of bounded size: a FIFO, device, binary or oversized file is one line (exit 2)
        check_text_file(p, max_bytes=MAX_PROMPTS_BYTES, what="prompts file (JSONL)")  # no read of a device
        lines = read_text(p, max_bytes=MAX_PROMPTS_BYTES, what="prompts file (JSONL)").splitlines()
    except BadInput as exc:
        raise BadInput(f"--prompts {exc.message}", hint=exc.hint) from None
    return parse_prompts(lines, f"--prompts {p}")
