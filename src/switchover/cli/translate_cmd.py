"""`switchover plan translate`: a launch read as its engine reads it at its release, rendered for another engine and
release (and other GPUs), every input flag in one list: translated, the target's default, passed through, or lost."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from switchover import inputs
from switchover.cli import params
from switchover.cli.common import console, print_json
from switchover.errors import BadInput, CheckFailed

if TYPE_CHECKING:  # the translation machinery is imported when the command runs, so `plan --help` stays fast
    from switchover.plan.translate import Translation

LAUNCH_MAX_BYTES = 256 * 1024


def translate_cmd(
    launch: str = typer.Argument(
        ...,
        help="The old launch: a command line or script, a `docker run` line, a "
        "Kubernetes container (YAML with args), a YAML of settings, or @FILE holding one.",
    ),
    target: str = typer.Option(
        ...,
        "--to",
        help="Engine to translate to, optionally with its version: sglang, "
        "sglang@0.5.5, vllm==0.11.0 (default version: the newest release read, and said).",
    ),
    source: str = typer.Option(
        None,
        "--from",
        help="Engine of the old launch, optionally with its version: "
        "vllm@0.6.3 (default: read from the command or the image tag).",
    ),
    from_version: str = typer.Option(None, "--from-version", help="Version of the old launch's engine."),
    to_version: str = typer.Option(None, "--to-version", help="Version of the target engine."),
    files: list[str] = typer.Option(
        None,
        "--file",
        help="NAME=PATH: a file the launch names (a --config or "
        "--extra_llm_api_options YAML, a docker --env-file), read in its place.",
    ),
    model: str = typer.Option(
        None,
        "--model",
        "-m",
        help="Model dir or builtin:ID: converts the memory knob with --gpu, and sizes a hardware move.",
    ),
    gpu: str = typer.Option(None, "--gpu", "--from-gpu", help="The old launch's GPU (`switchover hw gpus`)."),
    gpu_mem_gib: float = typer.Option(
        None, "--gpu-mem-gib", help="Total GPU memory in GiB (instead of --gpu).", parser=params.GIB
    ),
    to_gpu: str = typer.Option(None, "--to-gpu", help="Move to this GPU (default: the old launch's)."),
    to_gpus: int = typer.Option(
        None,
        "--to-gpus",
        parser=params.count(hi=inputs.MAX_GPUS),
        help="Move to this many GPUs: TP/PP/DP chosen with plan parallel.",
    ),
    bench: str = typer.Option(
        None,
        "--bench",
        parser=params.PATH,
        help="A bench run of the target engine: adds "
        "which cap bound and the flag to raise (docs/bench.md#binding-cap).",
    ),
    json_out: bool = params.json_flag(),
) -> None:
    """Translate a launch between engines and versions: every input flag is translated, already the target's
    default, passed through, or lost (with why); the target's flags are the ones its version has.

    With --model and --gpu the memory fraction is converted to the target's meaning (same KV pool); with --to-gpu /
    --to-gpus the layout, memory knob, context and concurrency are re-derived for the new GPUs.
    Exit codes: 0 every flag carried over; 1 a flag is refused by the old engine's version or lost; 2 bad input.

    Example: switchover plan translate --from vllm@0.6.3 "vllm serve M --max-model-len 8192 -tp 2" --to sglang@0.5.5

    Example: switchover plan translate @run.sh --to sglang -m ./L70B --gpu A100-80G --to-gpu H100-80G --to-gpus 2

    Example: switchover plan translate "llama-server.exe -m E:\\m.gguf -c 8192" --to vllm --json
    """
    from switchover.hardware import find_gpu
    from switchover.plan.choose_models import resolve_model
    from switchover.plan.launch import detect_engine
    from switchover.plan.translate import HardwareMove, bench_advice, translate
    from switchover.textfile import read_text

    if launch.startswith("@"):
        launch = read_text(launch[1:], max_bytes=LAUNCH_MAX_BYTES, what="launch command or YAML config")
    src, src_version = _engine_ref("--from", source, from_version)
    dst, dst_version = _engine_ref("--to", target, to_version)
    assert dst is not None  # --to is required
    if src is None:
        found = detect_engine(launch)
        if found is None:
            raise BadInput(
                "--from not given and the launch names no engine",
                hint="pass --from vllm (or sglang, tgi, llamacpp, trtllm), with @VERSION when you know it",
            )
        src = found[0]
    card = resolve_model(model)[0] if model else None
    total = (gpu_mem_gib or find_gpu(gpu).total_gib) if card is not None and (gpu or gpu_mem_gib) else None
    moving = to_gpu is not None or to_gpus is not None
    move = (
        HardwareMove(from_gpu=gpu and find_gpu(gpu).name, to_gpu=to_gpu and find_gpu(to_gpu).name, to_gpus=to_gpus)
        if moving
        else None
    )
    result = translate(
        src,
        launch,
        dst,
        card=card,
        gpu_total_gib=total,
        gpu_name=gpu and find_gpu(gpu).name,
        source_version=src_version,
        target_version=dst_version,
        files=_named_files(files),
        move=move,
    )
    if bench is not None:
        bench_advice(result, str(bench))
    if json_out:
        print_json(result)
    else:
        _print_translation(result)
    refused = [f.input.typed for f in result.flags if f.input.validity == "refused"]
    lost = [f.input.typed for f in result.flags if f.outcome == "lost" and f.input.validity != "refused"]
    if refused or lost:
        raise CheckFailed(
            "; ".join(
                part
                for part in (
                    f"refused by {result.source_engine} {result.source_version or ''}: {', '.join(refused)}".replace(
                        "  ", " "
                    )
                    if refused
                    else "",
                    f"lost: {', '.join(lost)}" if lost else "",
                )
                if part
            )
        )


def _engine_ref(option: str, text: str | None, version: str | None) -> tuple[str | None, str | None]:
    """ENGINE, ENGINE@VERSION or ENGINE==VERSION, and a --from-version/--to-version (not both)."""
    from switchover.engines.versions import release_key, split_engine_ref

    if text is None:
        if version is not None:
            raise BadInput(f"{option}-version needs {option}")
        return None, None
    try:
        engine, inline = split_engine_ref(text)
        if version is not None:
            release_key(version)
    except ValueError as exc:
        raise BadInput(f"{option} {text[:60]!r}: {exc}") from None
    if inline and version and inline != version:
        raise BadInput(f"{option} {text!r} and {option}-version {version!r} disagree")
    return engine, inline or version


def _named_files(items: list[str] | None) -> dict[str, str]:
    from switchover.textfile import read_text

    out: dict[str, str] = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise BadInput(f"--file {item!r}: expected NAME=PATH (NAME as the launch writes it)")
        out[name] = read_text(path, max_bytes=LAUNCH_MAX_BYTES, what=f"--file {name}")
    return out


def _api_words(result: Any, item: Any) -> str:
    """One API difference in words ("default_sampling: vllm temperature 1, top_p 1 -> sglang temperature 1, ..."),
    read from both engine profiles; the item's own text when a profile cannot say."""
    from switchover.engines.profile import load_profile
    from switchover.words import plain

    fact = item.intent.removeprefix("api.")
    try:
        a = getattr(load_profile(result.source_engine, result.source_version).api, fact)
        b = getattr(load_profile(result.target_engine, result.target_version).api, fact)
    except (BadInput, AttributeError):  # an engine or fact the profiles do not know: what the translation said
        return f"{item.intent}: {item.detail}"
    return f"{fact}: {result.source_engine} {plain(a)} -> {result.target_engine} {plain(b)}"


def _print_translation(result: Translation) -> None:
    """The command, its YAML, one row per input flag, and what was derived, to do first, or behaves differently."""
    from rich.table import Table

    from switchover.words import plain

    for label, note in (("from", result.source_note), ("to", result.target_note), *(("note", n) for n in result.notes)):
        if note:
            console.print(f"[yellow]{label}:[/] {escape(note)}", highlight=False)
    for step in result.steps:
        console.print(f"[bold]first:[/] {escape(step)}", highlight=False)
    console.print(f"[bold]{escape(result.command)}[/]", highlight=False)
    if result.yaml_config:
        import yaml

        console.print(
            "# extra_llm_api_options.yaml\n" + yaml.safe_dump(result.yaml_config, sort_keys=False),
            highlight=False,
            markup=False,
        )
    table = Table("input", "via", "outcome", "becomes", "why")
    for f in result.flags:
        shown = f.input.typed + ("" if f.input.value is None else f" {f.input.value}")
        outcome = f.outcome + (" (refused)" if f.input.validity == "refused" else "")
        table.add_row(
            escape(shown[:60]),
            f.input.via,
            escape(outcome),
            escape(" ".join(f.rendered)[:60]),
            escape((f.detail or "")[:200]),
        )
    console.print(table)
    for d in result.derived:
        console.print(f"  derived {escape(d.what)} = {escape(plain(d.value))}: {escape(d.why)}", highlight=False)
    for item in result.api:
        console.print(f"  api {escape(_api_words(result, item))}", highlight=False)
