"""Launch commands (a shell line or script, `docker run`, a Kubernetes container, or a YAML of settings) read the
way the engine's own parser reads them, at the engine's version: one record per input flag (what was typed, the
option it selects, whether that version accepts it, its intent), and the intents with their values. Spellings and
meanings come from the engine profiles (switchover.engines), what a version accepts from its release data."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from switchover.engines import EngineProfile, list_profiles, load_profile
from switchover.engines import releases as release_data
from switchover.engines.profile import profile_key
from switchover.engines.releases import EnvSpan, ReleaseView
from switchover.errors import BadInput
from switchover.plan import launch_config as cfg
from switchover.plan.launch_argv import (
    EnvSetting,
    RawLaunch,
    env_file,
    image_parts,
    parse_manifest,
    parse_script,
    program_name,
)
from switchover.plan.launch_records import (
    CONFIG_FILE,
    DEVICES,
    ENV_FILE,
    MODEL,
    InputFlag,
    LaunchIntent,
    Opt,
    Reader,
    Via,
    apply,
    json_parts,
    record,
    spellings,
)
from switchover.plan.launch_settings import apply_deferred, mapping, read_config
from switchover.plan.launch_values import RANGES, TRUE_FALSE, is_option

_PYTHON = ("python", "python3")
__all__ = [
    "CONFIG_FILE",
    "DEVICES",
    "ENV_FILE",
    "MODEL",
    "RANGES",
    "InputFlag",
    "LaunchIntent",
    "Via",
    "detect_engine",
    "parse_launch",
    "resolve_engine",
]


@cache
def _commands() -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """(engine, command words, model argument) for every profile's launch spellings, longest first."""
    out = [
        (name, tuple(command.split()), model_arg)
        for name in list_profiles()
        for command, model_arg in load_profile(name).launch.commands()
    ]
    return tuple(sorted(out, key=lambda c: -len(c[1])))


def _matches(words: list[str], command: tuple[str, ...]) -> bool:
    if len(words) < len(command):
        return False
    for typed, want in zip(words, command, strict=False):
        base = program_name(typed)
        if want in _PYTHON and base.startswith("python"):
            continue
        if typed != want and base != want:
            return False
    return True


def command_of(words: list[str]) -> tuple[str, int, str] | None:
    """(engine, number of command words, model argument) when `words` start an engine's server."""
    for engine, command, model_arg in _commands():
        if _matches(words, command):
            return engine, len(command), model_arg
    return None


def _is_launch(words: list[str]) -> bool:
    return command_of(words) is not None or is_option(words[0])


def _image_engine(image: str) -> tuple[str, str | None, str] | None:
    """(engine, version from the tag, what follows the image) for an image a profile names."""
    repo, tag = image_parts(image)
    for name in list_profiles():
        for spec in load_profile(name).launch.images:
            if repo == spec.repository or repo.endswith("/" + spec.repository):
                if spec.tag_pattern and not re.match(spec.tag_pattern, tag or ""):
                    continue
                m = re.match(spec.version_tag, tag) if spec.version_tag and tag else None
                return name, (m.group(1) if m else None), spec.args
    return None


def _raw(text: str, files: dict[str, str]) -> RawLaunch | dict[str, Any]:
    """The launch words and environment, or a mapping of settings (a pasted config YAML)."""
    first = next((ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")
    if re.match(r"^\s*(-\s|[\w.\-\"']+\s*:(\s|$))", first):
        data = cfg.read_yaml_mapping(text, "launch (YAML)")
        if data is not None:
            found = parse_manifest(data, _is_launch)
            if found is not None:
                return found
            if isinstance(data, dict):
                return data
    found = parse_script(text, _is_launch)
    if found is None:
        raise BadInput(
            "no engine launch found in the text",
            hint="give a command such as `vllm serve MODEL ...`, "
            "a `docker run` line, a Kubernetes container with args, or a YAML of settings",
        )
    return found


def detect_engine(text: str) -> tuple[str, str | None] | None:
    """The engine (and version, from an image tag) a launch runs, when its command or image says so."""
    raw = _raw(text, {})
    if isinstance(raw, dict):
        return None
    if raw.image and (hit := _image_engine(raw.image)):
        return hit[0], hit[1]
    found = command_of(raw.words) if raw.words else None
    return (found[0], None) if found else None


def _walk(r: Reader, words: list[str], model_flags: set[str], positional: bool) -> None:
    """The command line's words, option by option, as the engine's parser consumes them."""
    i = 0
    while i < len(words):
        token = words[i]
        if token == "--" or not is_option(token):
            i += 1
            if token == "--":
                continue
            if positional and r.out.model is None:
                r.out.model = token
                continue
            opt = Opt(
                typed=token,
                validity="refused" if r.view else "unknown",
                detail=f"an argument no option of {r.label} takes (the parser refuses a stray word)"
                if r.view
                else r.unchecked(),
            )
            record(r, opt, None, "argv")
            continue
        opt = r.option(token)  # the whole word first: the release's parser may read a value joined to it (-O3)
        if opt.attached is not None:
            name, eq, inline = token[: len(token) - len(opt.attached)].removesuffix("="), "=", opt.attached
            opt.typed = name
        else:
            name, eq, inline = _split(r, token)
            opt = r.option(name) if name != token else opt
        selects = {name, opt.canonical, *(opt.span.aliases if opt.span else [])}
        if selects & model_flags and (opt.intent is None or opt.canonical in model_flags):
            opt.intent = MODEL
        if not eq and "=" in name and opt.validity != "ok":
            _no_equals(r, opt, name)
        spec = r.profile.flags.get(opt.intent) if opt.intent and opt.intent != MODEL else None
        takes = True if opt.intent == MODEL else opt.takes_value(spec)
        kind = spec.kind if spec is not None else (opt.span.kind if opt.span else "unknown")
        value, i = _value(words, i + 1, eq, inline, takes, kind, unknown=spec is None and opt.intent is None)
        dotted = _dotted(r, name, opt, value)
        if takes is True and value is None:
            _bare(r, opt, name, spec)
        elif dotted is None:
            opt.check(name, value, r.label)
        index = record(r, opt, value, "argv")
        if dotted is not None:
            apply(r, index, opt, dotted)
            continue
        if opt.intent == MODEL:
            r.out.model = str(value) if value is not None else r.out.model
        elif name in r.profile.launch.config_flags or opt.canonical in r.profile.launch.config_flags:
            r.out.inputs[index].intent = CONFIG_FILE
            read_config(r, str(value) if value is not None else "")
        else:
            apply(r, index, opt, value)


def _split(r: Reader, token: str) -> tuple[str, str, str]:
    """(option word, '=' when a value is written into it, that value), split at the first '=' as the engine's parser
    splits: any option word (argparse, clap: `-tp=2`), only `--` words (click), or none (llama.cpp looks the whole
    word up): the profile's launch.inline_values."""
    rules = r.profile.launch.inline_values
    equals = rules.equals if rules is not None else "long"
    if "=" in token and (equals == "any" or (equals == "long" and token.startswith("--"))):
        return token.partition("=")
    return token, "", ""


def _no_equals(r: Reader, opt: Opt, word: str) -> None:
    """`--opt=value` where the parser splits no word at '=' (llama.cpp): the whole word is no option, refused, and
    said to be the option with a joined value when the part before '=' is one."""
    rules = r.profile.launch.inline_values
    head = r.option(word.partition("=")[0])
    if rules is None or rules.equals != "none" or head.canonical is None:
        return
    opt.canonical, opt.validity = head.canonical, "refused"
    opt.detail = (
        f"{word}: {r.label} reads the whole word as an option name and has none such; it takes "
        f"{head.canonical} VALUE as two words ({rules.source})"
    )


def _dotted(r: Reader, name: str, opt: Opt, value: Any) -> dict[str, Any] | None:
    """`--json-option.key.sub VALUE` where the parser reads dotted keys (vLLM's FlexibleArgumentParser): the mapping
    it sets, the value read as JSON, else as written (https://github.com/vllm-project/vllm/blob/v0.34.0/vllm/utils/
    argparse_utils.py#L476-L488)."""
    rules = r.view.parser if r.view is not None else None
    if rules is None or not rules.dotted_keys or opt.canonical is None or "." not in name or value is None:
        return None
    keys = name.split(".")[1:]
    try:
        item: Any = json.loads(str(value))
    except ValueError:
        item = value
    for key in reversed(keys):
        item = {key: item}
    return item


def _bare(r: Reader, opt: Opt, name: str, spec: Any) -> None:
    """An option that takes a value, given none (at the end, or before another option): accepted only where its
    value is optional (argparse nargs='?': vLLM's --enable-chunked-prefill before 0.8.5), which the release data
    records; every parser it covers refuses it otherwise (argparse 'expected one argument', clap 'a value is
    required', llama.cpp 'expected value for argument')."""
    optional = [s.value_optional for s in opt.alternatives or ((opt.span,) if opt.span is not None else ())]
    if optional and all(optional):
        return
    if any(optional):
        opt.validity, opt.detail = (
            "unknown",
            (
                f"{name} given without a value: the releases read around {r.label} "
                "differ on whether its value may be left out"
            ),
        )
        return
    if opt.intent == MODEL or opt.span is not None or (spec is not None and spec.kind != "bool"):
        where = f" ({opt.url})" if opt.url else ""
        opt.validity, opt.detail = "refused", f"{name} needs a value in {r.label}{where}"


def _value(
    words: list[str], i: int, eq: str, inline: str, takes: bool | None, kind: str, unknown: bool
) -> tuple[Any, int]:
    """The value the option at words[i-1] consumes and the index after it: `--x=v`; a value (list options: every
    word up to the next option); a true/false word after a boolean (or after a switch: the engine then refuses it);
    for an option nothing is known about, the next word that is not an option."""
    if eq:
        return inline, i
    nxt = words[i] if i < len(words) and not is_option(words[i]) else None
    if nxt is None:
        return None, i
    if takes is True or (takes is None and unknown):
        value: Any = nxt
        i += 1
        while kind == "list" and takes is True and i < len(words) and not is_option(words[i]):
            value = [*(value if isinstance(value, list) else [value]), words[i]]
            i += 1
        return value, i
    if nxt.lower() in TRUE_FALSE:
        return nxt, i + 1
    return None, i


def _model_flags(profile: EngineProfile) -> set[str]:
    """Every flag that names the model (the launch commands' and their other spellings)."""
    return {m for _, m in profile.launch.commands() if m != "positional"} | set(profile.launch.model_aliases)


def _environment(r: Reader, env: list[EnvSetting]) -> None:
    """Environment variables as records: engine arguments given as env vars (TGI, llama.cpp; the command line wins
    over them, as clap and llama.cpp read them), the visible GPUs, library and engine settings."""
    model_flags = _model_flags(r.profile)
    for item in env:
        r.out.env[item.name] = item.value
        found = r.view.env_option(item.name) if r.view is not None else None
        spec_intent = next((i for i, s in r.profile.flags.items() if s.env == item.name), None)
        if found is not None:
            opt = r.option(found.name)
            opt.typed = item.name
            if found.status != "present":
                opt.validity, opt.detail = ("refused" if found.status == "absent" else "unknown"), found.reason
            elif opt.span is not None:
                given = item.value if opt.span.takes_value or item.value.lower() not in TRUE_FALSE else None
                opt.validity, opt.detail = "ok", None
                opt.check(item.name, given, r.label)
        elif (other := _env_elsewhere(r, item.name)) is not None:
            opt = Opt(typed=item.name, validity="refused", detail=other)
        elif spec_intent is not None:  # an intent set by a variable the engine reads (its table says if it does)
            opt = _env_only(r, item)
            opt.intent = spec_intent
            if opt.validity == "unknown":
                opt.detail = (
                    f"a {r.profile.name} environment setting read in {r.profile.flags[spec_intent].source};"
                    f" {opt.detail or 'not checked'}"
                )
        else:
            opt = _env_only(r, item)
        if found is not None and {found.name, *(opt.span.aliases if opt.span else [])} & model_flags:
            opt.intent = MODEL
        index = record(r, opt, item.value, "env")
        if opt.intent == MODEL:
            r.out.model = r.out.model or item.value
        elif opt.intent == DEVICES:
            r.out.gpu_count = cfg.visible_devices(item.value)
        elif opt.intent is not None:
            before = dict(r.out.values)
            apply(r, index, opt, item.value)
            for intent in r.out.produced.get(index, []):
                if intent in before:  # also given on the command line, which wins
                    r.out.values[intent] = before[intent]


def _env_elsewhere(r: Reader, name: str) -> str | None:
    """Why an environment variable that sets an option in other releases does nothing at this one."""
    if r.view is None or r.view.resolution.coverage not in ("exact", "newest_assumed", "between"):
        return None
    for option, spans in r.view.data.flags.items():
        seen = [s for s in spans if s.env == name]
        if seen:
            when = ", ".join(f"{s.first}..{s.last}" for s in seen)
            return (
                f"{r.label} reads no option from {name} ({option} reads it in {when}): the variable is "
                f"ignored ({r.view.data.url(r.view.data.releases[-1].ref, seen[-1].path)})"
            )
    return None


def _env_only(r: Reader, item: EnvSetting) -> Opt:
    kind = cfg.env_kind(r.profile, item.name)
    if kind == "devices":
        return Opt(
            typed=item.name,
            intent=DEVICES,
            validity="ok",
            detail=f"the GPUs the process sees ({cfg.VISIBLE_DEVICES_SOURCE})",
        )
    found = r.view.env_var(item.name) if r.view is not None else None
    if found is not None and found.status == "present":  # read by the engine itself at this release (its table)
        note = found.span.deprecated if isinstance(found.span, EnvSpan) else None
        said = [
            s
            for s in (
                f"read by {r.label} itself ({found.url})" if kind == "library" else None,
                found.matched_as,
                f"deprecated: {note}" if note else None,
            )
            if s
        ]
        return Opt(typed=item.name, validity="ok", url=found.url, detail="; ".join(said) or None)
    if found is not None and kind == "engine":  # the engine's own prefix: not read there, or no table to tell
        if found.status == "absent":
            return Opt(
                typed=item.name,
                validity="refused",
                url=found.url,
                detail=f"{r.label} reads no {item.name}: it is ignored ({found.reason})",
            )
        return Opt(typed=item.name, detail=found.reason)
    why = {
        "library": "read by a library (Hugging Face, NCCL, CUDA, PyTorch), not an engine option: not checked",
        "engine": f"a {r.profile.name} environment variable; those are not in the release data: not checked",
        "other": f"not an option of {r.label} that the release data knows: not checked",
    }[kind]
    return Opt(typed=item.name, detail=why)


def resolve_engine(
    engine: str, version: str | None
) -> tuple[EngineProfile, ReleaseView | None, str | None, str | None]:
    """The profile and release view at `version`; the version read (asked, else the newest read) and the note."""
    engine = profile_key(engine)
    view = release_data.view(engine, version)
    if view is None:
        profile = load_profile(engine, version)
        return (
            profile,
            None,
            version,
            f"no {profile.launch.command.split()[0]} release data: flags not checked "
            "against a release (only the profile's cited spellings are known)",
        )
    res = view.resolution
    at = version or (res.before.version if res.before else None)
    return load_profile(engine, at), view, at, res.note


def parse_launch(
    engine: str, text: str, *, version: str | None = None, files: dict[str, str] | None = None
) -> LaunchIntent:
    """Records and intents of a launch of `engine` at `version` (None: the newest release read, said in the note).
    `files`: contents of files the launch names (a --config YAML, a docker --env-file), by the name used."""
    key = profile_key(engine)
    if not text.strip():
        raise BadInput("empty launch command")
    files = dict(files or {})
    raw = _raw(text, files)
    notes: list[str] = []
    if isinstance(raw, RawLaunch) and raw.image and (hit := _image_engine(raw.image)):
        if hit[0] != key:
            raise BadInput(f"the image {raw.image} runs {hit[0]}, not {key}", hint=f"pass --from {hit[0]}")
        if version is None and hit[1]:
            version = hit[1]
            notes.append(f"version {hit[1]} read from the image tag ({raw.image})")
        elif version and hit[1] and hit[1].lstrip("v") != version.lstrip("v"):
            notes.append(f"the image tag says {hit[1]}, the version given is {version}: {version} is used")
    profile, view, at, note = resolve_engine(key, version)
    out = LaunchIntent(engine=key, version=at, version_note=note, notes=notes)
    r = Reader(
        profile=profile, view=view, files=files, out=out, table=spellings(profile), json_parts=json_parts(profile)
    )
    if isinstance(raw, dict):
        mapping(r, raw)
    else:
        files.update(raw.files)
        r.files = files
        out.image = raw.image
        _launch(r, raw)
    apply_deferred(r)
    out.unknown = [x.typed for x in out.inputs if x.intent is None and x.validity != "ok"]
    _slots_to_request(profile, out)
    return out


def _launch(r: Reader, raw: RawLaunch) -> None:
    words = list(raw.words)
    found = command_of(words) if words else None
    if found is not None and found[0] != r.profile.name:
        raise BadInput(f"the launch runs {found[0]}, not {r.profile.name}", hint=f"pass --from {found[0]}")
    model_args = _model_flags(r.profile)
    positional = (
        found[2] == "positional"
        if found
        else (
            r.profile.launch.model_arg == "positional"
            and not (raw.image and _image_engine(raw.image) and model_args & set(words))
        )
    )
    words = words[found[1] :] if found else words
    env = list(raw.env)
    for name in raw.env_files:
        text = r.files.get(name) or r.files.get(Path(name).name)
        if text is None:
            r.out.notes.append(f"env file {name!r} not given: its variables are not read (pass --file {name}=PATH)")
            record(r, Opt(typed=f"--env-file {name}", intent=ENV_FILE, detail="not given"), name, "env")
        else:
            env.extend(env_file(text, name))
    _walk(r, words, model_args, positional)
    _environment(r, env)
    if r.out.gpu_count is None and raw.gpus:
        r.out.gpu_count = cfg.visible_devices(raw.gpus) if not raw.gpus.isdigit() else int(raw.gpus)


def _slots_to_request(profile: EngineProfile, out: LaunchIntent) -> None:
    """llama.cpp -c is shared by the slots: with explicit slots (not unified) a request gets ctx / slots."""
    spec = profile.flags.get("max_context_length")
    slots = out.values.get("max_concurrent_sequences")
    ctx = out.values.get("max_context_length")
    shared = spec is not None and spec.total_over_slots and not out.values.get("kv_unified", False)
    if shared and isinstance(ctx, int) and ctx > 0 and isinstance(slots, int) and slots > 0:
        out.values["max_context_length"] = ctx // slots
