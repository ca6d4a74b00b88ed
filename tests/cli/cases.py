"""The fuzz table: for every command, a baseline that parses, the kind of each parameter, and the bad values of
each kind. Cases are generated from the live command tree, so a new verb or option is fuzzed (or the table test
fails) without anyone remembering to add it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer.main

from switchover import inputs
from switchover.cli import params
from switchover.cli.app import app
from tests.cli.workspace import BAD_FILES, CLOSED, SECRET, Workspace

Pairs = list[tuple[str, str | None]]  # ("--opt", value) or ("@arg", value); a flag has value None


@dataclass
class Spec:
    """How to fuzz one command: its baseline, parameter kinds that names alone do not tell, and exclusions."""

    baseline: Callable[[Workspace], Pairs]
    kinds: dict[str, str] = field(default_factory=dict)
    drop_with: dict[str, tuple[str, ...]] = field(default_factory=dict)  # param -> baseline params it replaces


MODEL = {"--model": "model"}
STARTLOG = str(Path(__file__).parents[1] / "startlog" / "fixtures" / "vllm-cpu-testbed.log")  # a real start-up log
SPECS: dict[str, Spec] = {
    "plan card": Spec(lambda w: [("--model", w.path("model"))], MODEL),
    "plan capacity": Spec(lambda w: [("--model", w.path("model")), ("--gpu", "H100-80G")], MODEL),
    "plan parallel": Spec(
        lambda w: [("--model", w.path("model")), ("--gpu", "H100-80G"), ("--gpus", "4")],
        MODEL | {"--fingerprint": "fingerprint"},
    ),
    "plan canary": Spec(
        lambda w: [("--model", w.path("model")), ("--gpu", "H100-80G")], MODEL | {"--new-model": "model"}
    ),
    "plan translate": Spec(
        lambda w: [("@launch", "vllm serve m --max-model-len 8192"), ("--from", "vllm"), ("--to", "sglang")],
        MODEL | {"@launch": "launch"},
    ),
    "plan choose": Spec(
        lambda w: [("--model", w.path("model")), ("--gpu", "H100-80G")],
        MODEL | {"--fingerprint": "fingerprint", "--probe": "in_file"},
        {"--fingerprint": ("--gpu",)},
    ),
    "plan limits": Spec(lambda w: [("--bench", w.path("check-run")), ("--peak", "40")], {"--bench": "in_file"}),
    "plan grace": Spec(
        lambda w: [("--max-tokens", "2000"), ("--tpot-p99-ms", "35"), ("--scan", w.path("deploy"))],
        {"--bench": "in_file", "--scan": "scan"},
        {"--bench": ("--tpot-p99-ms",)},
    ),
    "hw fingerprint": Spec(lambda w: []),
    "hw gpus": Spec(lambda w: []),
    "hw diff": Spec(
        lambda w: [("@a", "catalog:H100-80G"), ("@b", "catalog:A100-80Gx8")],
        {"@a": "fingerprint", "@b": "fingerprint", "--model": "model", "--migration": "in_file"},
    ),
    "hw startlog": Spec(
        lambda w: [("@log", STARTLOG), ("--engine", "vllm")], {"@log": "text_file", "--against": "text_file"}
    ),
    "probe": Spec(
        lambda w: [("--old", CLOSED), ("--new", CLOSED), ("--budget-s", "1")],
        {"@url": "url"},
        {"@url": ("--old", "--new"), "--config": ("--old", "--new")},
    ),
    "verify": Spec(
        lambda w: [("--old", CLOSED), ("--new", CLOSED), ("--structured", "0"), ("--no-long-inputs", None)],
        {"--prompts": "in_file"},
        {"--config": ("--old", "--new")},
    ),
    "diff-model": Spec(
        lambda w: [("@old", w.path("hf")), ("@new", w.path("hf")), ("--no-weights", None)],
        {"@old": "model", "@new": "model", "--corpus": "text_file"},
    ),
    "cachekey": Spec(
        lambda w: [("@model", w.path("hf")), ("--model-id", "m"), ("--prompt", "Hello")],
        {"@model": "model", "--prompt-file": "text_file"},
        {"--prompt-file": ("--prompt",)},
    ),
    "ready": Spec(lambda w: [("@url", CLOSED), ("--max-ms", "200")]),
    "overload": Spec(lambda w: [("@url", CLOSED), ("--max-concurrency", "2"), ("--waves", "1"), ("--timeout-s", "1")]),
    "metrics-adapter": Spec(
        lambda w: [("--from", "sglang"), ("--to", "vllm"), ("--upstream", CLOSED), ("--once", None)],
        {"--listen": "host_port"},
    ),
    "drill": Spec(
        lambda w: [
            ("--stop-new", "true"),
            ("--start-old", "true"),
            ("--url", CLOSED),
            ("--timeout", "0.1"),
            ("--max-ms", "100"),
            ("--runs", str(w.root / "out" / "drill")),
        ],
        {"--stop-new": "command", "--start-old": "command", "--runs": "out_dir"},
    ),
    "doctor": Spec(lambda w: [("@symptom", "p99 up"), ("--limit", "1")]),
    "check": Spec(
        lambda w: [("@config", w.path("switchover.yaml")), ("--runs-dir", str(w.root / "out" / "check"))],
        {"--runs-dir": "out_dir"},
    ),
    "report": Spec(lambda w: [("@run_dir", w.path("check-run"))], {"@run_dir": "in_file"}),
    "demo": Spec(lambda w: [("--dir", str(w.root / "out" / "demo"))], {"--dir": "out_dir"}),
    "validate": Spec(lambda w: [("@file", w.path("switchover.yaml"))]),
    "schema": Spec(lambda w: [("@name", "probe")]),
    "bench": Spec(
        lambda w: [
            ("--url", CLOSED),
            ("--engine", "vllm"),
            ("--no-calibrate", None),
            ("--requests", "1"),
            ("--buckets", "16"),
            ("--concurrency", "1"),
            ("--output-tokens", "4"),
            ("--runs-dir", str(w.root / "out" / "bench")),
        ],
        {"--runs-dir": "out_dir", "--dataset": "in_file", "--tokenizer": "model"},
        {"--config": ("--url", "--engine"), "--old": ("--url",), "--new": ("--url",)},
    ),
    "bench calibrate": Spec(lambda w: [("--concurrency", "1"), ("--chunks", "1"), ("--duration", "0.1")]),
    "bench recompute": Spec(lambda w: [("@run_dir", w.path("check-run")), ("--as", "vllm")], {"@run_dir": "in_file"}),
    "bench report": Spec(lambda w: [("@run_dir", w.path("check-run"))], {"@run_dir": "in_file"}),
    "bench sweep": Spec(
        lambda w: [
            ("--launch", "true {bs}"),
            ("--param", "bs=1"),
            ("--url", CLOSED),
            ("--runs-dir", str(w.root / "out" / "sweep")),
        ],
        {"--launch": "command", "--runs-dir": "out_dir"},
    ),
    "gateway": Spec(lambda w: [("--config", w.path("switchover.yaml"))]),
    "gateway reset": Spec(lambda w: [("--config", w.path("switchover.yaml"))]),
    "gateway state": Spec(lambda w: [("--config", w.path("switchover.yaml"))]),
    "gateway hash-key": Spec(lambda w: [("@name", "team-a"), ("--generate", None)]),
    "rollout init": Spec(lambda w: [("--config", w.path("switchover.yaml"))]),
    "rollout status": Spec(lambda w: [("--config", w.path("switchover.yaml"))]),
    "rollout gates": Spec(lambda w: [("--config", w.path("switchover.yaml"))], {"--ledger": "ledger"}),
    "rollout advance": Spec(lambda w: [("--config", w.path("switchover.yaml"))], {"--ledger": "ledger"}),
    "rollout rollback": Spec(lambda w: [("--config", w.path("switchover.yaml")), ("--reason", "fuzz")]),
    "rollout abandon": Spec(lambda w: [("--config", w.path("switchover.yaml")), ("--reason", "fuzz")]),
    "rollout reset": Spec(lambda w: [("--config", w.path("switchover.yaml")), ("--reason", "fuzz")]),
    "rollout watch": Spec(
        lambda w: [("--config", w.path("switchover.yaml")), ("--max-checks", "1"), ("--interval", "0.01")],
        {"--ledger": "ledger"},
    ),
    "rollout compare": Spec(lambda w: [("--config", w.path("switchover.yaml"))], {"--ledger": "ledger"}),
    "rollout holding": Spec(lambda w: [("--config", w.path("switchover.yaml"))]),
    "rollout prerequisites": Spec(lambda w: [("--config", w.path("switchover.yaml"))]),
    "export argo": Spec(
        lambda w: [("--config", w.path("switchover.yaml")), ("--out", str(w.root / "out" / "a.yaml"))],
        {"--out": "out_file", "--prometheus": "url"},
    ),
    "export envoy": Spec(
        lambda w: [("--config", w.path("switchover.yaml")), ("--out", str(w.root / "out" / "e.yaml"))],
        {"--out": "out_file"},
    ),
    "export grafana": Spec(
        lambda w: [("--config", w.path("switchover.yaml")), ("--out", str(w.root / "out" / "g.json"))],
        {"--out": "out_file"},
    ),
    "alerts translate": Spec(
        lambda w: [
            ("@rules", w.path("rules.yaml")),
            ("--from", "vllm"),
            ("--to", "sglang"),
            ("--output", str(w.root / "out" / "rules.yaml")),
        ],
        {"@rules": "in_file", "--bench": "in_file", "--output": "out_file"},
    ),
    "review serve": Spec(
        lambda w: [("--config", w.path("switchover.yaml")), ("--seconds", "0.01"), ("--port", "0")], {"--db": "store"}
    ),
    "review summary": Spec(lambda w: [("--config", w.path("switchover.yaml"))], {"--db": "store"}),
    "review export": Spec(
        lambda w: [("--config", w.path("switchover.yaml")), ("--out", str(w.root / "out" / "r.jsonl"))],
        {"--db": "store", "--out": "out_file"},
    ),
    "review gate": Spec(lambda w: [("--config", w.path("switchover.yaml"))], {"--db": "store"}),
    "testbed setup": Spec(lambda w: [("--dir", str(w.root / "out" / "tb"))], {"--dir": "out_dir"}),
    "testbed up": Spec(lambda w: [("--dir", str(w.root / "out" / "tb")), ("--timeout", "1")], {"--dir": "out_dir"}),
    "testbed status": Spec(lambda w: [("--dir", str(w.root / "out" / "tb"))], {"--dir": "bed_dir"}),
    "testbed down": Spec(lambda w: [("--dir", str(w.root / "out" / "tb"))], {"--dir": "bed_dir"}),
}

# parameter names whose kind the name tells (per command, SPECS' kinds win)
_BY_NAME = {
    "--config": "in_file",
    "--url": "url",
    "--old": "url",
    "--new": "url",
    "--upstream": "url",
    "@url": "url",
    "--out": "out_file",
    "--runs-dir": "out_dir",
    "--dir": "out_dir",
    "@file": "in_file",
    "@config": "in_file",
    "--api-key-env": "env_var",
    "--ledger": "ledger",
    "--engine": "engine",
    "--old-engine": "engine",
    "--new-engine": "engine",
    "--engine-version": "release",
    "--from-version": "release",
    "--to-version": "release",
}
# options naming an engine whose names do not say so (per command)
_ENGINE_OPTIONS = {
    "metrics-adapter": ("--from", "--to"),
    "alerts translate": ("--from", "--to"),
    "plan translate": ("--from", "--to"),
    "plan choose": ("--from",),
    "bench recompute": ("--as",),
}

TEXT = [
    "",
    " ",
    "[gpu]",
    "x" * 3000,
    "é漢字🙂",
    "-",
    f"sk-{SECRET}0123456789",
    f"curl -u admin:{SECRET}1 x",
    "../../../etc/passwd",
]
NUMBERS = ["nan", "inf", "-inf", "1e308", "-1", "0", "-5", "abc", "", "1.5", "99999999999999999999", "0x10", "1e-12"]
MALFORMED_URLS = [
    "",
    "http://",
    "http://127.0.0.1:99999",
    "http://127.0.0.1:0",
    "localhost:8000",
    "ftp://127.0.0.1/",
    "http://[::1",
    "http://a b/",
    f"http://admin:{SECRET}2@127.0.0.1:1",
    "http://127.0.0.1:1/?q=1",
]
IN_FILE_CLASSES = [*BAD_FILES, "missing", "proc", "zero"]
MODEL_CLASSES = ["missing", "empty", "binary", "gguf_4", "gguf_200", "gguf_kv", "dir", "proc", "json_list", "zero"]
HOST_PORTS = ["127.0.0.1:99999", "127.0.0.1:0", "nohost", ":80", "127.0.0.1:", "a b:80", ""]
ENV_VARS = ["", "sk-" + SECRET + "abcdefghijklmnop", "1BAD", "A-B", "x" * 300]
# an engine, optionally at a release: unknown engines, malformed or foreign-form releases
ENGINE_REFS = [
    "",
    "NOPE",
    "nope@0.6.3",
    "@0.6.3",
    "vllm@",
    "vllm==",
    "vllm@latest",
    "vllm@0.6.3@1",
    "vllm@0.6.3 x",
    "vllm@" + "9" * 300,
    "vllm@b3135",
    "llamacpp@0.6.3",
    "é漢字",
]
RELEASES = ["latest", "0.6.3@1", "x" * 300, "-1", "v", "1.2.3 4", "1." + "0" * 80, "é1"]


@dataclass
class Case:
    """One invocation and what it must do; `must_refuse`: exit 2 (and, for a value an option's parser refuses, an
    error line naming the option or the value: `names`)."""

    command: str
    param: str
    label: str
    argv: list[str]
    must_refuse: bool = False
    names: tuple[str, ...] = ()
    allowed: frozenset[int] = frozenset({0, 1, 2, 3})


def commands() -> dict[str, Any]:
    """Every leaf command (and group with its own options) of the live CLI, by space-joined path."""
    out: dict[str, Any] = {}

    def walk(cmd: Any, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs is None or (cmd.callback is not None and path and any(p.name != "help" for p in cmd.params)):
            out[" ".join(path)] = cmd
        for name, sub in (subs or {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    out.pop("", None)
    return out


def param_key(p: Any) -> str:
    return p.opts[0] if p.opts and p.opts[0].startswith("-") else "@" + p.name


def parser_of(cmd: Any, p: Any) -> Any:
    """The `parser=` of a parameter (from the command function's signature), or None."""
    sig = inspect.signature(cmd.callback)
    info = sig.parameters.get(p.name)
    return getattr(info.default, "parser", None) if info is not None else None


def annotation_of(cmd: Any, p: Any) -> Any:
    info = inspect.signature(cmd.callback).parameters.get(p.name)
    return info.annotation if info is not None else None


def is_flag(cmd: Any, p: Any) -> bool:
    return bool(getattr(p, "is_flag", False)) or annotation_of(cmd, p) in (bool, "bool")


def kind_of(name: str, cmd: Any, p: Any) -> str:
    key = param_key(p)
    spec = SPECS[name]
    if key in spec.kinds:
        return spec.kinds[key]
    parser = parser_of(cmd, p)
    if isinstance(parser, params.Number):
        return "number"
    if isinstance(parser, params.BaseUrl):
        return "url"
    if isinstance(parser, params.HostPort):
        return "host_port"
    ann = str(annotation_of(cmd, p))
    if key in _ENGINE_OPTIONS.get(name, ()):
        return "engine"
    if key in _BY_NAME:
        return _BY_NAME[key]
    if "int" in ann or "float" in ann:
        return "number"
    return "text"


def _argv(name: str, pairs: Pairs) -> list[str]:
    opts: list[str] = []
    args: list[str] = []
    for key, value in pairs:
        if value is None:
            opts.append(key)
        elif key.startswith("@"):
            args.append(value)
        else:
            opts.extend([key, value])
    return [*name.split(), *opts, *(["--"] if any(a.startswith("-") for a in args) else []), *args]


def _values(kind: str, ws: Workspace, parser: Any) -> Iterator[tuple[str, str, bool, frozenset[int]]]:
    """(label, value, must be refused, allowed exit codes) for one parameter kind."""
    any_code = frozenset({0, 1, 2, 3})
    if kind == "number":
        for v in NUMBERS:
            bad = True
            if isinstance(parser, params.Number):
                try:
                    parser(v)
                    bad = False
                except Exception:
                    bad = True
            yield f"number {v!r}", v, bad and isinstance(parser, params.Number), any_code
    elif kind == "url":
        for v in MALFORMED_URLS:
            yield f"url {v!r}", v, True, any_code
        yield "url closed port", CLOSED, False, any_code
        for label in ("not_http", "html"):
            yield f"url {label}", ws.urls[label], False, any_code
    elif kind == "host_port":
        for v in HOST_PORTS:
            yield f"host:port {v!r}", v, True, any_code
    elif kind == "env_var":
        for v in ENV_VARS:
            yield f"env var {v[:20]!r}", v, True, any_code
    elif kind in ("in_file", "fingerprint", "scan", "text_file", "ledger", "store"):
        # a deploy scan reads whatever YAML it finds (a file with no settings is an honest "nothing found"), any
        # text is a prompt or a corpus, a ledger reader skips and counts lines it cannot read, and an empty file is
        # an empty SQLite database
        allowed = any_code if kind in ("scan", "text_file", "ledger", "store") else frozenset({1, 2, 3})
        for cls in IN_FILE_CLASSES:
            yield f"file {cls}", ws.bad(cls), kind in ("in_file", "fingerprint"), allowed
        if kind == "fingerprint":
            for v in ("catalog:H100-80Gx0", "catalog:H100-80Gx-1", "catalog:NOPE", "catalog:", "catalog:H100-80Gx1e9"):
                yield f"fingerprint {v!r}", v, True, any_code
    elif kind == "model":
        for cls in MODEL_CLASSES:
            yield f"model {cls}", ws.bad(cls), True, any_code
        for d in ("bad-model", "weird-model"):
            yield f"model {d}", ws.path(d), True, any_code
    elif kind == "out_file":
        for label, v in (
            ("dir", ws.bad("dir")),
            ("proc", "/proc/version"),
            ("proc-sub", "/proc/nope/x.yaml"),
            ("under-a-file", ws.bad("empty") + "/sub/x"),
            ("empty", ""),
        ):
            yield f"out {label}", v, True, any_code
    elif kind in ("out_dir", "bed_dir"):
        for label, v in (
            ("proc", "/proc/version"),
            ("proc-sub", "/proc/nope/x"),
            ("a-file", ws.bad("empty")),
            ("under-a-file", ws.bad("empty") + "/sub"),
            ("empty", ""),
            ("too-long", "x" * 300),
        ):
            # a test bed folder that does not exist is an honest "not running" for status and down
            yield f"out dir {label}", v, not (kind == "bed_dir" and label == "proc-sub"), any_code
    elif kind == "engine":
        for v in ENGINE_REFS:
            yield f"engine {v[:24]!r}", v, True, any_code
    elif kind == "release":
        for v in RELEASES:
            yield f"release {v[:24]!r}", v, True, any_code
    else:  # text, command, launch
        for v in TEXT:
            yield f"text {v[:24]!r}", v, False, any_code


def generate(ws: Workspace, name: str, cmd: Any) -> list[Case]:
    """Every case for one command: each parameter replaced by each bad value of its kind, plus argv shapes."""
    spec = SPECS[name]
    base = spec.baseline(ws)
    cases = [
        Case(name, "(baseline)", "baseline", _argv(name, base)),
        Case(
            name,
            "(argv)",
            "unknown option",
            _argv(name, [*base, ("--no-such-option-x", "1")]),
            must_refuse=True,
            names=("--no-such-option-x",),
        ),
    ]
    for p in cmd.params:
        key = param_key(p)
        if p.name == "help" or is_flag(cmd, p):
            continue
        kind = kind_of(name, cmd, p)
        parser = parser_of(cmd, p)
        dropped = {key, *spec.drop_with.get(key, ())}
        rest = [(k, v) for k, v in base if k not in dropped]
        for label, value, refuse, allowed in _values(kind, ws, parser):
            names = (
                tuple(o for o in (p.opts or [p.name]) if o)
                + (p.name.upper(), p.name)
                + ((value[:40],) if len(value.strip()) > 2 else ())
                if kind == "number"
                else ()
            )
            cases.append(
                Case(
                    name,
                    key,
                    label,
                    _argv(name, [*rest, (key, value)]),
                    must_refuse=refuse,
                    names=names,
                    allowed=allowed,
                )
            )
        if key.startswith("--"):
            cases.append(Case(name, key, "missing value", [*_argv(name, rest), key], must_refuse=True, names=(key,)))
    return cases


def numeric_options_without_parser(owned: set[str]) -> list[str]:
    """int/float options of the commands in `owned` that are not validated by a params.Number parser."""
    bad = []
    for name, cmd in commands().items():
        if name not in owned:
            continue
        for p in cmd.params:
            ann = str(annotation_of(cmd, p))
            if ("int" in ann or "float" in ann) and not isinstance(parser_of(cmd, p), params.Number):
                bad.append(f"{name} {param_key(p)}")
    return bad


__all__ = ["SPECS", "Case", "commands", "generate", "inputs", "numeric_options_without_parser"]
