"""Validated option types for every verb (typer parsers over switchover.inputs): a bad value is refused while
the command line is parsed, as one line naming the option (exit 2), before any work starts.

Use: `typer.Option(1, "--tp", parser=params.count(hi=inputs.MAX_PARALLEL))`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Literal, NoReturn, overload

import typer

from switchover import inputs
from switchover.errors import BadInput


class _Parser(ABC):
    """A callable typer `parser=`: text in, value out, typer.BadParameter (exit 2, one line) when refused."""

    name = "value"

    def fail(self, message: str, *_: object) -> NoReturn:
        raise typer.BadParameter(message)

    @abstractmethod
    def convert(self, value: Any, param: object = None, ctx: object = None) -> Any:
        """`value` as the option's type; `fail` when it is refused."""

    def __call__(self, value: Any) -> Any:
        return self.convert(value)


class Number(_Parser):
    """A finite int or float in [lo, hi] (lo excluded when `lo_open`)."""

    def __init__(
        self, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False, integer: bool = False
    ) -> None:
        self.lo, self.hi, self.lo_open, self.integer = lo, hi, lo_open, integer
        self.name = "integer" if integer else "number"

    def convert(self, value: Any, param: object = None, ctx: object = None) -> int | float:
        if isinstance(value, bool):
            self.fail(f"expected a number, got {value!r}", param, ctx)
        if isinstance(value, int | float):
            number: int | float = value
        else:
            text = str(value).strip()
            try:
                number = int(text, 10) if self.integer else float(text)
            except ValueError:
                kind = "a whole number" if self.integer else "a number"
                self.fail(f"expected {kind}, got {str(value)[:40]!r}", param, ctx)
        problem = inputs.number_problem(number, lo=self.lo, hi=self.hi, lo_open=self.lo_open, integer=self.integer)
        if problem:
            self.fail(problem, param, ctx)
        return int(number) if self.integer else float(number)


def count(lo: int = 1, hi: int = inputs.MAX_COUNT) -> Number:
    """A whole number in [lo, hi] (default: at least 1)."""
    return Number(lo=lo, hi=hi, integer=True)


def positive(hi: float) -> Number:
    """A finite number > 0 and <= hi."""
    return Number(lo=0, hi=hi, lo_open=True)


def non_negative(hi: float) -> Number:
    """A finite number >= 0 and <= hi."""
    return Number(lo=0, hi=hi)


FRACTION = Number(lo=0, hi=1, lo_open=True)
SHARE = Number(lo=0, hi=1)
PERCENT = Number(lo=0, hi=100)
PORT = Number(lo=1, hi=inputs.PORT_MAX, integer=True)
TOKENS = count(hi=inputs.MAX_TOKENS)
SEED = count(lo=0, hi=2**63 - 1)
SECONDS = positive(inputs.MAX_SECONDS)
MILLISECONDS = positive(inputs.MAX_MS)
GIB = positive(inputs.MAX_GIB)


class _Checked(_Parser):
    """Text checked by one of switchover.inputs' checks (a ValueError naming the problem refuses it)."""

    @staticmethod
    @abstractmethod
    def check(value: str) -> str:
        """The accepted text; ValueError otherwise."""

    def convert(self, value: Any, param: object = None, ctx: object = None) -> str:
        try:
            return self.check(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class BaseUrl(_Checked):
    """http(s)://host[:port][/path] without credentials, query or fragment."""

    name = "url"
    check = staticmethod(inputs.base_url)


class HostPort(_Checked):
    """host:port with a port of 1-65535 (kept as the text given)."""

    name = "host:port"

    @staticmethod
    def check(value: str) -> str:
        inputs.host_port(value)
        return value


class EnvVarName(_Checked):
    """The name of an environment variable (never the secret itself)."""

    name = "env-var"
    check = staticmethod(inputs.env_var_name)


class Text(_Parser):
    """A non-blank, printable, bounded string (names, ids, labels)."""

    name = "text"

    def __init__(self, max_len: int = 256) -> None:
        self.max_len = max_len

    def convert(self, value: Any, param: object = None, ctx: object = None) -> str:
        text = str(value)
        if not text.strip():
            self.fail("must not be empty", param, ctx)
        if len(text) > self.max_len:
            self.fail(f"longer than {self.max_len} characters", param, ctx)
        if any(ord(c) < 32 or ord(c) == 127 for c in text):
            self.fail("must not contain control characters", param, ctx)
        return text


class PathArg(_Parser):
    """A filesystem path: not empty, no NUL, no name over 255 bytes. `folder`: an output folder (not an existing
    file, and under a folder); `file`: an output file (not a folder, and under a folder). Nothing is created here
    (typer parses defaults too): commands make their output folder with runs.prepare_folder before any work."""

    name = "path"

    def __init__(self, expect: str = "any") -> None:
        self.expect = expect

    def convert(self, value: Any, param: object = None, ctx: object = None) -> Path:
        text = str(value)
        if not text.strip():
            self.fail("must not be empty", param, ctx)
        if "\x00" in text or len(text) > 4096 or any(len(part.encode()) > 255 for part in Path(text).parts):
            self.fail(f"is not a usable path: {text[:60]!r}", param, ctx)
        path = Path(text).expanduser()
        if self.expect == "folder" and path.exists() and not path.is_dir():
            self.fail(f"{text} exists and is not a folder", param, ctx)
        if self.expect == "file" and path.is_dir():
            self.fail(f"{text} is a folder; give a file name", param, ctx)
        if self.expect in ("folder", "file"):
            parent = next((p for p in (path.absolute(), *path.absolute().parents) if p.exists()), None)
            if parent is not None and parent != path.absolute() and not parent.is_dir():
                self.fail(f"{parent} is not a folder, so {text} cannot be made", param, ctx)
        return path


MAX_LIST = 64  # values in one ladder or bucket list: every value is a measured step


@overload
def number_list(flag: str, text: str | None, hi: float, *, integer: Literal[True]) -> list[int] | None: ...


@overload
def number_list(flag: str, text: str | None, hi: float, *, integer: Literal[False] = ...) -> list[float] | None: ...


def number_list(flag: str, text: str | None, hi: float, *, integer: bool = False) -> list[Any] | None:
    """Comma-separated finite numbers in (0, hi], at most MAX_LIST (None stays None); BadInput naming the flag."""
    if text is None:
        return None
    parts = [x.strip() for x in text.split(",") if x.strip()]
    if not parts:
        raise BadInput(f"{flag} is empty")
    if len(parts) > MAX_LIST:
        raise BadInput(f"{flag}: at most {MAX_LIST} values, got {len(parts)}")
    vals: list[Any] = []
    for part in parts:
        try:
            v = float(part)
        except ValueError:
            raise BadInput(f"{flag} must be comma-separated numbers, got {part[:40]!r}") from None
        problem = inputs.number_problem(v, lo=0, lo_open=True, hi=hi, integer=integer)
        if problem:
            raise BadInput(f"{flag}: {problem}")
        vals.append(int(v) if integer else v)
    return vals


URL = BaseUrl()
HOST_PORT = HostPort()
ENV_VAR = EnvVarName()
TEXT = Text()
PATH = PathArg()
OUT_DIR = PathArg("folder")
OUT_FILE = PathArg("file")


# Options several verbs share: one definition each, so a name, parser or wording is changed in one place.

MIGRATION_FILE = Path("switchover.yaml")


def json_flag(what: str = "the result", when: str = "") -> Any:
    """`--json`: print `what` as JSON on stdout instead of console text (`when`: the condition it needs, if any).
    Its JSON Schema: `switchover schema NAME`, NAME the command's words joined by "-" (switchover.outputs)."""
    return typer.Option(False, "--json", help=f"Print {what} as JSON{f' ({when})' if when else ''}.")


def config_file(help_text: str, default: Path | None = MIGRATION_FILE) -> Any:
    """`--config/-c`: the migration file a verb reads; default None where the verb can run without one."""
    return typer.Option(default, "--config", "-c", help=help_text)


def discovered_config(config: Path | None, *given: object) -> Path | None:
    """`config`, or ./switchover.yaml when no config and none of `given` (URLs, a resume folder) was passed and the
    file exists: every verb that can read the migration file finds it the same way (said on stderr)."""
    if config is not None or any(g is not None and g != "" for g in given) or not MIGRATION_FILE.is_file():
        return config
    from switchover.cli.common import err_console

    err_console.print(f"using ./{MIGRATION_FILE} (no --config or URLs given)", highlight=False, markup=False)
    return MIGRATION_FILE


def endpoint(side: str, note: str = "") -> Any:
    """`--old` / `--new`: the base URL of the endpoint serving today or the one to switch to."""
    what = {"old": "serving today", "new": "to switch to"}[side]
    return typer.Option(None, f"--{side}", help=f"Base URL of the endpoint {what}{note}.", parser=URL)


def served_model(note: str = "") -> Any:
    """`--model`: the model name to request from an engine; default: the first id its /v1/models lists."""
    return typer.Option(None, "--model", help=f"Model name{note}; default: first id of /v1/models.")


def api_key_env(note: str = "") -> Any:
    """`--api-key-env`: the name of the environment variable holding the API key (never the key itself)."""
    return typer.Option(None, "--api-key-env", help=f"Environment variable holding the API key{note}.", parser=ENV_VAR)
