"""TGI's launch options, metric names and environment variables, read from a release's source: the clap `struct Args`
of launcher/src/main.rs (`text-generation-launcher`: every option's long and short name, env variable, value, choices
from its value enum, default), every `metrics::counter!/gauge!/histogram!("tgi_...")` in router/ and backends/, and
the variables the launcher, router and Python server read (tgi_environ.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from switchover.engines.extract import Extracted, SourceTree
from switchover.engines.extract.clike import closing, literal, split_top, strip_comments
from switchover.engines.extract.tgi_environ import environment
from switchover.engines.releases import ParserRules

LAUNCHER = "launcher/src/main.rs"
_INTS = {"usize", "u8", "u16", "u32", "u64", "u128", "isize", "i8", "i16", "i32", "i64", "i128"}
_FLOATS = {"f32", "f64"}
_STRS = {"String", "PathBuf", "OsString", "str"}
_STRUCT = re.compile(r"\bstruct\s+Args\s*\{")
_ENUM = re.compile(r"\benum\s+(\w+)\s*\{")
_ATTR = re.compile(r"#\[\s*(clap|arg|command|value)\s*\(")
_FIELD = re.compile(r"(?:pub(?:\([^)]*\))?\s+)?(\w+)\s*:\s*(.+)$", re.S)
_METRIC = re.compile(
    r"\b(?:metrics::)?(increment_counter|absolute_counter|counter|increment_gauge|decrement_gauge"
    r'|gauge|histogram)!\s*\(\s*"(tgi_\w+)"'
)
_MATCHER = re.compile(r'Matcher::(Full|Prefix|Suffix)\(\s*(?:String::from\()?\s*"([^"]+)"')


def words(name: str) -> list[str]:
    """An identifier cut into words the way clap's derive (heck) does: at `_`, at a lower-to-upper change, and
    before the last capital of a capital run followed by a lower-case letter; digits stay with their word."""
    out: list[str] = []
    for word in re.split(r"[^0-9A-Za-z]+", name):
        start, mode = 0, ""
        for i, c in enumerate(word):
            if i + 1 == len(word):
                out.append(word[start:])
                break
            nxt = word[i + 1]
            now = "lower" if c.islower() else "upper" if c.isupper() else mode
            if now == "lower" and nxt.isupper():
                out.append(word[start : i + 1])
                start, mode = i + 1, ""
            elif mode == "upper" and c.isupper() and nxt.islower():
                out.append(word[start:i])
                start, mode = i, "upper"
            else:
                mode = now
    return [w for w in out if w]


def kebab(name: str) -> str:
    return "-".join(w.lower() for w in words(name))


def screaming(name: str) -> str:
    return "_".join(w.upper() for w in words(name))


@dataclass
class _Attrs:
    """The clap attribute arguments of one field or variant: `key` or `key = value`, in order."""

    items: list[tuple[str, str | None]] = field(default_factory=list)

    def has(self, key: str) -> bool:
        return any(k == key for k, _ in self.items)

    def value(self, key: str) -> str | None:
        return next((v for k, v in self.items if k == key and v is not None), None)

    def values(self, key: str) -> list[str]:
        return [v for k, v in self.items if k == key and v is not None]


def _attributes(chunk: str) -> tuple[_Attrs, str]:
    """The clap/arg/value attribute arguments at the head of a field or variant, and the text after them."""
    attrs = _Attrs()
    rest = chunk.lstrip()
    while rest.startswith("#"):
        open_at = rest.find("[")
        close_at = closing(rest, open_at) if open_at >= 0 else -1
        if close_at < 0:
            break
        m = _ATTR.match(rest[: close_at + 1])
        if m:
            inner = rest[m.end() : rest.rindex(")", 0, close_at)]
            for part in split_top(inner):
                key, eq, val = part.partition("=")
                attrs.items.append((key.strip(), val.strip() if eq else None))
        rest = rest[close_at + 1 :].lstrip()
    return attrs, rest


def _docs(original: str, start: int) -> str:
    """The `///` doc comment lines just above offset `start` in the original text, joined."""
    lines = original[:start].rstrip().splitlines()
    doc: list[str] = []
    for line in reversed(lines):
        s = line.strip()
        if s.startswith("///"):
            doc.append(s[3:].strip())
        elif s.startswith("#[") or not s:
            continue
        else:
            break
    return " ".join(reversed(doc)).strip()


def value_enums(code: str) -> dict[str, list[str]]:
    """Every `enum` deriving ValueEnum -> the values clap accepts (kebab-case variant names unless `name = "..."`;
    `skip` variants left out; `alias` values added)."""
    out: dict[str, list[str]] = {}
    for m in _ENUM.finditer(code):
        head = code[max(0, code.rfind("\n\n", 0, m.start())) : m.start()]
        if "ValueEnum" not in head:
            continue
        end = closing(code, m.end() - 1)
        if end < 0:
            continue
        rename = re.search(r'rename_all\s*=\s*"([^"]+)"', re.sub(r"#\[serde\([^]]*\]", "", head))
        names: list[str] = []
        for chunk in split_top(code[m.end() : end]):
            attrs, rest = _attributes(chunk)
            ident = re.match(r"\w+", rest)
            if ident is None or attrs.has("skip"):
                continue
            name = literal(attrs.value("name") or "") or _renamed(ident.group(0), rename.group(1) if rename else None)
            names.append(name)
            names.extend(filter(None, (literal(a) for a in attrs.values("alias"))))
        out[m.group(1)] = names
    return out


def _renamed(ident: str, rule: str | None) -> str:
    if rule in (None, "kebab-case"):
        return kebab(ident)
    if rule == "snake_case":
        return "_".join(w.lower() for w in words(ident))
    if rule in ("lower", "lowercase"):
        return ident.lower()
    if rule in ("UPPER", "UPPERCASE"):
        return ident.upper()
    if rule == "SCREAMING_SNAKE_CASE":
        return screaming(ident)
    return ident  # "verbatim" and anything not known: as written


def _unwrap(rust_type: str) -> tuple[str, bool, bool]:
    """A field type as (inner type, is Option, is Vec): Option<Vec<usize>> -> ('usize', True, True)."""
    t = re.sub(r"\s+", "", rust_type)
    optional = repeated = False
    while True:
        m = re.fullmatch(r"(?:std::option::)?Option<(.+)>", t)
        if m:
            optional, t = True, m.group(1)
            continue
        m = re.fullmatch(r"(?:std::vec::)?Vec<(.+)>", t)
        if m:
            repeated, t = True, m.group(1)
            continue
        return t.rsplit("::", 1)[-1], optional, repeated


def value_optional(rust_type: str, attrs: _Attrs) -> bool:
    """Whether the option may be given without its value: clap reads `Option<Option<T>>` as zero or one value, and
    `num_args = 0..=1` (clap 4) or `min_values = 0` (clap 3) allow none. `default_missing_value` alone does not:
    clap uses it only where the arity already allows no value."""
    if re.fullmatch(r"(?:std::option::)?Option<(?:std::option::)?Option<.+>>", re.sub(r"\s+", "", rust_type)):
        return True
    for key, val in attrs.items:
        text = key if val is None else f"{key}={val}"  # `num_args(0..=1)` was cut at its `=`
        call = re.fullmatch(r"(num_args|min_values)\s*\((.*)\)", text, re.S)
        key, val = (call.group(1), call.group(2)) if call else (key, val)
        arity = re.sub(r"\s+", "", val or "")
        if key == "min_values" and arity == "0":
            return True
        bounds = re.fullmatch(r"(\d*)\.\.(=?)(\d*)", arity) if key == "num_args" else None
        if (
            bounds
            and int(bounds.group(1) or 0) == 0
            and (not bounds.group(3) or int(bounds.group(3)) > (0 if bounds.group(2) else 1))
        ):
            return True
    return False


def _option(
    name: str, rust_type: str, attrs: _Attrs, enums: dict[str, list[str]], doc: str
) -> tuple[str, dict[str, Any]]:
    """One field's option: canonical spelling and its facts (FlagSpan fields)."""
    inner, optional, repeated = _unwrap(rust_type)
    long = literal(attrs.value("long") or "") or kebab(name) if attrs.has("long") else None
    short_raw = attrs.value("short")
    short = (short_raw.strip("'") if short_raw else name[0]) if attrs.has("short") else None
    action = (attrs.value("action") or "").rsplit("::", 1)[-1]
    switch = (inner == "bool" and not optional and action not in ("Set", "Append")) or action in (
        "SetTrue",
        "SetFalse",
        "Count",
        "Help",
        "Version",
    )
    if repeated or attrs.has("value_delimiter") or action == "Append":
        kind = "list"
    elif inner == "bool":
        kind = "bool"
    else:
        kind = (
            "int"
            if inner in _INTS
            else "float"
            if inner in _FLOATS
            else "str"
            if inner in _STRS
            else ("str" if inner in enums else "unknown")
        )
    choices = enums.get(inner) if not switch else None
    if inner == "bool" and not switch:
        choices = ["true", "false"]  # clap's BoolValueParser
    env = None
    if attrs.has("env"):
        env = literal(attrs.value("env") or "") or screaming(name)
    default = attrs.value("default_value")
    default = literal(default) if default else attrs.value("default_value_t")
    aliases = [
        f"--{a}" for key in ("alias", "visible_alias") for a in filter(None, (literal(v) for v in attrs.values(key)))
    ]
    canonical = f"--{long}" if long else f"-{short}"
    if long and short:
        aliases.insert(0, f"-{short}")
    deprecated = doc if re.search(r"deprecat|legacy", doc, re.I) else None
    fact: dict[str, Any] = {
        "path": LAUNCHER,
        "aliases": aliases,
        "takes_value": not switch,
        "value_optional": not switch and value_optional(rust_type, attrs),
        "kind": kind,
        "choices": choices,
        "default": default,
        "env": env,
        "deprecated": deprecated,
    }
    return canonical, fact


def launcher_options(original: str) -> dict[str, dict[str, Any]]:
    """Every option of the launcher's clap `struct Args` (fields without `long` or `short` are positional: left out)."""
    code = strip_comments(original)
    m = _STRUCT.search(code)
    if m is None:
        return {}
    end = closing(code, m.end() - 1)
    enums = value_enums(code)
    out: dict[str, dict[str, Any]] = {}
    pos = m.end()
    for chunk in split_top(code[m.end() : end]):
        at = code.find(chunk, pos)
        pos = at + len(chunk)
        attrs, rest = _attributes(chunk)
        fm = _FIELD.match(rest)
        if fm is None or attrs.has("flatten") or attrs.has("skip") or not (attrs.has("long") or attrs.has("short")):
            continue
        canonical, fact = _option(fm.group(1), fm.group(2), attrs, enums, _docs(original, at + chunk.find(rest)))
        out[canonical] = fact
    return out


def metrics(tree: SourceTree) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every `tgi_*` metric the router and backends record, with its Prometheus type, and the files that define
    them. A histogram is served as a histogram when the exporter is given buckets for it (`Matcher::Full/Prefix/
    Suffix` with set_buckets_for_metric, or `set_buckets` for all), otherwise metrics-exporter-prometheus renders
    it as a summary."""
    found: dict[str, dict[str, Any]] = {}
    files: list[str] = []
    matchers: list[tuple[str, str]] = []
    every_histogram = False
    for path in tree.paths("router/", ".rs") + tree.paths("backends/", ".rs"):
        code = strip_comments(tree.read(path) or "")
        if "set_buckets_for_metric" in code:
            matchers += _MATCHER.findall(code)
        every_histogram = every_histogram or re.search(r"\.set_buckets\s*\(", code) is not None
        hits = _METRIC.findall(code)
        if hits:
            files.append(path)
        for macro, name in hits:
            kind = "counter" if "counter" in macro else "gauge" if "gauge" in macro else "histogram"
            found.setdefault(name, {"path": path, "type": kind})
    for name, fact in found.items():
        bucketed = every_histogram or any(_matches(name, how, text) for how, text in matchers)
        if fact["type"] == "histogram" and not bucketed:
            fact["type"] = "summary"
    return found, files


def _matches(name: str, how: str, text: str) -> bool:
    return name == text if how == "Full" else name.startswith(text) if how == "Prefix" else name.endswith(text)


def extract(tree: SourceTree) -> Extracted:
    """The launcher's options and the served metric names of one TGI release."""
    source = tree.read(LAUNCHER)
    if source is None:
        return Extracted(parser=ParserRules(source=LAUNCHER))
    code = strip_comments(source)
    # clap matches a unique prefix of a long option only with infer_long_args; it never reads _ as -
    rules = ParserRules(abbrev=re.search(r"infer_long_args\s*=\s*true", code) is not None, source=LAUNCHER)
    found, files = metrics(tree)
    flags = launcher_options(source)
    env, env_files, _ = environment(tree, source, {f["env"] for f in flags.values() if f["env"]})
    return Extracted(
        parser=rules,
        flags=flags,
        metrics=found,
        environment=env,
        files=list(dict.fromkeys([LAUNCHER, *files, *env_files])),
    )
