"""Driver / CUDA x engine build compatibility: can this engine version run on that host's driver and GPUs?

Facts are data (`engines/data/matrix/compat.yaml`, cited, verified or not): CUDA minor-version compatibility per
major family, each toolkit's own driver, and per engine version the CUDA it was built with and the lowest compute
capability it ships kernels for. A version the data does not know is "unknown", never assumed to run.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from switchover.engines.cited import CitedFact
from switchover.engines.formats import Device, FormatMatrix, FormatRule, FormatVerdict, load_matrix, lookup
from switchover.engines.matrixfile import packaged, validated
from switchover.engines.names import ENGINES
from switchover.engines.releases import load_releases
from switchover.engines.versions import check_release_form, release_key, split_engine_ref
from switchover.errors import BadInput

Status = Literal["ok", "degraded", "fails", "unknown"]
_ZERO = Version("0")  # a family or toolkit without a minimum driver
_DRIVER = re.compile(r"^\d{1,4}(\.\d{1,4}){0,2}$")
_CUDA = re.compile(r"^\d{1,2}\.\d{1,2}$")


def release_range(spec: str) -> SpecifierSet:
    """A release range such as '>=0.9,<0.12' or '==0.6.6.*' (PEP 440 specifiers); ValueError naming it."""
    try:
        return SpecifierSet(spec)
    except InvalidSpecifier:
        raise ValueError(f"not a release range: {spec[:60]!r} (e.g. '>=0.9,<0.12')") from None


def in_range(spec: str, version: str) -> bool:
    """Whether an engine release (0.6.3, 0.8.5.post1, 1.2.0rc1, b3216) lies in a range, ordered as
    `engines.versions.release_key` orders releases (pre-releases included); False for a malformed release."""
    try:
        return release_range(spec).contains(release_key(version), prereleases=True)
    except ValueError:
        return False


class _Cited(CitedFact):
    note: str | None = None


def _driver_field(value: str) -> str:
    if not _DRIVER.match(value):
        raise ValueError(f"not a driver version: {value!r} (e.g. 570.124.06)")
    return value


def _cuda_field(value: str) -> str:
    if not _CUDA.match(value):
        raise ValueError(f"not a CUDA version: {value!r} (e.g. 12.8)")
    return value


class CudaFamily(_Cited):
    """Minor-version compatibility: the lowest driver any CUDA <major>.x binary runs on (limited feature set)."""

    cuda_major: int = Field(ge=1, le=99)
    min_driver: str

    _check_driver = field_validator("min_driver")(classmethod(lambda cls, v: _driver_field(v)))


class CudaToolkit(_Cited):
    """The driver a CUDA toolkit release ships with: full feature set, PTX JIT included."""

    cuda: str
    min_driver: str

    _check_cuda = field_validator("cuda")(classmethod(lambda cls, v: _cuda_field(v)))
    _check_driver = field_validator("min_driver")(classmethod(lambda cls, v: _driver_field(v)))


class EngineBuild(_Cited):
    """One engine build: versions it covers, its CUDA, the lowest compute capability it has kernels for."""

    engine: str
    versions: str
    cuda: str
    min_sm: int | None = Field(default=None, ge=0, le=200)
    default: bool = Field(description="False: a variant that must be asked for (e.g. a +cu130 wheel)")
    torch: str | None = None

    _check_cuda = field_validator("cuda")(classmethod(lambda cls, v: _cuda_field(v)))

    @field_validator("versions")
    @classmethod
    def _spec(cls, value: str) -> str:
        release_range(value)  # ValueError on a malformed range
        return value

    def holds_at(self, version: str) -> bool:
        return in_range(self.versions, version)


class CompatData(BaseModel):
    """The whole compatibility file, cross-checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cuda_families: list[CudaFamily]
    cuda_toolkits: list[CudaToolkit]
    builds: list[EngineBuild]

    @model_validator(mode="after")
    def _consistent(self) -> CompatData:
        majors = {f.cuda_major for f in self.cuda_families}
        for i, b in enumerate(self.builds):
            if b.engine not in ENGINES:
                raise ValueError(f"builds.{i}.engine: unknown engine {b.engine!r} (known: {', '.join(ENGINES)})")
            if int(b.cuda.split(".")[0]) not in majors:
                raise ValueError(f"builds.{i}.cuda: no cuda_families entry for CUDA {b.cuda.split('.')[0]}.x")
        return self

    def family(self, cuda: str) -> CudaFamily | None:
        major = int(cuda.split(".")[0])
        return next((f for f in self.cuda_families if f.cuda_major == major), None)

    def toolkit(self, cuda: str) -> CudaToolkit | None:
        return next((t for t in self.cuda_toolkits if t.cuda == cuda), None)

    def builds_for(self, engine: str, version: str) -> list[EngineBuild]:
        return [b for b in self.builds if b.engine == engine and b.holds_at(version)]


@cache
def load_compat() -> CompatData:
    """The packaged data (engines/data/matrix/compat.yaml), validated."""
    return validated(CompatData, packaged("compat.yaml"), "compat.yaml")


# ---- a pinned engine -------------------------------------------------------------------------------------------


def newest_release(engine: str, version_read: str) -> str | None:
    """The newest release of an engine the data knows: the newest read from source (engines.releases), else the
    release a profile was read at when its `version_read` starts with one; None when neither names a release."""
    data = load_releases(engine)
    if data is not None and data.releases:
        return data.releases[-1].version
    first = version_read.split()[0] if version_read.split() else ""
    try:
        release_key(first)
    except ValueError:
        return None
    return first


class EnginePin(BaseModel):
    """An engine and, when pinned, its release (`vllm@0.11.0`, `vllm==0.11.0`, `llamacpp@b3216`)."""

    engine: str
    version: str | None = None

    @property
    def label(self) -> str:
        return f"{self.engine}=={self.version}" if self.version else self.engine


def parse_pin(text: str, option: str = "--engine") -> EnginePin:
    """`ENGINE`, `ENGINE@VERSION` or `ENGINE==VERSION` (engines.versions.split_engine_ref); BadInput naming the
    option and the value otherwise."""
    from switchover.engines import load_profile

    try:
        name, version = split_engine_ref(text)
    except ValueError as exc:
        raise BadInput(f"{option} {text[:60]!r}: {exc}") from None
    if not name:
        raise BadInput(f"{option} {text[:60]!r}: expected ENGINE or ENGINE@VERSION, e.g. vllm@0.11.0")
    profile = load_profile(name)  # BadInput naming the known engines
    if version is not None:
        try:
            check_release_form(profile.name, profile.release_scheme, version)
        except ValueError as exc:
            raise BadInput(f"{option} {text[:60]!r}: {exc}") from None
    return EnginePin(engine=profile.name, version=version)


# ---- checking a build against a host ---------------------------------------------------------------------------


class CompatFinding(BaseModel):
    """Whether one engine build runs on one host, and why."""

    engine: str
    version: str | None
    build_cuda: str | None = None
    default_build: bool | None = None
    status: Status
    message: str
    sources: list[str] = Field(default_factory=list)
    verified: bool = False


def _driver_version(text: str | None) -> Version | None:
    """A driver version ('535.104.05') ordered as releases are (engines.versions.release_key: 535 == 535.0.0);
    None when it is not one."""
    if not text or not _DRIVER.match(text.strip()):
        return None
    return release_key(text.strip())


def sm_of(cc: str | None) -> int | None:
    """A compute capability as an sm number ('9.0' -> 90, '8.6' -> 86); None when absent or not digits."""
    major, _, minor = (cc or "").partition(".")
    minor = minor or "0"
    ok = major.isascii() and major.isdigit() and minor.isascii() and minor.isdigit()
    return int(major) * 10 + int(minor) if ok else None


def check_build(
    build: EngineBuild, version: str, driver: str | None, gpu_ccs: list[str | None], data: CompatData
) -> CompatFinding:
    """One build against a host's driver version and GPUs' compute capabilities."""
    base: dict[str, Any] = {
        "engine": build.engine,
        "version": version,
        "build_cuda": build.cuda,
        "default_build": build.default,
    }
    sources = [build.source]
    verified = build.verified
    label = f"{build.engine} {version} (CUDA {build.cuda} build{'' if build.default else ', a non-default variant'})"
    sms = [sm_of(cc) for cc in gpu_ccs]
    known = [s for s in sms if s is not None]
    if build.min_sm is not None and known and min(known) < build.min_sm:
        return CompatFinding(
            **base,
            status="fails",
            sources=sources,
            verified=verified,
            message=f"{label} ships kernels for sm{build.min_sm} and newer; the host has sm{min(known)}",
        )
    family, toolkit = data.family(build.cuda), data.toolkit(build.cuda)
    if family is None:  # the validator makes this impossible for packaged data
        return CompatFinding(**base, status="unknown", message=f"no CUDA {build.cuda} family data")
    sources.append(family.source)
    verified = verified and family.verified
    host = _driver_version(driver)
    fam_min = _driver_version(family.min_driver) or _ZERO
    need = f"driver >= {family.min_driver} (CUDA {family.cuda_major}.x minor-version compatibility)"
    if toolkit is not None:
        sources.append(toolkit.source)
        need += f", >= {toolkit.min_driver} for the full CUDA {build.cuda} feature set"
    if host is None:
        return CompatFinding(
            **base,
            status="unknown",
            sources=sources,
            verified=verified,
            message=f"{label} needs {need}; the host's driver is not known "
            "(fingerprint the host with `switchover hw fingerprint --json`)",
        )
    if not host >= fam_min:
        return CompatFinding(
            **base,
            status="fails",
            sources=sources,
            verified=verified,
            message=f"{label} cannot run on driver {driver}: needs {need}",
        )
    if toolkit is not None and not host >= (_driver_version(toolkit.min_driver) or _ZERO):
        return CompatFinding(
            **base,
            status="degraded",
            sources=sources,
            verified=verified and toolkit.verified,
            message=f"{label} runs on driver {driver} only through minor-version compatibility "
            f"(below {toolkit.min_driver}): kernels that need PTX JIT for a newer toolkit "
            "fail (cudaErrorUnsupportedPtxVersion)" + (f"; {build.note}" if build.note else ""),
        )
    tail = "" if toolkit is not None else f" (CUDA {build.cuda}'s own driver minimum is not in the data)"
    return CompatFinding(
        **base,
        status="ok",
        sources=sources,
        verified=verified and (toolkit is None or toolkit.verified),
        message=f"{label} runs on driver {driver}: needs {need}{tail}",
    )


def check_engine(
    pin: EnginePin, driver: str | None, gpu_ccs: list[str | None], gpu_present: bool, data: CompatData | None = None
) -> list[CompatFinding]:
    """Every known build of a pinned engine version against a host (one finding per build)."""
    d = data or load_compat()
    if pin.version is None:
        from switchover.engines import load_profile

        newest = newest_release(pin.engine, load_profile(pin.engine).version_read)
        if newest is None:
            return [
                CompatFinding(
                    engine=pin.engine,
                    version=None,
                    status="unknown",
                    message=f"{pin.engine}: no version pinned and no release of it is known, so its "
                    f"CUDA build is unknown (pass --engine {pin.engine}@VERSION)",
                )
            ]
        said = (
            f"{pin.engine}: no version pinned: {newest}, the newest known, is assumed (pass --engine "
            f"{pin.engine}@VERSION); "
        )
        return [
            f.model_copy(update={"message": said + f.message})
            for f in check_engine(EnginePin(engine=pin.engine, version=newest), driver, gpu_ccs, gpu_present, d)
        ]
    if not gpu_present:
        return [
            CompatFinding(
                engine=pin.engine,
                version=pin.version,
                status="unknown",
                message=f"{pin.label}: the host has no GPU; CUDA builds cannot run there (a CPU "
                "build is another package)",
            )
        ]
    builds = d.builds_for(pin.engine, pin.version)
    if not builds:
        return [
            CompatFinding(
                engine=pin.engine,
                version=pin.version,
                status="unknown",
                message=f"{pin.label}: the compatibility data has no build of this version "
                "(engines/data/matrix/compat.yaml), so its driver needs are unknown",
            )
        ]
    return [check_build(b, pin.version, driver, gpu_ccs, d) for b in builds]


def driver_support(driver: str | None, data: CompatData | None = None) -> str | None:
    """Which CUDA builds a driver runs, in words: families by minor-version compatibility, toolkits in full."""
    host = _driver_version(driver)
    if host is None:
        return None
    d = data or load_compat()
    families = [f"{f.cuda_major}.x" for f in d.cuda_families if host >= (_driver_version(f.min_driver) or _ZERO)]
    full = [t.cuda for t in d.cuda_toolkits if host >= (_driver_version(t.min_driver) or _ZERO)]
    if not families:
        return f"driver {driver} is below every CUDA family minimum in the data"
    top = max(full, key=lambda c: tuple(int(x) for x in c.split(".")), default=None)
    return f"driver {driver} runs CUDA {', '.join(families)} builds (minor-version compatibility)" + (
        f"; full feature set (PTX JIT) up to CUDA {top}" if top else "; no toolkit's own driver minimum met"
    )


# ---- format rules by release -----------------------------------------------------------------------------------


class FormatsRead(_Cited):
    """The release an engine's rules in formats.yaml were read at, and the releases they are taken to hold for."""

    engine: str
    read_at: str | None = Field(description="None: the rules were read where no release is recorded")
    versions: str | None

    @field_validator("versions")
    @classmethod
    def _spec(cls, value: str | None) -> str | None:
        if value is not None:
            release_range(value)
        return value


class RangedFormatRule(FormatRule):
    """A formats.yaml rule read at other releases than the matrix, with the releases it holds for."""

    versions: str

    @field_validator("versions")
    @classmethod
    def _spec(cls, value: str) -> str:
        release_range(value)
        return value

    def rule(self) -> FormatRule:
        return FormatRule.model_validate(self.model_dump(exclude={"versions"}))


class FormatReleases(BaseModel):
    """engines/data/matrix/format_releases.yaml, cross-checked against the format matrix."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read: list[FormatsRead]
    rules: list[RangedFormatRule]

    @model_validator(mode="after")
    def _consistent(self) -> FormatReleases:
        engines = [r.engine for r in self.read]
        if sorted(engines) != sorted(ENGINES):
            raise ValueError(f"read: one entry per engine with a profile ({', '.join(ENGINES)}), got {engines}")
        formats = load_matrix().formats
        for i, rule in enumerate(self.rules):
            if rule.format not in formats and rule.format != "*":
                raise ValueError(f"rules.{i}.format: unknown format {rule.format!r}")
        return self

    def read_of(self, engine: str) -> FormatsRead:
        return next(r for r in self.read if r.engine == engine)


@cache
def load_format_releases() -> FormatReleases:
    """The packaged data (engines/data/matrix/format_releases.yaml), validated."""
    return validated(FormatReleases, packaged("format_releases.yaml"), "format_releases.yaml")


def format_rules_at(engine: str, version: str | None) -> tuple[FormatMatrix, str | None]:
    """The format matrix as it holds at `engine`'s release `version` (None: the newest known, the matrix's own
    rules), and what to tell the user about it (None: nothing to say). A release the rules read do not cover gets
    only the ranged rules that hold there; what none covers is unknown."""
    base, read = load_matrix(), load_format_releases().read_of(engine)
    if version is None:
        return base, (
            None
            if read.read_at
            else f"the {engine} format rules were read where no release is recorded ({read.source})"
        )
    if read.versions is not None and in_range(read.versions, version):
        newer = read.read_at is not None and release_key(version) > release_key(read.read_at)
        return base, (
            f"the {engine} format rules were read at {read.read_at}; {version} is newer: they are assumed to still hold"
            if newer
            else None
        )
    ranged = [r.rule() for r in load_format_releases().rules if r.engine == engine and in_range(r.versions, version)]
    rules = [r for r in base.rules if r.engine != engine] + ranged
    return FormatMatrix.model_validate({"formats": base.formats, "rules": rules}), None


def _range_start(spec: str) -> Version:
    """The lowest release a range names, to list ranges oldest first."""
    return min((release_key(s.version) for s in release_range(spec)), default=release_key("0"))


def lookup_at(engine: str, fmt: str, device: Device, sm: int | None, version: str | None) -> FormatVerdict:
    """`formats.lookup` with the rules that hold at the engine's release; a release no rule read covers is
    unknown, and the reason says which releases were read."""
    matrix, _ = format_rules_at(engine, version)
    verdict = lookup(engine, fmt, device, sm, matrix)
    if version is not None and verdict.reason.startswith(f"{engine} "):
        said = verdict.reason.removeprefix(engine + " ")
        verdict = verdict.model_copy(update={"reason": f"{engine} {version} {said}"})
    if verdict.loads is None and version is not None and verdict.source is None:
        read = load_format_releases().read_of(engine)
        covered = sorted(
            {
                r.versions
                for r in load_format_releases().rules
                if r.engine == engine and r.format == fmt and r.device == device
            },
            key=_range_start,
        )
        spans = ", ".join([*covered, *([read.versions] if read.versions else [])]) or "none"
        verdict = verdict.model_copy(
            update={
                "reason": f"unknown: no {engine} {fmt} rule read covers {engine} "
                f"{version} (the releases read for it: {spans})"
            }
        )
    return verdict
