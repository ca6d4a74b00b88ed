"""What an engine's start-up log says it chose (attention backend, KV cache dtype, quantization kernel, CUDA graphs)
and every fallback it took, compared with what the migration expected (docs/startlog.md: the same weights on another GPU
run another kernel, without an error). The log patterns are engine facts, cited, in data/startlog.yaml."""

from __future__ import annotations

import re
import shlex
from bisect import bisect_right
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, model_validator

from switchover.engines.logline import ANSI as _ANSI
from switchover.engines.logline import Evidence, excerpt
from switchover.engines.logline import compiled as _compile
from switchover.engines.startup_oom import OutOfMemory, find_oom, load_oom, oom_hint
from switchover.errors import BadInput
from switchover.redaction import redact
from switchover.textfile import read_bytes

MAX_LOG_BYTES = 64 << 20  # a start-up is in the first megabytes; a busy llama-server log grows ~5 MB an hour
MAX_SCAN_LINES = 50_000  # lines read after the start of the last start-up
GROUP_LINES = 50  # start markers this close together belong to one start-up
MAX_VALUE = 80  # characters of a logged value kept (a backend name, a dtype, a layer count)
# characters of a line searched: ten times vLLM's whole-config start-up line; every pattern is linear in a line's
# length (data/startlog.yaml), this bounds each line's cost all the same (a 64 MiB log may be one line)
MAX_LINE_CHARS = 32 << 10
_FRACTION = re.compile(r"^(\d{1,9})/(\d{1,9})$")  # a layer count; longer digit runs are not one (nor int()-able)

Severity = Literal["downgrade", "note"]


# ---------------------------------------------------------------------------------------------- the data's models
class Pattern(BaseModel):
    """One log line an engine prints, what it tells, and the source that prints it."""

    id: str
    regex: str
    source: str
    field: str | None = None
    value: str | None = Field(default=None, description="constant value when the regex has no `value` group")
    map: dict[str, str | None] = Field(default_factory=dict, description="normalise; null: not a choice")
    rank: int = 1
    fallback: Severity | None = None
    fallback_when_partial: bool = Field(default=False, description="an a/b value with a < b is a downgrade")

    @model_validator(mode="after")
    def _consistent(self) -> Pattern:
        try:
            rx = re.compile(self.regex)
        except re.error as exc:
            raise ValueError(f"pattern {self.id}: bad regex: {exc}") from None
        if self.field is not None and self.value is None and "value" not in rx.groupindex:
            raise ValueError(f"pattern {self.id}: a field needs a (?P<value>...) group or a constant value")
        if self.field is None and self.fallback is None:
            raise ValueError(f"pattern {self.id}: tells nothing (no field, no fallback)")
        if not self.source.strip():
            raise ValueError(f"pattern {self.id}: no source")
        return self

    @property
    def compiled(self) -> re.Pattern[str]:
        return _compile(self.regex)


class Marker(BaseModel):
    regex: str
    source: str


class Inference(BaseModel):
    """A field the engine does not log, decided by a code path the citation names, from fields it does log."""

    field: str
    value: str
    when: dict[str, str]
    source: str


class FlagRule(BaseModel):
    """A launch flag that sets one field: its value (mapped), or a constant for a switch."""

    names: list[str]
    field: str
    switch: str | None = None
    map: dict[str, str | None] = Field(default_factory=dict)
    other: str | None = Field(default=None, description="value for any flag value not in map")


class EngineLog(BaseModel):
    display_name: str
    aliases: list[str] = Field(default_factory=list)
    start: list[Marker]
    ready: list[Marker] = Field(default_factory=list)
    requests: list[Marker] = Field(
        default_factory=list, description="per-request lines (a client's text): never a marker, a fact or a fallback"
    )
    patterns: list[Pattern]
    inferred: list[Inference] = Field(default_factory=list)
    synonyms: dict[str, dict[str, str]] = Field(default_factory=dict)
    synonyms_source: str | None = None
    value_prefixes: list[str] = Field(
        default_factory=list,
        description="prefixes a value may be written with "
        "(torch.bfloat16 for bfloat16): dropped before two values are compared",
    )
    value_prefixes_source: str | None = None
    flags: list[FlagRule] = Field(default_factory=list)
    flags_source: str | None = None
    quiet_hint: str | None = None
    quiet_marker: str | None = None


class StartlogData(BaseModel):
    fields: dict[str, str]
    common_fallbacks: list[Pattern]
    engines: dict[str, EngineLog]

    @model_validator(mode="after")
    def _known_fields(self) -> StartlogData:
        for name, eng in self.engines.items():
            ids = [p.id for p in eng.patterns]
            if len(ids) != len(set(ids)):
                raise ValueError(f"{name}: duplicate pattern ids")
            used = (
                [p.field for p in eng.patterns if p.field]
                + [i.field for i in eng.inferred]
                + [k for i in eng.inferred for k in i.when]
                + [f.field for f in eng.flags]
                + list(eng.synonyms)
            )
            unknown = sorted({f for f in used if f not in self.fields})
            if unknown:
                raise ValueError(f"{name}: unknown fields {unknown}")
        return self


@cache
def load_data() -> StartlogData:
    """data/startlog.yaml, validated; a malformed file fails loudly (a packaging bug)."""
    text = resources.files("switchover").joinpath("data/startlog.yaml").read_text(encoding="utf-8")
    return StartlogData.model_validate(yaml.safe_load(text))


def engine_names() -> list[str]:
    return sorted(load_data().engines)


def engine_log(name: str) -> tuple[str, EngineLog]:
    """(key, patterns) of an engine by name or alias; BadInput naming the known engines."""
    data = load_data()
    key = name.strip().lower()
    for k, eng in data.engines.items():
        if key == k or key in (a.lower() for a in eng.aliases):
            return k, eng
    raise BadInput(f"unknown engine {name[:60]!r} for --engine", hint=f"known: {', '.join(data.engines)}")


# ---------------------------------------------------------------------------------------------- the result's models
class Finding(BaseModel):
    field: str
    value: str | None = None
    how: Literal["logged", "inferred", "missing"]
    evidence: Evidence | None = None
    source: str | None = Field(default=None, description="the code path an inferred value comes from")
    reason: str | None = Field(default=None, description="why it is missing")


class Fallback(BaseModel):
    severity: Severity
    evidence: Evidence


class Expectation(BaseModel):
    field: str
    expected: str
    origin: str = Field(description="--expect, or the launch flag it came from")
    found: str | None = None
    status: Literal["match", "mismatch", "unverified"]


class StartlogReport(BaseModel):
    engine: str
    log: str
    start_line: int = Field(description="1-based line where the start-up that was read begins")
    lines_read: int
    findings: list[Finding]
    fallbacks: list[Fallback]
    expectations: list[Expectation]
    oom: list[OutOfMemory] = Field(default_factory=list, description="out-of-memory messages of this start-up")
    verdict: Literal["ok", "downgrade", "mismatch", "oom"]
    hint: str | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict == "ok" else 1


# ---------------------------------------------------------------------------------------------- pure logic
def normalise(value: str, prefixes: list[str] | tuple[str, ...] = ()) -> str:
    """A value as compared: unquoted, lower case, without the engine's type prefix (EngineLog.value_prefixes)."""
    v = value.strip().strip("'\"").lower()
    for prefix in prefixes:
        if v.startswith(prefix.lower()):
            v = v[len(prefix) :]
    return v


def _same(field: str, a: str, b: str, eng: EngineLog) -> bool:
    pre = eng.value_prefixes
    syn = {normalise(k, pre): normalise(v, pre) for k, v in eng.synonyms.get(field, {}).items()}
    x, y = normalise(a, pre), normalise(b, pre)
    return syn.get(x, x) == syn.get(y, y)


def is_request_line(line: str, eng: EngineLog) -> bool:
    """Whether the engine logged this line for a request (it may quote a client's prompt or the output)."""
    return any(_compile(m.regex).search(line) for m in eng.requests)


def log_lines(text: str, engines: list[EngineLog]) -> list[str]:
    """The log's lines as searched: each cut to MAX_LINE_CHARS, and the request lines of these engines blanked
    (kept as empty lines so that line numbers stay those of the file): a prompt that quotes a start-up line must
    not start a start-up of its own, end one, or tell a fact."""
    # split at \n only, as grep -n and editors number lines: a progress bar's \r (tqdm) is not a new line
    lines = [line.removesuffix("\r")[:MAX_LINE_CHARS] for line in text.split("\n")]
    if lines and not lines[-1]:
        lines.pop()
    return ["" if any(is_request_line(line, eng) for eng in engines) else line for line in lines]


def startup_window(lines: list[str], eng: EngineLog) -> tuple[int, int]:
    """[begin, end) of the last start-up: a log opened in append mode holds several. It begins up to GROUP_LINES
    before its first start marker (engines print a few lines before any line that names them), never before the
    previous start-up's ready line or last marker, and ends at its own ready line."""

    def is_ready(line: str) -> bool:
        return any(_compile(m.regex).search(line) for m in eng.ready)

    starts = [i for i, line in enumerate(lines) if any(_compile(m.regex).search(line) for m in eng.start)]
    ready_at = [i for i, line in enumerate(lines) if is_ready(line)] if starts else []
    first, floor, prev = 0, 0, None
    for i in starts:  # a new start-up: the first marker, one far from the last, or one after a ready line
        after = bisect_right(ready_at, prev) if prev is not None else 0  # O(log n): a log may hold many start-ups
        if prev is None or i - prev > GROUP_LINES or (after < len(ready_at) and ready_at[after] < i):
            first, floor = i, 0 if prev is None else prev + 1
        prev = i
    if starts:
        readies = [r for r in ready_at if max(floor, first - GROUP_LINES) <= r < first]
        begin = max(floor, first - GROUP_LINES, readies[-1] + 1 if readies else 0)
    else:
        begin = 0
    end = min(len(lines), begin + MAX_SCAN_LINES)
    for i in range(max(begin, first if starts else 0), end):
        if is_ready(lines[i]):
            return begin, i + 1
    return begin, end


def _value(p: Pattern, m: re.Match[str]) -> tuple[bool, str | None]:
    """(tells a value, the value): a value mapped to null is not a choice."""
    raw = p.value if p.value is not None else m.group("value")
    if raw in p.map:
        mapped = p.map[raw]
        return mapped is not None, mapped
    if raw is not None and len(raw) > MAX_VALUE:  # no engine names a choice this long: keep the report bounded
        raw = raw[:MAX_VALUE] + "…"
    return True, raw if raw is None else redact(raw)


def _partial(value: str | None) -> bool:
    m = _FRACTION.match(value or "")
    return m is not None and int(m.group(1)) < int(m.group(2))


def parse_log(
    lines: list[str], eng: EngineLog, common: list[Pattern], *, offset: int = 0
) -> tuple[list[Finding], list[Fallback]]:
    """Findings per field (the highest rank, then the last line, wins) and every fallback line, in log order."""
    best: dict[str, tuple[int, Finding]] = {}
    fallbacks: list[Fallback] = []
    seen: set[tuple[str, str]] = set()  # vLLM's API server, engine core and workers repeat a warning each

    def add(severity: Severity, ev: Evidence) -> None:
        key = (ev.pattern, ev.text.rsplit("] ", 1)[-1])
        if key not in seen:
            seen.add(key)
            fallbacks.append(Fallback(severity=severity, evidence=ev))

    for n, raw in enumerate(lines, offset + 1):
        line = _ANSI.sub("", raw)
        flagged = False
        for p in eng.patterns:
            m = p.compiled.search(line)
            if not m:
                continue
            ev = Evidence(line=n, text=excerpt(line, m), pattern=p.id, source=p.source)
            if p.field is not None:
                tells, value = _value(p, m)
                if tells and (p.field not in best or p.rank >= best[p.field][0]):
                    best[p.field] = (p.rank, Finding(field=p.field, value=value, how="logged", evidence=ev))
                if p.fallback_when_partial and _partial(value):
                    add("downgrade", ev)
                    flagged = True
            if p.fallback is not None and not flagged:
                add(p.fallback, ev)
                flagged = True
        if not flagged:
            for p in common:
                cm = p.compiled.search(line)
                if cm:
                    add(
                        p.fallback or "downgrade",
                        Evidence(line=n, text=excerpt(line, cm), pattern=p.id, source=p.source),
                    )
                    break
    return [f for _, f in best.values()], fallbacks


def told_fields(eng: EngineLog, fields: dict[str, str]) -> list[str]:
    """The fields this engine's log can tell (the data's order): a field no line or inference sets is not asked."""
    told = {p.field for p in eng.patterns if p.field} | {i.field for i in eng.inferred}
    return [f for f in fields if f in told]


def complete(findings: list[Finding], eng: EngineLog, fields: dict[str, str], reason: str) -> list[Finding]:
    """Every field the engine can tell, once: logged, else inferred (cited), else missing with the reason."""
    by_field = {f.field: f for f in findings}
    for inf in eng.inferred:
        if inf.field in by_field:
            continue
        if all(
            k in by_field and by_field[k].value is not None and _same(k, by_field[k].value or "", v, eng)
            for k, v in inf.when.items()
        ):
            by_field[inf.field] = Finding(field=inf.field, value=inf.value, how="inferred", source=inf.source)
    return [by_field.get(f) or Finding(field=f, how="missing", reason=reason) for f in told_fields(eng, fields)]


def expectations_from_flags(flags: str, eng: EngineLog) -> dict[str, tuple[str, str]]:
    """{field: (expected value, the flag it came from)} from an engine command line; flags that set none of the
    fields are ignored."""
    try:
        argv = shlex.split(flags)
    except ValueError as exc:
        raise BadInput(f"--flags: cannot split {flags[:60]!r}: {exc}") from None
    out: dict[str, tuple[str, str]] = {}
    for i, tok in enumerate(argv):
        name, eq, inline = tok.partition("=")
        rule = next((r for r in eng.flags if name in r.names), None)
        if rule is None:
            continue
        if rule.switch is not None:
            out[rule.field] = (rule.switch, name)
            continue
        given = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
        if given is None or (not eq and given.startswith("-")):  # `--kv-cache-dtype --enforce-eager`: no value
            raise BadInput(f"--flags: {name} has no value")
        value = given
        if value in rule.map:
            mapped = rule.map[value]
            if mapped is None:
                continue
            value = mapped
        elif rule.other is not None:
            value = rule.other
        out[rule.field] = (value, f"{name} {given}")
    return out


def parse_expect(items: list[str], fields: dict[str, str]) -> dict[str, tuple[str, str]]:
    """--expect key=value pairs; BadInput naming an unknown key or a pair without '='."""
    out: dict[str, tuple[str, str]] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key or not value.strip():
            raise BadInput(f"--expect {item[:60]!r}: expected KEY=VALUE, e.g. attention_backend=FLASH_ATTN")
        if key not in fields:
            raise BadInput(f"--expect {key[:40]!r}: unknown key", hint=f"keys: {', '.join(fields)}")
        out[key] = (value.strip(), "--expect")
    return out


def compare(findings: list[Finding], expected: dict[str, tuple[str, str]], eng: EngineLog) -> list[Expectation]:
    by_field = {f.field: f for f in findings}
    out = []
    for field, (value, origin) in expected.items():
        found = by_field[field].value if field in by_field else None
        status: Literal["match", "mismatch", "unverified"] = (
            "unverified" if found is None else ("match" if _same(field, value, found, eng) else "mismatch")
        )
        out.append(Expectation(field=field, expected=value, origin=origin, found=found, status=status))
    return out


def expectations_from_report(old: StartlogReport) -> dict[str, tuple[str, str]]:
    """Every value an earlier start-up logged or inferred, as an expectation citing where it was read."""
    return {
        f.field: (f.value, f"{old.log} line {f.evidence.line}" if f.evidence else f"{old.log} ({f.how})")
        for f in old.findings
        if f.value is not None and f.how != "missing"
    }


def check_text(
    text: str,
    engine: str,
    *,
    log: str = "-",
    expect: list[str] | None = None,
    flags: str | None = None,
    baseline: dict[str, tuple[str, str]] | None = None,
) -> StartlogReport:
    """The whole check on a log's text (pure): findings, fallbacks, expectations and the verdict. Expectations:
    `baseline` (an earlier start-up), then the launch flags, then --expect, each overriding the one before."""
    data = load_data()
    key, eng = engine_log(engine)
    expected = dict(baseline or {})
    expected.update(expectations_from_flags(flags, eng) if flags else {})
    expected.update(parse_expect(expect or [], data.fields))
    lines = log_lines(text, [eng])
    begin, end = startup_window(lines, eng)
    window = lines[begin:end]
    found, fallbacks = parse_log(window, eng, data.common_fallbacks, offset=begin)
    oom = find_oom(window, load_oom().engines.get(key, []), offset=begin)
    quiet = bool(eng.quiet_marker and any(_compile(eng.quiet_marker).search(x) for x in window))
    if not found and not fallbacks and not quiet and not oom:
        raise BadInput(
            f"{log}: no {eng.display_name} start-up line found in {len(lines)} lines",
            hint="is it this engine's log, from its start? (--engine names the engine)",
        )
    reason = "not in the log" + (" (printed only at a higher log verbosity)" if quiet else "")
    findings = complete(found, eng, data.fields, reason)
    expectations = compare(findings, expected, eng)
    verdict: Literal["ok", "downgrade", "mismatch", "oom"]
    if oom:  # the engine never served: nothing else it logged matters first
        verdict = "oom"
    elif any(e.status != "match" for e in expectations):
        verdict = "mismatch"
    elif any(f.severity == "downgrade" for f in fallbacks):
        verdict = "downgrade"
    else:
        verdict = "ok"
    return StartlogReport(
        engine=key,
        log=log,
        start_line=begin + 1,
        lines_read=len(window),
        findings=findings,
        fallbacks=fallbacks,
        expectations=expectations,
        oom=oom,
        verdict=verdict,
        hint=" ".join(h for h in (oom_hint(oom), eng.quiet_hint if quiet else None) if h) or None,
    )


def detect_engine(text: str, log: str = "-") -> str:
    """The one engine whose start-up markers the log holds; BadInput when none or several do."""
    engines = load_data().engines
    lines = log_lines(text, list(engines.values()))
    hits = [k for k, eng in engines.items() if any(_compile(m.regex).search(line) for m in eng.start for line in lines)]
    if len(hits) != 1:
        found = f"markers of {', '.join(hits)}" if hits else "no engine's start-up marker"
        raise BadInput(f"{log}: cannot tell the engine ({found})", hint=f"pass --engine ({', '.join(engine_names())})")
    return hits[0]


def _read_log(path: str | Path) -> str:
    return read_bytes(path, max_bytes=MAX_LOG_BYTES, what="log").decode("utf-8", errors="replace")


def check_file(
    path: str | Path,
    engine: str | None,
    *,
    expect: list[str] | None = None,
    flags: str | None = None,
    against: str | Path | None = None,
) -> StartlogReport:
    """Read a log (size-capped, undecodable bytes replaced) and check it; no engine: the one the log names.
    `against`: an earlier start-up log of the same engine (the old host) whose choices are the expectations."""
    given = engine
    if given is not None:
        engine_log(given)  # an unknown engine is refused before the file is read
    text = _read_log(path)
    engine = given or detect_engine(text, str(path))
    baseline = None
    if against is not None:
        old_text = _read_log(against)
        old_engine = given or detect_engine(old_text, str(against))
        key = engine_log(engine)[0]
        if engine_log(old_engine)[0] != key:
            raise BadInput(
                f"--against {against}: a {old_engine} log, this is {key}: engines name their choices "
                "differently, so compare a log with one of the same engine"
            )
        baseline = expectations_from_report(check_text(old_text, key, log=str(against)))
    return check_text(text, engine, log=str(path), expect=expect, flags=flags, baseline=baseline)
