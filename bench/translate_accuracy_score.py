"""The accuracy bench's reading and checking (bench/translate_accuracy.py runs them): a launch read as its engine
would read it (argv, env vars, config-file keys, tokenized here rather than trusted from the translator), and each
check of a translation or an alert-rule translation against the set's annotations and expectations."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from switchover.alerts.promql import PromQLError, parse

ENGINES = ("vllm", "sglang", "tgi", "llamacpp", "trtllm")
COUNTERS = ("false_unknowns", "wrong_mappings", "silent_drops", "dead_series", "failed_runs")
# words that start an engine's server: everything up to and including them is the command, not arguments
ENGINE_COMMANDS = [
    (r"python[0-9.]*", "-m", r"vllm\.entrypoints\.openai\.api_server"),
    (r"vllm", "serve"),
    (r"python[0-9.]*", "-m", r"sglang\.launch_server"),
    (r"sglang", "serve"),
    (r"(.*/)?text-generation-launcher",),
    (r"(.*[/\\])?llama-server(\.exe)?",),
    (r"trtllm-serve", "serve"),
    (r"trtllm-serve",),
]
DOCKER_VALUE_OPTIONS = {
    "-e",
    "--env",
    "--env-file",
    "-p",
    "--publish",
    "-v",
    "--volume",
    "--name",
    "--gpus",
    "--shm-size",
    "--ipc",
    "--runtime",
    "--mount",
    "--log-opt",
    "--network",
    "--entrypoint",
    "-w",
    "--workdir",
    "--device",
    "--group-add",
    "--security-opt",
    "--cap-add",
    "-u",
    "--user",
    "--restart",
    "--ulimit",
    "--platform",
    "-h",
    "--hostname",
    "--net",
    "--network-alias",
    "--pid",
    "--cpus",
    "--cpuset-cpus",
    "-m",
    "--memory",
    "--memory-swap",
    "-l",
    "--label",
    "--add-host",
    "--dns",
    "--tmpfs",
    "--sysctl",
    "--pull",
    "--log-driver",
    "--label-file",
}
CONFIG_FLAGS = {"--extra_llm_api_options", "--extra-llm-api-options", "--config"}
ENV_ALWAYS_COUNTED = {"CUDA_VISIBLE_DEVICES"}


@dataclass(frozen=True)
class Input:
    """One input of a launch as the engine reads it."""

    typed: str  # '--max_model_len', 'QUANTIZE', 'speculative_config'
    value: str | None
    via: str  # argv | env | config


@dataclass
class Failure:
    counter: str
    launch: str
    target: str
    what: str
    expected: str
    got: str


def _statements(text: str) -> list[list[str]]:
    """Shell words per statement: line continuations joined; statements split on newlines, ;, &&, || and pipes
    (the launches are given without redirections: those are not the engine's input)."""
    lexer = shlex.shlex(text.replace("\\\n", " "), posix=True, punctuation_chars=";&|\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    out: list[list[str]] = [[]]
    for word in lexer:
        if set(word) <= set(";&|\n"):
            out.append([])
        else:
            out[-1].append(word)
    return [s for s in out if s]


def _env_pair(text: str) -> tuple[str, str | None] | None:
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?", text, re.S)
    return (m.group(1), m.group(2)) if m else None


def _engine_args(words: list[str], env: dict[str, str | None], files: dict[str, str]) -> list[str] | None:
    """The engine's own arguments from one statement (None when the statement starts no engine)."""
    while words and words[0] in ("sudo", "nohup", "exec", "env"):
        words = words[1:]
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0], re.S):
        name, _, env[name] = words[0].partition("=")
        words = words[1:]
    if words[:2] in (["docker", "run"], ["podman", "run"]):
        i, value = 2, None
        while i < len(words) and words[i].startswith("-"):
            opt, eq, inline = words[i].partition("=")
            value, i = (
                (inline, i + 1)
                if eq
                else ((words[i + 1], i + 2) if opt in DOCKER_VALUE_OPTIONS and i + 1 < len(words) else (None, i + 1))
            )
            if opt in ("-e", "--env") and value and (pair := _env_pair(value)):
                env[pair[0]] = pair[1]
            elif opt == "--env-file" and value in files:
                env.update(p for line in files[value].splitlines() if (p := _env_pair(line.strip())))
        words = words[i + 1 :]  # after the image: its entrypoint's arguments, or a command
    after = _after_command(words)
    return after if after is not None else words if words and words[0].startswith("-") else None


def _after_command(words: list[str]) -> list[str] | None:
    """The words after an engine's server command (ENGINE_COMMANDS), None when they start with none."""
    return next(
        (
            words[len(c) :]
            for c in ENGINE_COMMANDS
            if len(words) >= len(c) and all(re.fullmatch(p, w) for p, w in zip(c, words, strict=False))
        ),
        None,
    )


def _is_option(word: str) -> bool:
    return word.startswith("-") and len(word) > 1 and not re.fullmatch(r"-\d[\d.e+-]*", word)


def _config_keys(value: str | None, files: dict[str, str]) -> list[str]:
    """Top-level keys of a config given to --extra_llm_api_options/--config: inline JSON/YAML or a posted file."""
    if value is None:
        return []
    text = files.get(value) if not value.lstrip().startswith("{") else value
    data = yaml.safe_load(text) if text else None
    return list(data) if isinstance(data, dict) else []


def launch_inputs(command: str, files: dict[str, str] | None = None) -> list[Input]:
    """Every input of a launch: argv flags (value = the next word unless it is an option), env vars from prefixes,
    export lines and docker -e/--env-file, and the top-level keys of config files; a YAML args/command list (a
    Kubernetes container or compose service) is read as the argv it is."""
    files = files or {}
    env: dict[str, str | None] = {}
    args: list[str] = []
    doc = None
    with contextlib.suppress(yaml.YAMLError):
        doc = yaml.safe_load(command)
    if isinstance(doc, list) or (isinstance(doc, dict) and ("args" in doc or "command" in doc)):
        words = [
            str(w) for w in (doc if isinstance(doc, list) else (doc.get("command") or []) + (doc.get("args") or []))
        ]
        raw_env = doc.get("environment") or doc.get("env") or [] if isinstance(doc, dict) else []
        for item in raw_env.items() if isinstance(raw_env, dict) else raw_env:
            pair = (
                (item[0], str(item[1]))
                if isinstance(item, tuple)
                else ((item.get("name"), item.get("value")) if isinstance(item, dict) else _env_pair(str(item)))
            )
            if pair and pair[0]:
                env[str(pair[0])] = pair[1]
        args = _engine_args(words, env, files) or []
    else:
        for statement in _statements(command):
            if statement[0] == "export":
                env.update(p for w in statement[1:] if (p := _env_pair(w)))
            elif (found := _engine_args(statement, env, files)) is not None:
                args = found
    out = [Input(name, value, "env") for name, value in env.items()]
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not _is_option(word):
            continue
        name, eq, inline = word.partition("=")
        value = inline if eq else (args[i] if i < len(args) and not _is_option(args[i]) else None)
        out.append(Input(name, value, "argv"))
        if name in CONFIG_FLAGS:
            out += [Input(k, None, "config") for k in _config_keys(value, files)]
    return out


def launch_text(launch: dict[str, Any]) -> str:
    return str(launch.get("command") or launch["posted"])


def counted(item: dict[str, Any]) -> bool:
    """Inputs whose loss is a silent drop: argv flags, config keys, CUDA_VISIBLE_DEVICES and env vars the engine
    reads as launcher arguments (TGI's QUANTIZE, ...)."""
    return item.get("via", "argv") != "env" or item["typed"] in ENV_ALWAYS_COUNTED or item.get("engine_arg", False)


def parse_argv(argv: list[str]) -> list[tuple[str, list[str]]]:
    """(option, values) pairs of a rendered command line, in order; words before the first option are the command
    and its positional arguments."""
    out: list[tuple[str, list[str]]] = []
    for word in _after_command(argv) or argv:
        if _is_option(word):
            name, eq, inline = word.partition("=")
            out.append((name, [inline] if eq else []))
        elif out:
            out[-1][1].append(word)
    return out


def same_value(expected: Any, got: str | None) -> bool:
    """A rendered value against an expected one: numbers by value, JSON objects as supersets, booleans by meaning,
    a list as alternatives (spellings the target reads the same, e.g. vLLM's half and float16)."""
    if isinstance(expected, list):
        return any(same_value(e, got) for e in expected)
    if got is None:
        return expected is True
    if isinstance(expected, dict):
        try:
            doc = json.loads(got)
        except ValueError:
            return False
        return isinstance(doc, dict) and all(
            same_value(v, json.dumps(doc.get(k)) if isinstance(doc.get(k), dict) else str(doc.get(k)))
            for k, v in expected.items()
        )
    if isinstance(expected, bool):
        return got.lower() in (("true", "1", "yes", "on") if expected else ("false", "0", "no", "off"))
    try:
        return float(expected) == float(got)
    except (TypeError, ValueError):
        return str(expected) == got


def _matches(record: dict[str, Any], item: dict[str, Any]) -> bool:
    got = record.get("input") or {}
    return got.get("via", "argv") == item.get("via", "argv") and item["typed"] in (got.get("typed"), got.get("option"))


def check_inputs(launch: dict[str, Any], target: str, out: dict[str, Any]) -> list[Failure]:
    """False unknowns, invalid inputs reported ok, and silent drops: every annotated input against the output."""
    fails: list[Failure] = []
    records = out.get("flags") or []
    for item in launch["inputs"]:
        found = [r for r in records if _matches(r, item)]
        what = f"{item['typed']} ({item.get('via', 'argv')})"
        if not found:
            if counted(item):
                fails.append(
                    Failure("silent_drops", launch["id"], target, what, "in one list of the output", "in none")
                )
            continue
        validity = (found[0].get("input") or {}).get("validity")
        valid = item.get("exists") == "present" and item.get("value_ok", True) is not False
        if valid and validity in ("refused", "unknown"):
            fails.append(
                Failure(
                    "false_unknowns",
                    launch["id"],
                    target,
                    what,
                    f"ok ({item.get('defined_at')})",
                    f"{validity}: {(found[0].get('input') or {}).get('validity_detail')}",
                )
            )
        elif not valid and item.get("exists") in ("present", "absent") and validity == "ok":
            fails.append(
                Failure(
                    "wrong_mappings",
                    launch["id"],
                    target,
                    what,
                    f"refused at {launch['engine']} {launch['version']}: {item.get('note', '')}",
                    "ok",
                )
            )
    return fails


def check_rendered(launch_id: str, target: str, out: dict[str, Any], view: Any) -> list[Failure]:
    """Every option the translation renders exists at the target version, takes a value iff it should (bare only
    where its value is optional), and its value is one of its choices (per the target's release data; not checked
    without it)."""
    if view is None:
        return []
    fails = []
    for option, values in parse_argv(list(out.get("argv") or [])):
        found = view.option(option)
        if found.status == "absent":
            fails.append(
                Failure("wrong_mappings", launch_id, target, option, "an option of the target version", found.reason)
            )
        if found.status != "present" or found.span is None:
            continue
        span = found.span
        if not span.takes_value and values:
            fails.append(Failure("wrong_mappings", launch_id, target, option, "a switch, no value", " ".join(values)))
        elif span.takes_value and not values and not getattr(span, "value_optional", False):
            fails.append(
                Failure(
                    "wrong_mappings", launch_id, target, option, "a value (the option takes one)", "none: rendered bare"
                )
            )
        elif span.takes_value and span.choices and not span.choices_open and values and values[0] not in span.choices:
            fails.append(
                Failure(
                    "wrong_mappings",
                    launch_id,
                    target,
                    f"{option} {values[0]}",
                    f"one of {', '.join(span.choices[:12])}",
                    values[0],
                )
            )
    return fails


def _yaml_at(doc: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def _as_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value) if isinstance(value, dict | list) else str(value)


def _option_rule(want: dict[str, Any], out: dict[str, Any]) -> tuple[str, str] | None:
    names = [want["option"], *want.get("aliases", [])]
    found = [values for option, values in parse_argv(list(out.get("argv") or [])) if option in names]
    if "value_contains" in want:
        met = any(want["value_contains"] in " ".join(v) for v in found)
    else:
        # every occurrence: a repeated option with another value is refused (clap) or silently overrides (argparse)
        met = bool(found) and all(same_value(want["value"], v[0] if v else None) for v in found)
    env = out.get("env") or {}
    if not met and want.get("env_alt") in env:
        met = same_value(want.get("value"), env[want["env_alt"]])
    shown = want.get("value_contains", want.get("value"))
    return (
        None
        if met
        else (f"{names[0]} {shown}", " | ".join(f"{names[0]} {' '.join(v)}".strip() for v in found) or "not rendered")
    )


def _rule_unmet(want: dict[str, Any], out: dict[str, Any], inputs: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(expected, got) when the output breaks a rule of expected.yaml, None when it keeps it."""
    env, value = out.get("env") or {}, want.get("value")
    if "option" in want:
        return _option_rule(want, out)
    if "positional" in want:
        argv = [str(w) for w in out.get("argv") or []]
        return None if str(value) in argv else (f"{value} as a positional word", " ".join(argv))
    if "env" in want:
        met = want["env"] in env and same_value(value, env[want["env"]])
        return None if met else (f"env {want['env']}={value}", f"{want['env']}={env.get(want['env'])}")
    if "yaml" in want:
        got = _yaml_at(out.get("yaml_config") or {}, want["yaml"])
        met = got is not None and same_value(value, _as_text(got))
        return None if met else (f"{want['yaml']}: {value}", f"{want['yaml']}: {got}")
    if "lost" in want:
        outcomes = [str(r.get("outcome")) for r in out.get("flags") or [] if any(_matches(r, i) for i in inputs)]
        noop = "noop" in want and same_value(want["noop"], _as_text(value))  # a value needing no equivalent
        return (
            None
            if set(outcomes) <= ({"lost", "default_matches"} if noop else {"lost"})
            else (f"lost ({want['lost']})", ", ".join(outcomes))
        )
    if "steps" in want:
        steps = [str(s) for s in out.get("steps") or []]
        met = any(want["steps"].lower() in s.lower() for s in steps)
        return None if met else (f"a step about {want['steps']} ({want.get('why', '')})", "; ".join(steps) or "none")
    return None


def check_expectation(
    launch: dict[str, Any], target: str, intent: str, want: dict[str, Any], out: dict[str, Any]
) -> Failure | None:
    """One expectation of expected.yaml against the output (None when met)."""
    inputs = [i for i in launch["inputs"] if i.get("intent") == intent]
    fail = _rule_unmet(want, out, inputs)
    rendered = parse_argv(list(out.get("argv") or []))
    for bad in want.get("must_not_appear", []):
        option, _, value = bad.partition(" ")
        if any(o == option and (not value or (v and v[0] == value)) for o, v in rendered):
            fail = f"no {bad} ({want.get('why', '')})", bad
    return None if fail is None else Failure("wrong_mappings", launch["id"], target, intent, *fail)


def expectations(expected: dict[str, Any], launch: dict[str, Any], target: str) -> dict[str, dict[str, Any]]:
    """intent -> what the translation of `launch` to `target` must do: the intent's generic rule for the target with
    the launch's value, or the launch's own rule for that target."""
    out = {}
    for intent, value in (expected["launches"].get(launch["id"]) or {}).items():
        own = value.get(target) if isinstance(value, dict) else None
        generic = (expected["options"].get(intent) or {}).get(target)
        if own == "skip":
            continue
        if isinstance(own, dict):
            out[intent] = own
        elif generic is not None:
            base = value.get("value") if isinstance(value, dict) else value
            out[intent] = {"value": base if own is None else own, **generic}
    return out


def rule_file_era(path: Path) -> tuple[str, str | None]:
    """The engine and version a rule file was written for: its header's `engine:`/`version:` lines."""
    head = "\n".join(line for line in path.read_text().splitlines()[:40] if line.startswith("#"))
    engine = re.search(r"\bengine:\s*([A-Za-z.]+)", head)
    version = re.search(r"\bversion:\s*v?([0-9A-Za-z.\-+]+)", head)
    name = engine.group(1).lower().replace(".", "") if engine else path.name.split("-")[0].split("_")[0]
    if name not in ENGINES:
        raise SystemExit(f"{path.name}: header names no engine of {', '.join(ENGINES)} (an `# engine:` line)")
    return name, version.group(1) if version else None


def dead_series(
    path: Path, target: str, target_version: str | None, report: dict[str, Any], view: Any
) -> list[Failure]:
    """Rules the report marks translated/unchanged that read a series the target does not serve at its version
    (series named by the file's own recording rules are not engine series)."""
    recorded = {
        str(r.get("record"))
        for g in (yaml.safe_load(path.read_text()) or {}).get("groups", [])
        for r in g.get("rules", [])
        if isinstance(r, dict) and r.get("record")
    }
    fails = []
    for rule in report.get("rules") or []:
        if rule.get("status") not in ("translated", "unchanged") or view is None:
            continue
        try:
            names = {s.name for s in parse(str(rule["expr_after"])).selectors if s.name}
        except PromQLError as exc:
            fails.append(Failure("dead_series", path.name, target, str(rule.get("rule")), "valid PromQL", str(exc)))
            continue
        for name in sorted(n for n in names - recorded if re.match(r"(vllm:|sglang:|tgi_|llamacpp:|trtllm_)", n)):
            served, why = series_served(view, name)
            if not served:
                fails.append(
                    Failure(
                        "dead_series",
                        path.name,
                        f"{target}@{target_version or 'newest'}",
                        f"{rule.get('group')}/{rule.get('rule')}: {name}",
                        f"a series {target} serves",
                        f"{rule['status']} ({why})",
                    )
                )
    return fails


def series_served(view: Any, name: str) -> tuple[bool, str]:
    """A scraped name against the release data: the name itself, else a histogram's `_bucket` or a histogram's or
    summary's `_sum`/`_count` (TGI's `tgi_request_count` is a counter of its own)."""
    first = view.metric(name)
    if first.status == "present":
        return True, first.reason
    part = re.search(r"_(bucket|sum|count)$", name)
    base = view.metric(name[: part.start()]) if part else first
    kinds = {"histogram", "unknown"} | ({"summary"} if part and part.group(1) != "bucket" else set())
    return bool(part) and base.status == "present" and getattr(base.span, "type", None) in kinds, first.reason
