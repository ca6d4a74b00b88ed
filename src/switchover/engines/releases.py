"""What each engine release accepts and serves, read from its source: every launch option and metric name, with the
releases it holds for (engines/data/releases/<engine>.json, written by scripts/engine_releases.py).

The profiles (engines/data/<engine>.yaml) say what a flag *means*, by intent; this module says whether a spelling
*exists* at a version, what value it takes, and where to read it. A version is looked up against the releases that
were read: exactly when it was read; between two reads only what both agree on; before the oldest or after the newest
read, a fact is "unknown" (said, never guessed). Every answer carries a URL to the source at the release.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from switchover.engines.versions import release_key
from switchover.errors import BadInput

Kind = Literal["int", "float", "str", "bool", "json", "list", "unknown"]
Coverage = Literal["exact", "between", "newest_assumed", "newer_than_read", "older_than_read"]
Status = Literal["present", "absent", "unknown"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParserRules(_Frozen):
    """How the release's command-line parser matches what a user typed to an option."""

    abbrev: bool = Field(
        default=False,
        description="argparse allow_abbrev: a unique prefix of a long option selects it (SGLang's --tp for --tp-size)",
    )
    underscores: bool = Field(default=False, description="--a_b is read as --a-b (vLLM's FlexibleArgumentParser)")
    dotted_keys: bool = Field(
        default=False, description="--a.b VALUE sets key b of the JSON option --a (vLLM's FlexibleArgumentParser)"
    )
    attached_short: bool = Field(
        default=False,
        description="a one-letter short option that takes a value may have it attached (-O3 is -O 3: argparse)",
    )
    attached_values: dict[str, str] = Field(
        default_factory=dict,
        description="a short option typed with its value "
        "attached -> the spelling the parser hands the value to ({'-O': "
        "'--optimization-level'}: vLLM's rewrite of -O3)",
    )
    source: str = Field(description="where the rule was read (path in the release)")


class ReleaseRead(_Frozen):
    """One release whose source was read."""

    version: str = Field(description="the engine's own version string (0.6.3, 2.0.2, b3995)")
    ref: str = Field(description="the git tag (or commit) of the release, for source URLs")
    archive: str = Field(description="what was read: a PyPI / npm archive URL or a repository tag")
    date: str | None = Field(default=None, description="release date (YYYY-MM-DD) when the archive says it")
    parser: ParserRules
    files: list[str] = Field(description="source files the options and metrics were read from")
    env_prefix_aliases: dict[str, str] = Field(
        default_factory=dict, description="a variable prefix the release reads as another ({'SGL_': 'SGLANG_'})"
    )


class FlagSpan(_Frozen):
    """One launch option as a run of consecutive releases read defined it (first..last inclusive)."""

    first: str
    last: str
    path: str = Field(description="the file that defines the option in these releases")
    aliases: list[str] = Field(default_factory=list, description="other option strings for the same option")
    takes_value: bool = Field(description="False: a switch (store_true, BooleanOptionalAction, clap bool flag)")
    value_optional: bool = Field(
        default=False,
        description="the value may be left out (argparse nargs='?'): "
        "`--flag` alone is accepted, and so is `--flag VALUE`",
    )
    kind: Kind = "unknown"
    choices: list[str] | None = Field(default=None, description="the values the parser accepts; None = any")
    choices_open: bool = Field(
        default=False, description="choices is what could be read statically, and the release may accept more (plugins)"
    )
    default: str | None = Field(default=None, description="the default as written in the source")
    negation: str | None = Field(default=None, description="the option that turns a switch off (--no-x)")
    negations: list[str] = Field(
        default_factory=list,
        description="further spellings that turn it off (llama.cpp -nocb beside --no-cont-batching)",
    )
    env: str | None = Field(default=None, description="environment variable that sets it (TGI, llama.cpp)")
    deprecated: str | None = Field(default=None, description="the release's own deprecation note")


class MetricSpan(_Frozen):
    """One Prometheus series name (as scraped, without _bucket/_sum/_count) over a run of releases read."""

    first: str
    last: str
    path: str
    type: Literal["counter", "gauge", "histogram", "summary", "unknown"]


class EnvSpan(_Frozen):
    """One environment variable the engine reads (VLLM_*, SGLANG_*), over a run of releases read."""

    first: str
    last: str
    path: str
    kind: Kind = "unknown"
    choices: list[str] | None = None
    default: str | None = None
    deprecated: str | None = Field(default=None, description="the release's own deprecation note")


class EngineReleases(_Frozen):
    """Everything read from one engine's releases."""

    engine: str
    generated_by: str
    source_url: str = Field(description="URL template of a source file at a release: {ref} and {path}")
    releases: list[ReleaseRead]
    flags: dict[str, list[FlagSpan]]
    metrics: dict[str, list[MetricSpan]] = Field(default_factory=dict)
    environment: dict[str, list[EnvSpan]] = Field(
        default_factory=dict,
        description="environment variables the engine reads itself (an empty table: not extracted)",
    )
    notes: list[str] = Field(default_factory=list, description="how names were recorded (e.g. counters' _total)")
    env_namespaces: list[str] = Field(
        default_factory=list,
        description="prefixes of the engine's own variables "
        "(VLLM_): a name outside them that the table lacks may be read by a library "
        "the engine loads (unknown, not absent)",
    )

    @model_validator(mode="after")
    def _spans_name_reads(self) -> EngineReleases:
        read = {r.version for r in self.releases}
        keys = [release_key(r.version) for r in self.releases]
        if keys != sorted(keys) or len(set(keys)) != len(keys):
            raise ValueError("releases must be in ascending version order, each once")
        tables: tuple[
            tuple[str, dict[str, list[FlagSpan]] | dict[str, list[MetricSpan]] | dict[str, list[EnvSpan]]], ...
        ] = (("flag", self.flags), ("metric", self.metrics), ("environment variable", self.environment))
        for kind, table in tables:
            for name, spans in table.items():
                for span in spans:
                    if span.first not in read or span.last not in read:
                        raise ValueError(f"{kind} {name}: span {span.first}..{span.last} names a release not read")
        return self

    def url(self, ref: str, path: str) -> str:
        return self.source_url.format(ref=ref, path=path)


@dataclass(frozen=True)
class Resolution:
    """A version as asked, and how the data covers it."""

    engine: str
    asked: str | None
    coverage: Coverage
    before: ReleaseRead | None = field(default=None, repr=False)  # the newest read release <= asked
    after: ReleaseRead | None = field(default=None, repr=False)  # the oldest read release >= asked

    @property
    def label(self) -> str:
        """The version as the user reads it in output."""
        if self.asked:
            return f"{self.engine} {self.asked}"
        assert self.before is not None
        return f"{self.engine} {self.before.version}"

    @property
    def note(self) -> str | None:
        """What to tell the user about the coverage (None when the version was read exactly)."""
        if self.coverage == "exact":
            return None
        if self.coverage == "newest_assumed":
            assert self.before is not None
            return f"no {self.engine} version given: the newest read, {self.before.version}, is assumed"
        if self.coverage == "between":
            assert self.before is not None and self.after is not None
            return (
                f"{self.engine} {self.asked} was not read: facts that agree in {self.before.version} and "
                f"{self.after.version} (the releases read on each side) are used; the rest is unknown"
            )
        if self.coverage == "newer_than_read":
            assert self.before is not None
            return (
                f"{self.engine} {self.asked} is newer than the newest release read ({self.before.version}): "
                f"what {self.before.version} has is assumed still there; anything else is unknown, not refused"
            )
        assert self.after is not None
        return (
            f"{self.engine} {self.asked} is older than the oldest release read ({self.after.version}): its flags "
            "and metrics are unknown, not checked"
        )


@dataclass(frozen=True)
class Lookup:
    """Whether a flag or metric exists at a version, with the span that says so and a URL to read it."""

    name: str
    status: Status
    reason: str
    span: FlagSpan | MetricSpan | EnvSpan | None = None
    url: str | None = None
    matched_as: str | None = None  # how the typed spelling reached `name` ("abbreviation of --tp-size")
    # between two reads that both have it but define it differently: both definitions (a value is surely accepted
    # only when both accept it); otherwise just `span`
    alternatives: tuple[FlagSpan | MetricSpan | EnvSpan, ...] = ()
    attached_value: str | None = None  # the value typed inside the option word (-O3: "3")


_DATA = "data/releases"


@cache
def load_releases(engine: str) -> EngineReleases | None:
    """The release data of an engine (by profile name), or None when none has been generated."""
    path = resources.files("switchover.engines").joinpath(_DATA, f"{engine}.json")
    if not path.is_file():
        return None
    try:
        return EngineReleases.model_validate(orjson.loads(path.read_bytes()))
    except (ValidationError, orjson.JSONDecodeError) as exc:  # a packaging bug, but say which file
        raise BadInput(f"engine release data {engine}.json is invalid: {exc}") from None


def resolve(data: EngineReleases, asked: str | None) -> Resolution:
    """How the releases read cover `asked` (None: the newest read is assumed, and said)."""
    if not data.releases:
        raise ValueError(f"{data.engine}: no releases read")
    newest = data.releases[-1]
    if asked is None:
        return Resolution(data.engine, None, "newest_assumed", before=newest)
    key = release_key(asked)
    before = after = None
    for rel in data.releases:
        k = release_key(rel.version)
        if k <= key:
            before = rel
        if k >= key and after is None:
            after = rel
    if before is not None and after is not None and before.version == after.version:
        return Resolution(data.engine, asked, "exact", before=before, after=after)
    if before is None:
        return Resolution(data.engine, asked, "older_than_read", after=after)
    if after is None:
        return Resolution(data.engine, asked, "newer_than_read", before=before)
    return Resolution(data.engine, asked, "between", before=before, after=after)


AnySpans = list[FlagSpan] | list[MetricSpan] | list[EnvSpan]


def _span_at(spans: AnySpans, data: EngineReleases, version: str) -> FlagSpan | MetricSpan | EnvSpan | None:
    key = release_key(version)
    for span in spans:
        if release_key(span.first) <= key <= release_key(span.last):
            return span
    return None


def _last_before(spans: AnySpans, version: str) -> FlagSpan | MetricSpan | EnvSpan | None:
    key = release_key(version)
    earlier = [s for s in spans if release_key(s.last) < key]
    return max(earlier, key=lambda s: release_key(s.last)) if earlier else None


class ReleaseView:
    """The facts of one engine at one version, as far as the releases read cover it."""

    def __init__(self, data: EngineReleases, resolution: Resolution) -> None:
        self.data = data
        self.resolution = resolution
        self._options: dict[str, str] | None = None

    @property
    def engine(self) -> str:
        return self.data.engine

    @property
    def parser(self) -> ParserRules | None:
        """The parser rules of the release read at or before the version (None when older than every read)."""
        rel = self.resolution.before or (self.resolution.after if self.resolution.coverage == "exact" else None)
        return rel.parser if rel else None

    def _lookup(self, name: str, spans: AnySpans | None, what: str) -> Lookup:
        res, data = self.resolution, self.data
        if res.coverage == "older_than_read":
            return Lookup(name, "unknown", res.note or "")
        assert res.before is not None
        here = _span_at(spans, data, res.before.version) if spans else None
        if res.coverage in ("exact", "newest_assumed"):
            if here is not None:
                return Lookup(
                    name,
                    "present",
                    f"{what} in {data.engine} {res.before.version}",
                    here,
                    data.url(res.before.ref, here.path),
                )
            gone = _last_before(spans, res.before.version) if spans else None
            why = (
                f"not a {what} in {data.engine} {res.before.version} (last in {gone.last}, "
                f"{data.url(self._ref(gone.last), gone.path)})"
                if gone
                else f"not a {what} in any {data.engine} release read up to {res.before.version}"
            )
            return Lookup(name, "absent", why, gone)
        if res.coverage == "newer_than_read":
            if here is not None:
                return Lookup(
                    name,
                    "present",
                    f"{what} in {data.engine} {res.before.version}, the newest read ({res.asked} was not read)",
                    here,
                    data.url(res.before.ref, here.path),
                )
            return Lookup(
                name,
                "unknown",
                f"not in {data.engine} {res.before.version}, the newest release read; {res.asked} was not read",
            )
        assert res.after is not None  # between two reads
        there = _span_at(spans, data, res.after.version) if spans else None
        if here is not None and there is not None and here == there:
            return Lookup(
                name,
                "present",
                f"{what} in {data.engine} {res.before.version} and {res.after.version}",
                here,
                data.url(res.before.ref, here.path),
            )
        if here is None and there is None:
            return Lookup(
                name,
                "absent",
                f"not a {what} in {data.engine} {res.before.version} nor "
                f"{res.after.version} (the releases read around {res.asked})",
            )
        if here is not None and there is not None:  # in both reads around it, defined differently
            return Lookup(
                name,
                "present",
                f"{what} in {data.engine} {res.before.version} and {res.after.version} "
                f"(defined differently: {res.asked} was not read, so a value is taken as "
                "accepted only when both accept it)",
                here,
                data.url(res.before.ref, here.path),
                alternatives=(here, there),
            )
        return Lookup(
            name,
            "unknown",
            f"a {what} in {data.engine} {res.before.version if here else res.after.version}"
            f" but not in {res.after.version if here else res.before.version}; "
            f"{res.asked} was not read",
        )

    def _ref(self, version: str) -> str:
        return next(r.ref for r in self.data.releases if r.version == version)

    def _options_here(self) -> dict[str, str]:
        """Every option string (and alias, and negation) present at the version -> its canonical name."""
        if self._options is None:
            res = self.resolution
            self._options = self._options_at(res.before.version) if res.before is not None else {}
        return self._options

    def _options_at(self, version: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, spans in self.data.flags.items():
            span = _span_at(spans, self.data, version)
            if not isinstance(span, FlagSpan):
                continue
            for spelling in (name, *span.aliases, *filter(None, (span.negation, *span.negations))):
                out.setdefault(spelling, name)
        return out

    def _renamed_between(self, typed: str) -> Lookup | None:
        """Between two reads, a spelling both accept as different options (llama.cpp --no-mmap: its own switch up to
        b7347, the negation of --mmap from b7698): present, with both definitions."""
        res = self.resolution
        if res.coverage != "between" or res.before is None or res.after is None:
            return None
        here, there = self._options_here().get(typed), self._options_at(res.after.version).get(typed)
        if here is None or there is None or here == there:
            return None
        first = _span_at(self.data.flags[here], self.data, res.before.version)
        second = _span_at(self.data.flags[there], self.data, res.after.version)
        assert first is not None and second is not None
        return Lookup(
            here,
            "present",
            f"{typed} is {here} in {self.engine} {res.before.version} and {there} in "
            f"{res.after.version} ({res.asked} was not read: a value is taken as accepted "
            "only when both accept it)",
            first,
            self.data.url(res.before.ref, first.path),
            f"{typed} is {here} or {there} (renamed between the releases read)",
            (first, second),
        )

    def option(self, typed: str) -> Lookup:
        """The option a typed spelling selects at this version, the way the engine's parser matches it: exactly,
        an alias or negation, `--a_b` for `--a-b` where the parser reads underscores (before it matches prefixes, as
        vLLM does), `--a.b` for a key of the JSON option `--a` where it reads dotted keys, or a unique prefix where it
        allows abbreviations."""
        if (renamed := self._renamed_between(typed)) is not None:
            return renamed
        options = self._options_here()
        rules = self.parser
        spelled = typed
        if rules is not None and rules.underscores and typed.startswith("--") and "_" in typed:
            spelled = "--" + typed[2:].replace("_", "-")
        canonical = options.get(typed) or options.get(spelled)
        matched_as = None
        if canonical is not None and spelled != typed and typed not in options:
            matched_as = f"{typed} is read as {spelled} ({rules.source if rules else ''})"
        if canonical is None and rules is not None and rules.dotted_keys and "." in spelled:
            base = spelled.split(".", 1)[0]
            if base in options:
                found = self._lookup(options[base], self.data.flags.get(options[base]), "flag")
                return Lookup(
                    found.name,
                    found.status,
                    found.reason,
                    found.span,
                    found.url,
                    f"{typed} sets the key {spelled.split('.', 1)[1]!r} of {options[base]} (JSON; {rules.source})",
                    found.alternatives,
                )
        if canonical is None and rules is not None and rules.abbrev and spelled.startswith("--") and len(spelled) > 2:
            hits = sorted({c for s, c in options.items() if s.startswith("--") and s.startswith(spelled)})
            if len(hits) == 1:
                canonical = hits[0]
                matched_as = f"{typed} is an abbreviation of {canonical} ({rules.source})"
            elif len(hits) > 1:
                return Lookup(
                    typed,
                    "absent",
                    f"{typed} is an ambiguous abbreviation in {self.engine} "
                    f"{self.resolution.before.version if self.resolution.before else ''}"
                    f" ({', '.join(hits[:6])}): the engine refuses it",
                )
        if canonical is None and rules is not None and (attached := self._attached(typed, options, rules)):
            return attached
        if canonical is None:
            return self._lookup(typed, self.data.flags.get(typed), "flag")
        found = self._lookup(canonical, self.data.flags.get(canonical), "flag")
        if matched_as is None and canonical != typed:
            span = found.span if isinstance(found.span, FlagSpan) else None
            negatives = {span.negation, *span.negations} if span else set()
            matched_as = (
                f"{typed} turns off {canonical}"
                if typed in negatives or spelled in negatives
                else f"{typed} is another spelling of {canonical}"
            )
        return Lookup(found.name, found.status, found.reason, found.span, found.url, matched_as, found.alternatives)

    def _attached(self, typed: str, options: dict[str, str], rules: ParserRules) -> Lookup | None:
        """A short option typed with its value attached (-O3), where the release's parser reads one."""
        for prefix, target in rules.attached_values.items():
            if typed.startswith(prefix) and len(typed) > len(prefix):
                value = typed[len(prefix) :].removeprefix("=")
                found = self.option(target)
                return Lookup(
                    found.name,
                    found.status,
                    found.reason,
                    found.span,
                    found.url,
                    f"{typed} is read as {target} {value} ({rules.source})",
                    found.alternatives,
                    value,
                )
        short = typed[:2]
        if rules.attached_short and len(typed) > 2 and typed[0] == "-" and typed[1] != "-" and short in options:
            found = self._lookup(options[short], self.data.flags.get(options[short]), "flag")
            if isinstance(found.span, FlagSpan) and found.span.takes_value:
                value = typed[2:].removeprefix("=")
                return Lookup(
                    found.name,
                    found.status,
                    found.reason,
                    found.span,
                    found.url,
                    f"{typed} is {short} with the value {value} attached ({rules.source})",
                    found.alternatives,
                    value,
                )
        return None

    def env_var(self, variable: str) -> Lookup:
        """Whether the engine itself reads an environment variable at this version (VLLM_*, SGLANG_*); unknown when
        no environment table was extracted for the engine, or when the name is outside the engine's own prefixes and
        the table lacks it (a library the engine loads may read it)."""
        if not self.data.environment:
            return Lookup(variable, "unknown", f"no environment-variable data for {self.engine}: not checked")
        found = self._lookup(variable, self.data.environment.get(variable), "environment variable")
        if found.status != "absent":
            return found
        rel = self.resolution.before
        for old, new in rel.env_prefix_aliases.items() if rel else ():
            if variable.startswith(old):
                renamed = new + variable[len(old) :]
                again = self._lookup(renamed, self.data.environment.get(renamed), "environment variable")
                if again.status == "present":
                    return Lookup(
                        again.name,
                        again.status,
                        again.reason,
                        again.span,
                        again.url,
                        f"{variable} is read as {renamed} by {self.engine} {rel.version if rel else ''}",
                        again.alternatives,
                    )
        spaces = self.data.env_namespaces
        if spaces and not variable.startswith(tuple(spaces)) and variable not in self.data.environment:
            own = ", ".join(p + "*" for p in spaces)
            return Lookup(
                variable,
                "unknown",
                f"{variable} is not one of {self.engine}'s own variables ({own}) and "
                f"{self.engine} does not read it by name: a library it loads may; "
                "not checked",
            )
        return found

    def env_option(self, variable: str) -> Lookup | None:
        """The option an environment variable sets at this version (TGI, llama.cpp), or None when none does."""
        res = self.resolution
        if res.before is None:
            return None
        for name, spans in self.data.flags.items():
            span = _span_at(spans, self.data, res.before.version)
            if isinstance(span, FlagSpan) and span.env == variable:
                return self._lookup(name, spans, "flag")
        return None

    def metric(self, name: str) -> Lookup:
        """Whether a series name (without _bucket/_sum/_count; counters with or without _total) is served."""
        spans = self.data.metrics.get(name)
        if spans is None and not name.endswith("_total"):
            spans = self.data.metrics.get(name + "_total")
        if spans is None and name.endswith("_total"):
            spans = self.data.metrics.get(name.removesuffix("_total"))
        return self._lookup(name, spans, "metric")

    def metric_names(self) -> list[str]:
        """Every series name present at the version (empty when not covered)."""
        return sorted(n for n in self.data.metrics if self.metric(n).status == "present")


def view(engine: str, version: str | None) -> ReleaseView | None:
    """The facts of `engine` at `version` (None: the newest read, said in the resolution's note); None when no
    release data exists for the engine."""
    data = load_releases(engine)
    if data is None:
        return None
    return ReleaseView(data, resolve(data, version))
