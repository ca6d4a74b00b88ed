"""Chat templates: load (HF chat_template.jinja / tokenizer_config.json, GGUF tokenizer.chat_template), render
the same conversations with both, diff them, and read off role markers and system-prompt placement."""

from __future__ import annotations

import difflib
import hashlib
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from switchover.model.source import MAX_JSON_BYTES, gguf_fields, read_json, resolve
from switchover.textfile import read_text

CONVERSATIONS: dict[str, list[dict[str, str]]] = {
    "system+user": [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
    "user only": [{"role": "user", "content": "What is the capital of France?"}],
    "multi-turn": [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello. How can I help?"},
        {"role": "user", "content": "Name a prime number."},
    ],
    "chinese": [{"role": "user", "content": "法国的首都是哪里?"}],
}


class Template(BaseModel):
    source: str
    text: str | None
    origin: str | None = None  # which file or key it came from
    sha256: str | None = None
    bos: str | None = None
    eos: str | None = None


def load_template(path: str | Path) -> Template:
    """The chat template of an HF dir or a GGUF file (None text when the model has none)."""
    kind, p = resolve(path)
    if kind == "gguf":
        meta = gguf_fields(p)
        tokens = meta.get("tokenizer.ggml.tokens") or []

        def tok(key: str) -> str | None:
            i = meta.get(f"tokenizer.ggml.{key}_token_id")
            return str(tokens[i]) if isinstance(i, int) and 0 <= i < len(tokens) else None

        text = meta.get("tokenizer.chat_template")
        return _mk(str(p), text if isinstance(text, str) else None, "tokenizer.chat_template", tok("bos"), tok("eos"))
    cfg = read_json(p / "tokenizer_config.json") or {}
    bos, eos = (_name(cfg.get("bos_token")), _name(cfg.get("eos_token")))
    jinja = p / "chat_template.jinja"
    if jinja.exists():
        text = read_text(jinja, max_bytes=MAX_JSON_BYTES, what="chat template (Jinja)")
        return _mk(str(p), text, "chat_template.jinja", bos, eos)
    t = cfg.get("chat_template")
    if isinstance(t, list):  # named templates: take "default"
        t = next((x.get("template") for x in t if isinstance(x, dict) and x.get("name") == "default"), None)
    return _mk(str(p), t if isinstance(t, str) else None, "tokenizer_config.json chat_template", bos, eos)


def _name(v: Any) -> str | None:
    return v.get("content") if isinstance(v, dict) else v if isinstance(v, str) else None


def _mk(source: str, text: str | None, origin: str, bos: str | None, eos: str | None) -> Template:
    sha = hashlib.sha256(text.encode()).hexdigest() if text else None
    return Template(source=source, text=text, origin=origin if text else None, sha256=sha, bos=bos, eos=eos)


class TemplateError(Exception):
    """A template that fails to render."""


def render(t: Template, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    """Render like transformers does: sandboxed jinja2, trim_blocks and lstrip_blocks, raise_exception."""
    if not t.text:
        raise TemplateError("the model has no chat template")
    from jinja2 import TemplateError as JinjaError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(msg: str) -> None:
        raise TemplateError(msg)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime(2026, 1, 1).strftime(fmt)  # fixed date: stable diffs
    import json

    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False: json.dumps(
        x, indent=indent, ensure_ascii=ensure_ascii
    )
    try:
        return env.from_string(t.text).render(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=t.bos or "",
            eos_token=t.eos or "",
            tools=None,
        )
    except JinjaError as exc:
        raise TemplateError(f"{type(exc).__name__}: {exc}") from None


class Markers(BaseModel):
    """Role markers: the text a template puts between message contents, and where a system prompt goes."""

    separators: dict[str, str] = Field(default_factory=dict)  # e.g. "user -> assistant": "<|im_end|>..."
    system: str  # own turn | merged into the first user turn | dropped | unsupported (...)
    default_system: str | None = None  # text injected when the conversation has no system message


def _common_suffix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def markers(t: Template) -> Markers:
    """Render sentinel contents and read the separators between them."""
    s, u, a, u2 = "\x01S\x01", "\x01U\x01", "\x01A\x01", "\x01V\x01"
    msgs = [
        {"role": "system", "content": s},
        {"role": "user", "content": u},
        {"role": "assistant", "content": a},
        {"role": "user", "content": u2},
    ]
    try:
        out = render(t, msgs, add_generation_prompt=True)
        solo = render(t, [{"role": "user", "content": u}], add_generation_prompt=False)
    except TemplateError as exc:
        return Markers(system=f"unsupported ({exc})"[:160])
    bos = (t.bos or "") if t.text and "bos_token" in t.text else ""  # only a bos the template itself emits
    names = ["start", "system -> user", "user -> assistant", "assistant -> user", "generation prompt"]
    seps: dict[str, str] = {}
    rest = out
    for name, sentinel in zip(names, (s, u, a, u2, None), strict=True):
        if sentinel is None:
            seps[name] = rest
            break
        i = rest.find(sentinel)
        if i < 0:
            seps[name] = "(content missing)"
            continue
        seps[name] = rest[:i]
        rest = rest[i + len(sentinel) :]
    if bos and seps.get("start", "").startswith(bos):
        seps["start"] = seps["start"][len(bos) :]
    if s not in out:
        system = "dropped"
    elif out.find(s) > out.find(u):
        system = "after the user turn"
    elif not seps.get("system -> user", "").strip():
        system = "merged into the first user turn"
    else:
        system = "own turn"
    head = solo[: solo.find(u)]
    if bos and head.startswith(bos):
        head = head[len(bos) :]
    sep = seps.get("system -> user", "")
    extra = head[: len(head) - _common_suffix(head, sep)] if system == "own turn" else ""
    return Markers(separators=seps, system=system, default_system=extra.strip() or None)


class RenderDiff(BaseModel):
    conversation: str
    old: str | None
    new: str | None
    same: bool
    unified: str = ""
    error: str | None = None


class TemplateDiff(BaseModel):
    old: Template
    new: Template
    same_text: bool
    same_renders: bool
    renders: list[RenderDiff]
    old_markers: Markers
    new_markers: Markers


def diff_templates(old: Template, new: Template) -> TemplateDiff:
    """Render each built-in conversation with both templates and diff the results."""
    rows: list[RenderDiff] = []
    for name, msgs in CONVERSATIONS.items():
        outs: list[str | None] = []
        errs: list[str] = []
        for t in (old, new):
            try:
                outs.append(render(t, msgs))
            except TemplateError as exc:
                outs.append(None)
                errs.append(f"{'old' if t is old else 'new'}: {exc}")
        a, b = outs
        uni = "".join(
            difflib.unified_diff(
                (a or "").splitlines(keepends=True),
                (b or "").splitlines(keepends=True),
                fromfile=f"old {name}",
                tofile=f"new {name}",
            )
        )
        rows.append(
            RenderDiff(
                conversation=name,
                old=a,
                new=b,
                same=a == b and a is not None,
                unified=uni,
                error="; ".join(errs) or None,
            )
        )
    return TemplateDiff(
        old=old,
        new=new,
        same_text=old.sha256 == new.sha256 and old.text is not None,
        same_renders=all(r.same for r in rows),
        renders=rows,
        old_markers=markers(old),
        new_markers=markers(new),
    )
