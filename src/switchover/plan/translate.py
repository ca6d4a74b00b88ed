"""Translate a launch between engines and versions: every input flag (argv, env, config key) ends in exactly one
list — translated, the target's default already matches, lost (with why), or passed through unchanged — and the
target's launch is rendered with option names that exist at the target version (its release data). Spellings come
from the engine profiles; conversions are per intent (plan.translate_values), never per engine name."""

from __future__ import annotations

import json
import shlex
from typing import Any

from pydantic import BaseModel, Field, computed_field

from switchover.engines import EngineProfile, FlagSpec, load_profile
from switchover.engines.releases import FlagSpan
from switchover.model.card import ModelCard
from switchover.plan.launch import LaunchIntent, parse_launch, resolve_engine
from switchover.plan.launch_values import value_problem
from switchover.plan.translate_hardware import HardwareMove, gguf_step, move_hardware
from switchover.plan.translate_json import base, has_members, member, render_json, target_option
from switchover.plan.translate_nodes import nodes
from switchover.plan.translate_results import FlagResult, flag_result, model_words
from switchover.plan.translate_speculation import speculation
from switchover.plan.translate_values import CONVERSIONS, CONVERTED, Derived, LostKind, Outcome, Render, Result, spelled
from switchover.words import plain

# Intents that are not values to copy: they need the model and GPU to convert (see plan capacity).
MEANING_DIFFERS = {"gpu_memory_fraction", "block_size", "max_batched_tokens_per_step", "max_waiting_queue"}
# API facts compared between engines for the "different default / behaviour" part of the report.
API_FACTS = (
    "generation_config_applied",
    "default_sampling",
    "max_stop_strings",
    "stop_matching",
    "stop_string_in_output",
    "finish_reasons",
    "unknown_field_policy",
    "unknown_model_policy",
    "seed_per_request",
    "n_gt_1",
    "validation_status",
    "overload_status",
    "error_body",
    "context_overflow",
    "cached_tokens_reported",
    "openai_json_schema",
    "ignore_eos_field",
    "min_tokens_field",
)
__all__ = [
    "Derived",
    "FlagResult",
    "HardwareMove",
    "LaunchIntent",
    "LostItem",
    "Translation",
    "api_differences",
    "parse_launch",
    "render",
    "translate",
]


class LostItem(BaseModel):
    """Something that does not carry over as-is (an API default or behaviour, or a lost flag)."""

    intent: str
    kind: LostKind
    detail: str
    source: str | None = None


class Translation(BaseModel):
    """A rendered target launch, and what became of every input flag."""

    source_engine: str
    source_version: str | None = None
    source_note: str | None = None
    target_engine: str
    target_version: str | None = None
    target_note: str | None = None
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    yaml_config: dict[str, Any] | None = Field(default=None, description="TensorRT-LLM extra options YAML")
    flags: list[FlagResult] = Field(default_factory=list, description="one per input flag, env var or config key")
    derived: list[Derived] = Field(default_factory=list, description="values set that no input flag carried")
    steps: list[str] = Field(default_factory=list, description="things to do before launching the target")
    api: list[LostItem] = Field(default_factory=list, description="API defaults and behaviours that differ")
    notes: list[str] = Field(default_factory=list)

    @computed_field(description="The rendered launch command line (env + argv, shell-quoted)")  # type: ignore[prop-decorator]
    @property
    def command(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return (env + " " if env else "") + shlex.join(self.argv)

    @property
    def lost(self) -> list[LostItem]:
        """Lost flags and API differences, as one list (what `check` reports)."""
        flags = [
            LostItem(
                intent=f.input.intent or f.input.typed,
                kind=f.kind or "no_equivalent",
                detail=f.detail or "",
                source=f.source,
            )
            for f in self.flags
            if f.outcome == "lost"
        ]
        return flags + list(self.api)

    @property
    def refused(self) -> list[FlagResult]:
        """Input flags the source version refuses: the source launch itself is invalid."""
        return [f for f in self.flags if f.input.validity == "refused"]


# ---- placing values in the target ------------------------------------------------------------------------------


def _on_command_line(spec: FlagSpec) -> bool:
    return bool(spec.flag and spec.kind != "none" and " " not in spec.flag)


def _place(r: Render, intent: str, value: Any) -> Result:
    """One value where the target takes it: a flag (spelled as the target version has it), a JSON key of a flag,
    a YAML key or an environment variable."""
    spec = r.dst.flags[intent]
    detail = r.details.get(intent)
    if spec.json_key and spec.flag:
        return member(r, intent, spec, value, detail)
    if spec.kind == "json" and spec.flag and isinstance(value, dict) and has_members(r, spec.flag):
        return base(r, intent, spec, value, detail)
    if _on_command_line(spec):
        name, span, missing, url = target_option(r, spec)
        if name is None:
            return Result(
                "lost",
                detail=f"no spelling of {spec.flag} in {r.target_label}: {missing}",
                kind="refused",
                source=spec.source,
            )
        words = _flag_words(spec, name, span, value, r.dst.launch.bool_style)
        if not words:
            return Result(
                "default_matches",
                detail=f"{_describe(spec, intent, value)} is {r.dst.name}'s default",
                source=url or spec.source,
            )
        shown = words[1] if len(words) == 2 else (words[1:] if len(words) > 2 else None)
        problem = value_problem(name, span, shown, r.target_label, url) if span is not None else None
        if problem is not None:
            return Result(
                "lost",
                detail=f"{r.target_label} would refuse it: {problem[1]}",
                kind="refused",
                source=url or spec.source,
            )
        r.argv.extend(words)
        return Result("translated", words, detail, url or spec.source)
    if spec.yaml_key:
        node = r.yaml_cfg
        *parents, leaf = spec.yaml_key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = spelled(spec, value)
        return Result("translated", [f"{spec.yaml_key}: {json.dumps(node[leaf])}"], detail, spec.source)
    assert spec.env
    if spec.kind == "bool" and not value and not spec.default:
        return Result("default_matches", detail=f"{spec.env} left unset is off in {r.target_label}", source=spec.source)
    r.env[spec.env] = _env_word(spec, value)
    return Result("translated", [f"{spec.env}={r.env[spec.env]}"], detail, spec.source)


def _env_word(spec: FlagSpec, value: Any) -> str:
    """A value as the target's variable is read: a switch as its first true word (vLLM reads only 'true' before
    0.28.0), else 1/0."""
    if spec.kind != "bool":
        return str(value)
    if value and spec.true_words:
        return spec.true_words[0]
    return "1" if value else "0"


def _flag_words(spec: FlagSpec, name: str, span: FlagSpan | None, value: Any, bool_style: str) -> list[str]:
    """The argv words for one flag and its value ([] when a switch would only repeat the default)."""
    if spec.kind == "bool":
        if spec.on_value is not None:  # a value of the flag stands for "on"; off is the flag left out
            return [name, spec.on_value] if bool(value) != spec.invert else []
        if bool(value) != spec.invert:
            return [name]
        if spec.negation:
            return [spec.negation]
        takes = span.takes_value if span is not None else bool_style == "value"
        return [name, "false"] if takes else []
    if isinstance(value, list) and spec.separator:
        return [name, spec.separator.join(str(v) for v in value)]
    if isinstance(value, list):
        return [name, *(_text(v) for v in value)]
    if isinstance(value, dict) and spec.kv_pairs:
        return [name, ",".join(f"{k}={_text(v)}" for k, v in value.items())]
    if isinstance(value, dict):
        return [name, json.dumps(value)]
    return [name, _text(spelled(spec, value, span))]


def _text(value: Any) -> str:
    """A value as a command-line word (20.0 GiB is written 20, as typed)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _describe(spec: FlagSpec | None, name: str, value: Any = None) -> str:
    if spec is None:
        return name
    text = spec.flag or spec.yaml_key or spec.env or name
    if value is not None:
        text += f"={value}"
    meaning = spec.semantics or spec.note
    return f"{text} ({meaning})" if meaning else text


def _not_copied(r: Render, name: str, value: Any) -> Result | None:
    """Why a value cannot be copied to the target as it is; None when it can."""
    src, dst = r.src, r.dst
    sspec, dspec = src.flags.get(name), dst.flags.get(name)
    if dspec is None:
        gone = (
            r.dview.option(sspec.flag)
            if r.dview is not None and sspec is not None and sspec.flag and src.name == dst.name
            else None
        )
        why = (
            f"removed: {gone.reason}"
            if gone is not None and gone.status == "absent"
            else f"{dst.name} has no such setting at {r.target_label}"
        )
        return Result(
            "lost",
            detail=f"{_describe(sspec, name, value)}: {why}",
            kind="no_equivalent",
            source=sspec.source if sspec else None,
        )
    # one_way: the source applied its value as the shared intent where it applied it at all (TGI --max-batch-size)
    differs = sspec is not None and not (dspec.equivalent and (sspec.equivalent or sspec.one_way))
    converted = name in r.details
    if (differs or name in MEANING_DIFFERS) and src.name != dst.name and not converted and name not in r.forced:
        why = f": {dspec.note}" if dspec.one_way and dspec.note else " — size it with `switchover plan capacity`"
        return Result(
            "lost",
            detail=f"{_describe(sspec, name, value)} in {src.name} is not {_describe(dspec, name)} "
            f"in {dst.name}; not copied{why}",
            source=dspec.source,
            kind="different_meaning",
        )
    settable = _on_command_line(dspec) or bool(dspec.yaml_key) or bool(dspec.env)
    if not settable:
        if name.endswith("_parallel_size") and value == 1:
            why = f"a size of 1 is no parallelism: one {dst.name} process"
            return Result(
                "default_matches", detail=f"{r.details[name]}; {why}" if name in r.details else why, source=dspec.source
            )
        if dspec.default is not None and value == dspec.default:
            return Result(
                "default_matches",
                detail=f"{dst.name} always does this ({dspec.note or dspec.default})",
                source=dspec.source,
            )
        note = dspec.note or dspec.semantics
        return Result(
            "lost",
            detail=f"{sspec.flag if sspec else name}={value} has no {dst.name} equivalent"
            + (f" ({note})" if note else ""),
            source=dspec.source,
            kind="no_equivalent",
        )
    if (
        sspec is not None
        and dspec.kind != sspec.kind
        and name not in CONVERTED
        and not converted
        and not ({dspec.kind, sspec.kind} <= {"str", "list"})
    ):
        return Result(
            "lost",
            detail=f"{sspec.flag}={value} ({sspec.kind}) vs {dspec.flag or dspec.yaml_key} "
            f"({dspec.kind}) in {dst.name}: {dspec.note or dspec.semantics or ''}",
            source=dspec.source,
            kind="different_meaning",
        )
    return None


def _copy(r: Render, name: str, value: Any) -> None:
    """Copy one value (shaped as a list or a single string where the target wants one), or say why not."""
    if name == "metrics_enable" and value and r.dst.metrics_endpoint.enabled_by_default:
        r.results[name] = Result(
            "default_matches", detail=f"metrics are on by default in {r.dst.name}", source=r.dst.metrics_endpoint.source
        )
        return
    why = _not_copied(r, name, value)
    if why is not None:
        r.results[name] = why
        return
    dspec, sspec = r.dst.flags[name], r.src.flags.get(name)
    note = sspec.note if sspec is not None and sspec.one_way and r.src.name != r.dst.name else None
    if dspec.kind == "list" and not isinstance(value, list):
        value = [value]
    if dspec.named_items and isinstance(value, list) and r.src.name != r.dst.name:
        # NAME=PATH per item: a bare PATH (a TGI adapter id) is served under its own name
        value = [v if "=" in str(v) or str(v).lstrip().startswith("{") else f"{v}={v}" for v in value]
    if dspec.kind == "str" and isinstance(value, list):
        if len(value) > 1:
            note = f"only the first of {value} is kept in {r.dst.name}"
        value = value[0]
    result = _place(r, name, value)
    if note and result.outcome == "translated":
        result.detail = "; ".join(x for x in (result.detail, note) if x)
    r.results[name] = result


def _constraints(r: Render) -> None:
    """Values the target refuses together (SGLang: tp_size % ep_size == 0): the dependent one is not rendered."""
    for intent, spec in r.dst.flags.items():
        other = spec.must_divide
        if not other or intent not in r.values:
            continue
        value, base = r.values[intent], r.values.get(other, r.dst.flags[other].default if other in r.dst.flags else 1)
        if isinstance(value, int) and isinstance(base, int) and value > 0 and base % value:
            r.lose(
                intent,
                "refused",
                f"{spec.flag} {value} must divide {r.dst.flags[other].flag} {base} in "
                f"{r.target_label} (it refuses to start otherwise)",
                spec.rule_source or spec.source,
            )


def _carried(r: Render) -> None:
    """Intents rendered through others (sharding by the TP size, a rendezvous address by two options) take what
    became of their carriers: lost if one is lost."""
    for name, carriers in r.follows.items():
        done = [(c, r.results[c]) for c in ((carriers,) if isinstance(carriers, str) else carriers) if c in r.results]
        if not done:
            continue
        lost = [x for _, x in done if x.outcome == "lost"]
        first = lost[0] if lost else done[0][1]
        outcome: Outcome = (
            done[0][1].outcome
            if len(done) == 1
            else "lost"
            if lost
            else "default_matches"
            if all(x.outcome == "default_matches" for _, x in done)
            else "translated"
        )
        r.results[name] = Result(
            outcome,
            [w for _, x in done for w in x.rendered],
            "; ".join(f"carried by {c}" + (f": {x.detail}" if x.detail else "") for c, x in done),
            first.source,
            first.kind,
        )


def render(
    intent: LaunchIntent,
    target: str,
    *,
    target_version: str | None = None,
    card: ModelCard | None = None,
    gpu_total_gib: float | None = None,
    move: HardwareMove | None = None,
    gpu_name: str | None = None,
) -> Translation:
    """The target engine's launch for `intent` at `target_version` (None: the newest read), with what became of
    every input flag. With a model card and the GPU's memory, the memory knob is converted to the target's meaning;
    with a hardware move, the layout, memory knob, context and concurrency are derived for the new GPUs."""
    src = load_profile(intent.engine, intent.version)
    dst, dview, at, note = resolve_engine(target, target_version)
    r = Render(
        src=src,
        dst=dst,
        dview=dview,
        target_label=f"{dst.name} {at}" if at else dst.name,
        values=dict(intent.values),
        card=card,
        gpu_total_gib=gpu_total_gib,
        gpu_name=gpu_name,
    )
    r.model = intent.model or "MODEL"
    if intent.model is None:
        r.notes.append(
            "the launch names no model" + ("" if src.name == dst.name else ": MODEL stands for it in the command")
        )
    r.gpu_count = intent.gpu_count
    if move is not None:
        move_hardware(r, intent, move)
    gguf_step(r, intent, move)
    for step in (speculation, nodes, *CONVERSIONS):
        step(r)
    r.argv = dst.launch.command.split() + model_words(r, r.model if intent.model or src.name != dst.name else None)
    _constraints(r)
    for name, value in list(r.values.items()):
        if name in r.values and name not in r.results:
            _copy(r, name, value)
    render_json(r)
    _carried(r)
    if intent.gpu_count is not None or "CUDA_VISIBLE_DEVICES" in intent.env:
        r.env.setdefault("CUDA_VISIBLE_DEVICES", r.devices or intent.env.get("CUDA_VISIBLE_DEVICES", ""))
    flags = [flag_result(r, intent, i, item) for i, item in enumerate(intent.inputs)]
    if r.yaml_cfg and dst.launch.config_file:
        r.argv += [dst.launch.config_file, "extra_llm_api_options.yaml"]
    return Translation(
        source_engine=src.name,
        source_version=intent.version,
        source_note=intent.version_note,
        target_engine=dst.name,
        target_version=at,
        target_note=note,
        argv=r.argv,
        env={k: v for k, v in r.env.items() if v != ""},
        yaml_config=r.yaml_cfg or None,
        flags=flags,
        derived=r.derived,
        steps=r.steps,
        api=api_differences(src, dst),
        notes=intent.notes + r.notes,
    )


def api_differences(src: EngineProfile, dst: EngineProfile) -> list[LostItem]:
    """API defaults and behaviours that differ between the two engines, each cited."""
    out: list[LostItem] = []
    if src.name == dst.name:
        return out
    for fact in API_FACTS:
        a, b = getattr(src.api, fact), getattr(dst.api, fact)
        if a != b:
            out.append(
                LostItem(
                    intent=f"api.{fact}",
                    kind="different_default",
                    detail=f"{fact}: {src.name} {plain(a)} -> {dst.name} {plain(b)}",
                    source=dst.api.sources.get(fact),
                )
            )
    return out


def translate(
    source: str,
    text: str,
    target: str,
    *,
    card: ModelCard | None = None,
    gpu_total_gib: float | None = None,
    gpu_name: str | None = None,
    source_version: str | None = None,
    target_version: str | None = None,
    files: dict[str, str] | None = None,
    move: HardwareMove | None = None,
) -> Translation:
    """Parse `text` as a `source` launch (at `source_version`) and render it for `target` (at `target_version`)."""
    intent = parse_launch(source, text, version=source_version, files=files)
    return render(
        intent,
        target,
        target_version=target_version,
        card=card,
        gpu_total_gib=gpu_total_gib,
        move=move,
        gpu_name=gpu_name,
    )


def bench_advice(t: Translation, run_dir: str) -> None:
    """Onto `t.notes`, one line per cap that bound in a bench run of the target engine (bench/capbind.py): "on
    <engine> at <load> the <cap> bound: raise <flag>", the flag as the target version has it (issue 28)."""
    from switchover.evidence.bench import BenchReport
    from switchover.evidence.bench_caps import advice, raise_flag
    from switchover.runs import RunDir

    report = RunDir.open(run_dir).read_json("summary", BenchReport)
    engines = {e.label: e.engine for e in report.endpoints}
    ours = [
        lim.model_copy(update={"raise_flag": raise_flag(t.target_engine, t.target_version, lim.binding)})
        for lim in report.limits
        if engines.get(lim.endpoint) == t.target_engine
    ]
    t.notes.extend(advice(ours, engines))
