"""`switchover plan choose`: rank the five engines for a model, GPUs and requirements, every reason cited."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from switchover import inputs
from switchover.cli import params
from switchover.cli.common import console, print_json
from switchover.cli.verbs import literal
from switchover.errors import BadInput, CheckFailed

if TYPE_CHECKING:  # the ranking machinery is imported when the command runs, so `plan --help` stays fast
    from switchover.plan.choose import ChooseResult, EngineChoice, ProbeEvidence

# read from engines/features.py's source, not imported (that imports every engine profile)
FEATURES: tuple[str, ...] = literal("switchover.engines.features", "FEATURES")
API_FIELDS: tuple[str, ...] = literal("switchover.engines.features", "API_FIELDS")
MAX_PROBE_BYTES = 64 << 20
_MARK = {True: "yes", False: "NO", None: "?"}


def _probe(path: str) -> ProbeEvidence:
    from pydantic import ValidationError

    from switchover.plan.choose import probe_evidence
    from switchover.probe.report import ProbeReport
    from switchover.textfile import load_json

    data = load_json(path, max_bytes=MAX_PROBE_BYTES, what="probe report JSON")
    try:
        report = ProbeReport.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadInput(
            f"--probe {path}: not a `switchover probe --json` report: "
            f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
        ) from None
    return probe_evidence(report, path)


def _features(items: list[str] | None) -> list[str]:
    out = []
    for item in items or []:
        name = item.strip().lower().replace("-", "_")
        if name not in FEATURES:
            raise BadInput(f"--feature {item[:60]!r}: unknown feature", hint=f"known: {', '.join(FEATURES)}")
        out.append(name)
    return out


def _render(result: ChooseResult) -> None:
    from rich.table import Table

    hw = result.hardware
    console.print(
        f"[bold]{escape(result.model)}[/] ({escape(result.format or 'unknown format')}: "
        f"{escape(result.format_reason)}) on {escape(hw.label)}" + (f", sm{hw.sm}" if hw.sm is not None else ""),
        highlight=False,
    )
    table = Table("#", "engine", "loads (kernel)", "per replica", "verdict")
    for c in result.engines:
        cap = (
            "-"
            if c.capacity is None
            else (f"{c.capacity.max_concurrency} x {c.capacity.context:,} tok (TP={c.capacity.tp})")
        )
        loads = _MARK[c.loads] + (f" ({c.kernel})" if c.kernel else "")
        table.add_row(str(c.rank), escape(c.display_name), escape(loads), escape(cap), escape(c.verdict()))
    console.print(table)
    for c in result.engines:
        _render_reasons(c)
    for note in result.notes:
        console.print(f"note: {note}", markup=False, highlight=False)


def _render_reasons(c: EngineChoice) -> None:
    release = c.engine_version.label if c.engine_version else c.engine
    console.print(f"{c.rank}. {c.display_name}: {release} (profile {c.profile_version})", markup=False, highlight=False)
    if c.engine_version is not None and c.engine_version.note:
        console.print(f"   note: {c.engine_version.note}", markup=False, highlight=False)
    for f in c.facts:
        mark = _MARK[f.ok]
        flag = "" if f.verified or f.ok is None else " (unverified)"
        src = f" [{f.source}]" if f.source else ""
        console.print(f"   {mark:>3} {f.what}: {f.detail}{flag}{src}", markup=False, highlight=False)
    for d in c.api_differences:
        console.print(f"   API differs: {d}", markup=False, highlight=False)


def choose_cmd(
    model: str = typer.Option(
        ...,
        "--model",
        "-m",
        help="Model dir, config.json, .gguf, HF repo id, or "
        "builtin:ID (configs shipped for offline use, e.g. builtin:openai/gpt-oss-120b).",
    ),
    gpu: str = typer.Option(None, "--gpu", help="GPU from the catalog, e.g. H100-80G (`switchover hw gpus`)."),
    gpus: int = typer.Option(
        1, "--gpus", help="How many of --gpu one replica spans (TP).", parser=params.count(hi=inputs.MAX_GPUS)
    ),
    fingerprint: str = typer.Option(
        None,
        "--fingerprint",
        help="Host fingerprint JSON (`switchover hw fingerprint --json`) or catalog:NAME[xCOUNT], instead of --gpu.",
    ),
    cpu: bool = typer.Option(False, "--cpu", help="The engines would run on CPU (no GPU)."),
    context: int = typer.Option(
        None,
        "--context",
        help="Tokens per request to serve (prompt + output); default: the model's max_position_embeddings.",
        parser=params.TOKENS,
    ),
    concurrency: int = typer.Option(
        None, "--concurrency", help="Concurrent requests one replica must hold.", parser=params.count()
    ),
    rate: float = typer.Option(
        None, "--rate", help="Requests per second (reported unknown: needs a bench run).", parser=params.positive(1e6)
    ),
    feature: list[str] = typer.Option(None, "--feature", help=f"Needed feature, repeatable: {', '.join(FEATURES)}."),
    api_field: list[str] = typer.Option(
        None,
        "--api-field",
        help=f"OpenAI field the clients use, repeatable: {', '.join(API_FIELDS)} (stop:N for N stop strings).",
    ),
    engine: list[str] = typer.Option(
        None,
        "--engine",
        "-e",
        help="Rank only these engines, each optionally at a "
        "release: vllm@0.6.3 (repeatable; default: all five at the newest release "
        "known, said per engine).",
    ),
    current: str = typer.Option(
        None, "--from", help="Engine the clients use today: list API differences.", parser=params.Text(120)
    ),
    probe: str = typer.Option(None, "--probe", help="A `switchover probe --json` report as evidence."),
    json_out: bool = params.json_flag("the ranking"),
) -> None:
    """Rank vLLM, SGLang, TensorRT-LLM, TGI and llama.cpp for a model on given GPUs: can it load the format (and
    with which kernel), capacity per replica (`plan capacity`), features and API fields, each fact cited.

    Example: switchover plan choose -m builtin:openai/gpt-oss-120b --gpu H100-80G --context 8192
    """
    from switchover.engines import load_profile
    from switchover.engines.compat import parse_pin
    from switchover.engines.features import parse_api_field
    from switchover.engines.formats import ENGINES
    from switchover.hardware.diff import load_fingerprint
    from switchover.plan.choose import Requirements, catalog_hardware, choose, cpu_hardware, fingerprint_hardware
    from switchover.plan.choose_models import resolve_model

    chosen = [x for x in (gpu is not None, fingerprint is not None, cpu) if x]
    if len(chosen) != 1:
        raise BadInput("name the hardware once: --gpu NAME [--gpus N], --fingerprint FILE, or --cpu")
    if gpus != 1 and gpu is None:
        raise BadInput("--gpus counts --gpu; a fingerprint brings its own GPU count")
    req = Requirements(
        context=context,
        concurrency=concurrency,
        rate=rate,
        features=_features(feature),
        api_fields=list(api_field or []),
        current_engine=load_profile(current).name if current else None,
    )
    for text in req.api_fields:
        parse_api_field(text)  # BadInput before any model is read
    evidence = _probe(probe) if probe else None
    if gpu is not None:
        hw = catalog_hardware(gpu, gpus)
    elif fingerprint is not None:
        hw = fingerprint_hardware(load_fingerprint(fingerprint), fingerprint)
    else:
        hw = cpu_hardware()
    pins = [parse_pin(text, "--engine") for text in engine or []]
    if len({p.engine for p in pins}) != len(pins):
        raise BadInput("--engine names an engine twice", hint="one -e ENGINE[@VERSION] per engine")
    card, qc = resolve_model(model)
    result = choose(
        card,
        qc,
        hw,
        req,
        evidence,
        engines=tuple(p.engine for p in pins) or ENGINES,
        versions={p.engine: p.version for p in pins if p.version},
    )
    if json_out:
        print_json(result)
    else:
        _render(result)
    if all(c.blockers for c in result.engines):
        raise CheckFailed("no engine is free of blockers for these requirements")
