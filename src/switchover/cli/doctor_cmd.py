"""`switchover doctor [SYMPTOM]`: symptom → likely cause → the switchover command that confirms it; given a model, an
engine and a GPU, the figures of that command (the one capacity model `plan canary` uses)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import typer

from switchover import inputs
from switchover.cli import params
from switchover.cli.common import console, print_json
from switchover.doctor import SYMPTOMS, CanaryFigures, Diagnosis, diagnose
from switchover.errors import BadInput

if TYPE_CHECKING:
    from switchover.plan.canary import CanaryPlan

VERDICT_WORDS = {
    "tune": "tune this engine (not a reason to swap)",
    "convert": "convert the checkpoint (not a reason to swap)",
    "swap": "swap engines (the one answer that warrants it)",
}


def _print(d: Diagnosis, first: bool) -> None:
    s = d.symptom
    console.print(f"[bold]{s.symptom}[/] [dim]({s.key}, match {d.score:.2f})[/]", highlight=False)
    for i, c in enumerate(s.causes, 1):
        console.print(f"  {i}. likely cause: {c.cause}", highlight=False, soft_wrap=True)
        for cmd in c.confirm:
            console.print(f"     confirm: [cyan]{cmd}[/]", highlight=False, soft_wrap=True)
        console.print(f"     fix: {c.fix}", highlight=False, soft_wrap=True)
        if c.verdict is not None:  # tune or swap?: only missing operations metrics warrants another engine
            console.print(f"     verdict: {VERDICT_WORDS[c.verdict]}", highlight=False, soft_wrap=True)
        console.print(f"     [dim]source: {c.source}[/]", highlight=False)
        if c.figures == "canary" and d.canary is not None:
            _print_canary(d.canary)
    if first:
        console.print()


def _print_canary(f: CanaryFigures) -> None:
    split = ", ".join(f"{pct} %: {total:,}" for pct, total in f.sustainable_total.items())
    console.print(
        f"     figures ({f.engine} on {f.gpu}, requests of {f.context:,} tokens): one copy alone "
        f"{f.single_tokens:,} tokens; with both resident {f.copy_tokens[0]:,} (old) and "
        f"{f.copy_tokens[1]:,} (new) tokens; concurrent requests sustained by canary share: {split}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"     the same figures: {f.command}", markup=False, highlight=False, soft_wrap=True)


def _canary(
    model: str,
    engine: str,
    gpu: str | None,
    gpu_mem_gib: float | None,
    tp: int,
    context: int,
    max_model_len: int | None,
) -> CanaryFigures:
    """`plan canary`'s plan for these inputs (the same parsing and the same function)."""
    from switchover.cli.plan_cmd import engine_at, gpu_of
    from switchover.plan.canary import canary_plan
    from switchover.plan.choose_models import resolve_model
    from switchover.plan.parallel import check_layout

    card, _ = resolve_model(model)
    profile, version = engine_at(engine, None)
    total, gpu_name, _ = gpu_of(gpu, gpu_mem_gib)
    check_layout(card, profile, tp, 1)
    plan = canary_plan(
        card,
        profile,
        total,
        tp=tp,
        context=context,
        max_model_len=max_model_len,
        gpu_name=gpu_name,
        engine_version=version,
    )
    where = ["--gpu", gpu] if gpu else ["--gpu-mem-gib", f"{gpu_mem_gib:g}"]
    limit = ["--max-model-len", str(max_model_len)] if max_model_len else []
    command = shlex.join(
        [
            "switchover",
            "plan",
            "canary",
            "-m",
            model,
            "-e",
            engine,
            *where,
            "--tp",
            str(tp),
            "--context",
            str(context),
            *limit,
        ]
    )
    return canary_figures(plan, gpu_name or f"{total:.2f} GiB", command)


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(
        symptom: str = typer.Argument(None, help="What you see, in your words; omit to list known symptoms."),
        limit: int = typer.Option(
            1, "--limit", "-n", help="How many matching symptoms to show.", parser=params.count(hi=100)
        ),
        model: str = typer.Option(
            None,
            "--model",
            "-m",
            help="With --gpu: print the figures of the causes that "
            "memory explains (as `plan canary -m`; also builtin:ID).",
        ),
        engine: str = typer.Option(
            "vllm",
            "--engine",
            "-e",
            help="Engine for the figures, optionally at a release "
            "(vllm@0.6.3); default: the newest release known, and said.",
        ),
        gpu: str = typer.Option(None, "--gpu", help="GPU from the catalog for the figures, e.g. H100-80G."),
        gpu_mem_gib: float = typer.Option(
            None, "--gpu-mem-gib", help="Total GPU memory in GiB (instead of --gpu).", parser=params.GIB
        ),
        tp: int = typer.Option(
            1, "--tp", help="Tensor parallel size for the figures.", parser=params.count(hi=inputs.MAX_PARALLEL)
        ),
        context: int = typer.Option(8192, "--context", help="Request length for the figures.", parser=params.TOKENS),
        max_model_len: int = typer.Option(
            None, "--max-model-len", help="Context limit for the figures (default: from config).", parser=params.TOKENS
        ),
        json_out: bool = params.json_flag("the matches"),
    ) -> None:
        """Symptom → likely cause → the switchover command that confirms it; with -m and --gpu, that command's
        figures.

        Example: switchover doctor "p99 went up but qps is flat" -m ./Llama-3.1-8B -e vllm@0.11.0 --gpu H100-80G
        """
        if not symptom:
            if json_out:
                print_json([s.model_dump() for s in SYMPTOMS])
            else:
                for s in SYMPTOMS:
                    console.print(f"[bold]{s.key}[/]: {s.symptom}", highlight=False)
            return
        from switchover.engines.compat import parse_pin

        parse_pin(engine, "--engine")  # an unknown engine or malformed release is refused even without figures
        if (model is None) != (gpu is None and gpu_mem_gib is None):
            raise BadInput(
                "figures need both -m MODEL and --gpu GPU (or --gpu-mem-gib)",
                hint='e.g. switchover doctor "p99 up, qps flat" -m ./Llama-3.1-8B --gpu H100-80G',
            )
        found = diagnose(symptom, limit=limit)
        if not found:
            raise BadInput(
                f"no known symptom matches {symptom!r}",
                hint="`switchover doctor` lists them: " + ", ".join(s.key for s in SYMPTOMS),
            )
        if model is not None and any(d.wants_canary for d in found):
            figures = _canary(model, engine, gpu, gpu_mem_gib, tp, context, max_model_len)
            found = [d.model_copy(update={"canary": figures}) if d.wants_canary else d for d in found]
        if json_out:
            print_json([d.model_dump() for d in found])
            return
        for i, d in enumerate(found):
            _print(d, i < len(found) - 1)


def canary_figures(plan: CanaryPlan, gpu: str, command: str) -> CanaryFigures:
    """The figures of a canary plan, as doctor prints them."""
    return CanaryFigures(
        engine=plan.engine_version.label if plan.engine_version else plan.engine,
        gpu=gpu,
        context=plan.context,
        single_tokens=plan.single_tokens,
        copy_tokens=[c.tokens for c in plan.copies],
        sustainable_total={
            f"{r.canary_percent:g}": r.sustainable_total for r in plan.table if 0 < r.canary_percent < 100
        },
        command=command,
        notes=plan.warnings,
    )
