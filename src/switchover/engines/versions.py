"""Engine version numbers and the range specs profiles key their data by ('>=0.8,<0.21'): one grammar for all."""

from __future__ import annotations

import re

from packaging.version import Version

from switchover.inputs import release_version

# a dotted number of at most 8 parts of at most 9 digits, not cut out of a longer run of digits (int() refuses
# strings past 4,300 digits: a 5,000-digit "version" is no version)
_NUMBER = re.compile(r"(?<!\d)(\d{1,9}(?:\.\d{1,9}){0,7})(?!\d)")


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """The leading dotted number of a version string ('0.11.2rc1' -> (0, 11, 2)); None when there is none."""
    if not text:
        return None
    m = _NUMBER.search(text[:200])
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    pa, pb = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (pa > pb) - (pa < pb)


def version_matches(spec: str, version: tuple[int, ...]) -> bool:
    """Whether a version satisfies every clause of a spec such as '>=0.8,<0.21'."""
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        m = re.match(r"(>=|<=|==|>|<)\s*(.+)", clause)
        bound = parse_version(m.group(2)) if m else None
        if not m or bound is None:
            raise ValueError(f"bad version clause {clause!r}")
        c = _cmp(version, bound)
        ok = {">=": c >= 0, "<=": c <= 0, "==": c == 0, ">": c > 0, "<": c < 0}[m.group(1)]
        if not ok:
            return False
    return True


def release_key(text: str) -> Version:
    """An engine release as an orderable PEP 440 version: '0.8.5.post1', '1.2.0rc1' (before 1.2.0), 'v2.0.2' (TGI's
    tags), 'b3995' (llama.cpp's build tags: build 3995). ValueError when it is none of these (inputs.release_version:
    one grammar for the CLI, the migration file and the data)."""
    return release_version(text.strip())


_BUILD = re.compile(r"[bB]?[0-9]+")


def check_release_form(engine: str, scheme: str, version: str) -> None:
    """A release written the way `engine` numbers its releases (`scheme`, its profile's `release_scheme`): "build"
    (llama.cpp: b3995 or 3995) or "release" (0.6.3, v2.0.2, 1.2.0rc1); ValueError naming the value and the expected
    form (a llama.cpp build given to vLLM would otherwise read as vLLM 3995, newer than any release)."""
    text = version.strip()
    if scheme == "build":
        if not _BUILD.fullmatch(text):
            raise ValueError(f"{text[:40]!r} is not a {engine} build: its releases are build tags such as b3995")
    elif text[:1] in ("b", "B") and text[1:].isdigit():
        raise ValueError(f"{text[:40]!r} is a build tag; {engine} releases are numbered like 0.6.3")


_BUILD_INFO = re.compile(r"b(\d{1,9})(?!\d)")


def build_tag(build_info: str) -> str | None:
    """The release tag of a llama.cpp build string ('b11434-0a1b2c3' -> 'b11434'); None for build 0 (built without
    its git history, CMake's default: the release is not known) or text of another form."""
    m = _BUILD_INFO.match(build_info)
    return f"b{int(m.group(1))}" if m and int(m.group(1)) > 0 else None


def split_engine_ref(text: str) -> tuple[str, str | None]:
    """`ENGINE`, `ENGINE@VERSION` or `ENGINE==VERSION` as (engine, version or None); the version is checked with
    `release_key` (ValueError naming it), the engine name is not (the profiles know the engines)."""
    for sep in ("@", "=="):
        name, found, version = text.strip().partition(sep)
        if found:
            version = version.strip()
            release_key(version)
            return name.strip(), version
    return text.strip(), None
