"""Tokenizer fingerprint and diff (HF tokenizer.json or GGUF tokenizer.ggml.*): vocabulary, special tokens and
the token-count shift over a corpus, with per-prompt budget overflow."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from switchover.errors import BadInput
from switchover.jsonl import jsonl_values
from switchover.model.source import gguf_fields, read_json, resolve
from switchover.textfile import read_bytes, read_text

SPECIAL_ROLES = ("bos", "eos", "pad", "unk")

# Built-in corpus: the kinds of text whose token counts shift between tokenizers (CJK first: docs/diff-model.md).
CORPUS: list[tuple[str, str]] = [
    (
        "english",
        "The quarterly report shows revenue grew by twelve percent, driven by strong demand in Europe and "
        "a recovery in consumer electronics. Operating costs rose modestly.",
    ),
    (
        "chinese",
        "换模型至少要一起换四样东西:权重、tokenizer、chat template、采样参数默认值。"
        "任何一样没对齐,都会表现为新模型更差,而实际上是新模型被旧假设套住了。",
    ),
    (
        "chinese-long",
        "新 tokenizer 对中文的切分更碎,同一个 prompt 多出百分之二十五的 token,"
        "于是原本刚好不截断的请求开始被截,而告警只会显示输出质量下降。"
        "缓存键里必须有模型版本,否则命中旧的 KV,输出乱码或语义漂移。",
    ),
    (
        "code",
        'def add_two_numbers(a: int, b: int) -> int:\n    """Return the sum."""\n    return a + b\n\n'
        "for i in range(10):\n    print(add_two_numbers(i, i * 2))\n",
    ),
    ("json", '{"user": {"id": 1842, "name": "Ana", "tags": ["admin", "beta"], "limits": {"tokens": 4000}}}'),
    ("mixed", "Deploy to 生产环境 at 09:30 UTC; rollback window 24h; owner: 运维组 (ops@example.com)."),
]


@dataclass
class LoadedTokenizer:
    """A tokenizer's identity plus an encoder when one could be built."""

    info: TokenizerInfo
    tokens: list[str]  # by id
    merges: list[str]
    encoder: Any | None  # tokenizers.Tokenizer

    def count(self, text: str) -> int | None:
        if self.encoder is None:
            return None
        return len(self.encoder.encode(text, add_special_tokens=False).ids)


class TokenizerInfo(BaseModel):
    """What identifies a tokenizer, independent of the file format."""

    source: str
    kind: str  # hf | gguf
    model_type: str | None = None  # BPE, Unigram, WordPiece / gpt2, llama ...
    vocab_size: int
    special: dict[str, str | None] = Field(default_factory=dict)
    added_special: list[str] = Field(default_factory=list)
    fingerprint: str
    encoder_note: str | None = None


def _merge_str(m: Any) -> str:
    return " ".join(m) if isinstance(m, list | tuple) else str(m)


def _fingerprint(tokens: list[str], merges: list[str], special: dict[str, str | None]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([tokens, merges, [special.get(r) for r in SPECIAL_ROLES[:2]]], ensure_ascii=False).encode())
    return h.hexdigest()


def _special_name(value: Any) -> str | None:
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


TOKENIZER_MAX_BYTES = 256 << 20  # the largest tokenizer.json files (multilingual vocabularies) are tens of MiB


def encoder_from_file(path: str | Path, what: str = "tokenizer.json") -> Any:
    """A `tokenizers.Tokenizer` from a tokenizer.json read through textfile (a regular file or a bounded stream,
    at most TOKENIZER_MAX_BYTES): the one way a tokenizer file is loaded (bench, gateway, diff-model). BadInput
    for anything it cannot load; ImportError without the `tokenizers` package."""
    from tokenizers import Tokenizer

    raw = read_bytes(path, max_bytes=TOKENIZER_MAX_BYTES, what=what)
    try:
        return Tokenizer.from_str(raw.decode("utf-8"))
    except Exception as exc:  # tokenizers raises a bare Exception for bad files; bad UTF-8 lands here too
        raise BadInput(f"{path}: not a {what} the tokenizers library can load: {str(exc)[:200]}") from None


def _load_hf(d: Path) -> LoadedTokenizer:
    tj = read_json(d / "tokenizer.json")
    if tj is None:
        raise BadInput(f"{d}: no tokenizer.json (only fast tokenizers are read)")
    cfg = read_json(d / "tokenizer_config.json") or {}
    model = tj.get("model") or {}
    vocab: dict[str, int] = dict(model.get("vocab") or {}) if isinstance(model.get("vocab"), dict) else {}
    if isinstance(model.get("vocab"), list):  # Unigram: [[piece, score], ...]
        vocab = {p[0]: i for i, p in enumerate(model["vocab"])}
    added = tj.get("added_tokens") or []
    for a in added:
        vocab.setdefault(a["content"], a["id"])
    size = max(vocab.values()) + 1 if vocab else 0
    tokens = [""] * size
    for t, i in vocab.items():
        tokens[i] = t
    merges = [_merge_str(m) for m in model.get("merges") or []]
    special = {r: _special_name(cfg.get(f"{r}_token")) for r in SPECIAL_ROLES}
    encoder, note = None, None
    try:
        encoder = encoder_from_file(d / "tokenizer.json")
    except ImportError:
        note = "token counts need the `tokenizers` package (pip install 'switchover[model]')"
    except BadInput as exc:  # a tokenizer.json the library cannot load: identity still works
        note = f"tokenizer.json could not be loaded for encoding: {exc.message}"
    info = TokenizerInfo(
        source=str(d),
        kind="hf",
        model_type=model.get("type"),
        vocab_size=size,
        special=special,
        added_special=sorted(a["content"] for a in added if a.get("special")),
        fingerprint=_fingerprint(tokens, merges, special),
        encoder_note=note,
    )
    return LoadedTokenizer(info, tokens, merges, encoder)


def _load_gguf(f: Path) -> LoadedTokenizer:
    meta = gguf_fields(f)
    tokens = [str(t) for t in meta.get("tokenizer.ggml.tokens") or []]
    if not tokens:
        raise BadInput(f"{f}: no tokenizer.ggml.tokens metadata")
    merges = [str(m) for m in meta.get("tokenizer.ggml.merges") or []]
    types = list(meta.get("tokenizer.ggml.token_type") or [])

    def tok(key: str) -> str | None:
        i = meta.get(f"tokenizer.ggml.{key}_token_id")
        return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else None

    special = {"bos": tok("bos"), "eos": tok("eos"), "pad": tok("padding"), "unk": tok("unknown")}
    control = sorted(t for t, ty in zip(tokens, types, strict=False) if ty == 3)
    gmodel = meta.get("tokenizer.ggml.model")
    encoder, note = None, None
    if gmodel == "gpt2" and merges:
        try:
            from tokenizers import Tokenizer, decoders, models, pre_tokenizers

            enc = Tokenizer(
                models.BPE(
                    vocab={t: i for i, t in enumerate(tokens)},
                    merges=[(m.split(" ", 1)[0], m.split(" ", 1)[-1]) for m in merges],
                )
            )
            enc.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
            enc.decoder = decoders.ByteLevel()
            enc.add_special_tokens(control)
            encoder = enc
            note = (
                f"rebuilt from GGUF as byte-level BPE with the GPT-2 split regex (GGUF pre-tokenizer "
                f"{meta.get('tokenizer.ggml.pre')!r}); counts are close, not exact"
            )
        except ImportError:
            note = "token counts need the `tokenizers` package"
    else:
        note = f"no encoder for GGUF tokenizer model {gmodel!r}: vocabulary compared, counts not computed"
    info = TokenizerInfo(
        source=str(f),
        kind="gguf",
        model_type=gmodel,
        vocab_size=len(tokens),
        special=special,
        added_special=control,
        fingerprint=_fingerprint(tokens, merges, special),
        encoder_note=note,
    )
    return LoadedTokenizer(info, tokens, merges, encoder)


def load_tokenizer(path: str | Path) -> LoadedTokenizer:
    kind, p = resolve(path)
    return _load_hf(p) if kind == "hf" else _load_gguf(p)


class CountShift(BaseModel):
    """One text's token count under both tokenizers."""

    id: str
    kind: str
    old: int | None
    new: int | None
    ratio: float | None = None
    over_budget: bool = False  # fits the budget with old, not with new


class TokenizerDiff(BaseModel):
    old: TokenizerInfo
    new: TokenizerInfo
    same: bool
    vocab_shared: int  # same token string at the same id
    vocab_moved: int  # same token string, different id
    only_old: list[str] = Field(default_factory=list)  # a sample
    only_new: list[str] = Field(default_factory=list)
    only_old_count: int = 0
    only_new_count: int = 0
    special_changes: dict[str, tuple[str | None, str | None]] = Field(default_factory=dict)
    counts: list[CountShift] = Field(default_factory=list)
    total_ratio: float | None = None
    budget: int | None = None
    over_budget: list[str] = Field(default_factory=list)


def diff_tokenizers(
    old: LoadedTokenizer,
    new: LoadedTokenizer,
    corpus: list[tuple[str, str]] | None = None,
    budget: int | None = None,
    sample: int = 12,
) -> TokenizerDiff:
    """Vocabulary, special tokens and the token-count shift over a corpus (the built-in one by default)."""
    new_ids = {t: i for i, t in enumerate(new.tokens)}
    old_set, new_set = set(old.tokens), set(new.tokens)
    shared = sum(1 for i, t in enumerate(old.tokens) if new_ids.get(t) == i)
    moved = sum(1 for i, t in enumerate(old.tokens) if t in new_ids and new_ids[t] != i)
    only_old, only_new = sorted(old_set - new_set), sorted(new_set - old_set)
    d = TokenizerDiff(
        old=old.info,
        new=new.info,
        same=old.info.fingerprint == new.info.fingerprint,
        vocab_shared=shared,
        vocab_moved=moved,
        only_old=only_old[:sample],
        only_new=only_new[:sample],
        only_old_count=len(only_old),
        only_new_count=len(only_new),
        budget=budget,
    )
    for role in SPECIAL_ROLES:
        sa, sb = old.info.special.get(role), new.info.special.get(role)
        if sa != sb:
            d.special_changes[role] = (sa, sb)
    texts = corpus if corpus is not None else CORPUS
    tot_a = tot_b = 0
    for i, (kind, text) in enumerate(texts):
        a, b = old.count(text), new.count(text)
        row = CountShift(id=f"{i + 1}", kind=kind, old=a, new=b)
        if a and b is not None:
            row.ratio = round(b / a, 3)
            tot_a, tot_b = tot_a + a, tot_b + b
        if budget is not None and a is not None and b is not None and a <= budget < b:
            row.over_budget = True
            d.over_budget.append(row.id)
        d.counts.append(row)
    if tot_a:
        d.total_ratio = round(tot_b / tot_a, 3)
    return d


CORPUS_MAX_BYTES = 1 << 20  # token counts of a sample show the shift; a bigger file only takes longer
CORPUS_MAX_TEXTS = 2000


def load_corpus(path: str | Path) -> list[tuple[str, str]]:
    """Texts from a file: JSONL ({"text"|"prompt"|"content", "kind"?}) or plain text split on blank lines."""
    p = Path(path)
    try:
        raw = read_text(p, max_bytes=CORPUS_MAX_BYTES, what="corpus (JSONL or text)")
    except BadInput as exc:
        raise BadInput(f"--corpus {exc.message}") from None
    out: list[tuple[str, str]] = []
    if p.suffix == ".jsonl":
        for no, obj in jsonl_values(raw.splitlines(), f"--corpus {p}"):
            text = obj.get("text") or obj.get("prompt") or obj.get("content") if isinstance(obj, dict) else None
            if not isinstance(text, str):
                raise BadInput(f"--corpus {p} line {no}: needs a string field text, prompt or content")
            out.append((str(obj.get("kind", "user")), text))
    else:
        out = [("user", block.strip()) for block in raw.split("\n\n") if block.strip()]
    if not out:
        raise BadInput(f"--corpus {p}: no texts")
    if len(out) > CORPUS_MAX_TEXTS:
        raise BadInput(f"--corpus {p}: {len(out)} texts, at most {CORPUS_MAX_TEXTS} (a sample shows the shift)")
    return out
