"""Prompt sets for `verify`: a built-in set (English, Chinese, code, JSON) and user JSONL files."""

from __future__ import annotations

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


def _u(id: str, kind: str, text: str, max_tokens: int = 48) -> PromptCase:
    return PromptCase(id=id, kind=kind, messages=[{"role": "user", "content": text}], max_tokens=max_tokens)


BUILTIN: list[PromptCase] = [
    _u("en-capital", "english", "What is the capital of France? Answer in one sentence."),
    _u("en-explain", "english", "Explain in two sentences why the sky is blue."),
    _u("en-list", "english", "List three fruits that are red."),
    _u("en-story", "english", "Write the first sentence of a story about a lighthouse keeper."),
    _u("zh-capital", "chinese", "法国的首都是哪里?请用一句话回答。"),
    _u("zh-explain", "chinese", "用两句话解释为什么天空是蓝色的。"),
    _u("zh-poem", "chinese", "写一句关于秋天的诗。"),
    _u("code-add", "code", "Write a Python function add_two_numbers(a, b) that returns their sum."),
    _u("code-reverse", "code", "Write a Python function that reverses a string."),
    _u("code-sql", "code", "Write a SQL query that counts the rows of a table named users."),
    _u("json-person", "json", 'Return a JSON object with keys "name" and "age" for a 30-year-old named Ana.'),
    _u("json-list", "json", "Return a JSON array of the first five prime numbers."),
]


def load_jsonl(path: str | Path) -> list[PromptCase]:
    """Read prompts from JSONL: {"id"?, "kind"?, "messages" | "prompt", "max_tokens"?} per line."""
    p = Path(path)
    try:  # a regular UTF-8 file of bounded size: a FIFO, device, binary or oversized file is one line (exit 2)
        check_text_file(p, max_bytes=MAX_PROMPTS_BYTES, what="prompts file (JSONL)")  # no read of a device
        lines = read_text(p, max_bytes=MAX_PROMPTS_BYTES, what="prompts file (JSONL)").splitlines()
    except BadInput as exc:
        raise BadInput(f"--prompts {exc.message}", hint=exc.hint) from None
    cases: list[PromptCase] = []
    for no, obj in jsonl_values(lines, f"--prompts {p}"):
        if not isinstance(obj, dict):
            raise BadInput(f"--prompts {p} line {no}: expected a JSON object")
        obj.setdefault("id", f"line-{no}")
        try:
            cases.append(PromptCase.model_validate(obj))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "line"
            raise BadInput(f"--prompts {p} line {no}: {where}: {err['msg']}") from None
    if not cases:
        raise BadInput(f"--prompts {p}: no prompts in the file")
    return cases
