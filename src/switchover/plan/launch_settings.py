"""A launch's config file (vLLM and SGLang `--config`, trtllm-serve `--config` / `--extra_llm_api_options`, or a
YAML of settings pasted as the launch): one record per top-level key, checked where the release data lists the
file's keys (`yaml:KEY`, `yaml:SECTION.KEY`: TensorRT-LLM's LLM-API fields) or else as the command-line option of
the same name, and applied over or under the command line as the engine merges them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from switchover.engines.releases import FlagSpan
from switchover.errors import BadInput
from switchover.plan import launch_config as cfg
from switchover.plan.launch_records import MODEL, VALIDITY, Opt, Reader, apply, apply_json, record
from switchover.textfile import read_text

CONFIG_MAX_BYTES = 256 * 1024
YAML = "yaml:"  # the release data's prefix for a config file's keys


def read_config(r: Reader, ref: str) -> None:
    """A config file named on the command line: its keys become records (via config); missing, it is said. A value
    that is a JSON object is the settings themselves, given inline."""
    text = r.files.get(ref) or r.files.get(Path(ref).name)
    if text is None and ref.lstrip().startswith("{"):
        text = ref
        r.out.notes.append("the config option's value is its settings as inline JSON: read as such")
    elif text is None and ref and len(ref) < 4096 and Path(ref).is_file():
        text = read_text(ref, max_bytes=CONFIG_MAX_BYTES, what="launch config (YAML)")
    if text is None:
        r.out.notes.append(f"config file {ref!r} not given: its settings are not read (pass --file {ref}=PATH)")
        return
    data = cfg.read_yaml_mapping(text, f"launch config {ref}")
    if not isinstance(data, dict):
        raise BadInput(f"{ref}: the launch config must be a YAML mapping")
    mapping(r, data)


def _listed_keys(r: Reader) -> set[str]:
    """The config-file keys the release data lists (empty: it lists none, keys are read as options)."""
    if r.view is None:
        return set()
    return {name for name in r.view.data.flags if name.startswith(YAML)}


def _listed(r: Reader, key: str, value: Any, listed: set[str], intent: str | None) -> Opt:
    """A top-level key the release data lists the file's keys for: present, absent (the engine refuses an unknown
    key) or unknown around an unread release; a section's own keys checked too where the data lists them (a
    free-form mapping's are not)."""
    assert r.view is not None
    found = r.view.option(YAML + key)
    opt = Opt(
        typed=key,
        intent=intent,
        validity=VALIDITY[found.status],
        url=found.url,
        detail=None if found.status == "present" else found.reason.replace(YAML, "config key "),
    )
    if found.status != "present" or not isinstance(found.span, FlagSpan):
        return opt
    opt.span = found.span
    inner = f"{YAML}{key}."
    if isinstance(value, dict) and any(name.startswith(inner) for name in listed):
        for sub in map(str, value):
            got = r.view.option(inner + sub)
            if got.status != "present":
                opt.validity = VALIDITY[got.status]
                opt.detail = f"{key}.{sub}: {got.reason.replace(YAML, 'config key ')}"
                break
    return opt


def mapping(r: Reader, data: dict[str, Any]) -> None:
    """Settings as YAML keys (option names without dashes, or LLM-API fields and sections): one record per top-level
    key; a section's keys set the intents the profile maps inside it."""
    keys = cfg.yaml_keys(r.profile)
    sections = cfg.yaml_sections(r.profile)
    listed = _listed_keys(r)
    for key, value in ((str(k), v) for k, v in data.items()):
        if key in cfg.MODEL_KEYS:
            r.out.model = str(value)
            record(r, Opt(typed=key, intent=MODEL, validity="ok"), value, "config")
            continue
        as_option = next(
            (o for o in (r.option(s) for s in cfg.option_spellings(key)) if o.validity == "ok" or o.intent),
            r.option(cfg.option_spellings(key)[0]),
        )
        if listed:
            opt = _listed(r, key, value, listed, keys.get(key) or (None if key in sections else as_option.intent))
        elif key in keys or key in sections:
            why = r.unchecked() if r.view is None else "its keys are not in the release data"
            opt = Opt(typed=key, intent=keys.get(key), detail=f"a YAML setting of {r.label}: {why}")
        else:
            opt = as_option
            opt.typed = key
        if not isinstance(value, bool):
            opt.check(key, value, r.label)
        index = record(r, opt, value, "config")
        r.deferred.append((index, opt))


def apply_deferred(r: Reader) -> None:
    """Config-file settings over the command line where the engine merges them over it (TensorRT-LLM); elsewhere the
    command line wins and the file only fills what it does not set."""
    sections = cfg.yaml_sections(r.profile)
    for index, opt in r.deferred:
        before = dict(r.out.values)
        value = r.out.inputs[index].value
        if opt.intent is None and opt.typed in sections and isinstance(value, dict):
            apply_json(r, index, None, value, sections[opt.typed])
        else:
            apply(r, index, opt, value)
        if not r.profile.launch.config_overrides_cli:
            for intent in r.out.produced.get(index, []):
                if intent in before:
                    r.out.values[intent] = before[intent]
