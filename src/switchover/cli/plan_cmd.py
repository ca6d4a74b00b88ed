"""`switchover plan ...`: model card, capacity, parallel layouts, canary, translate and drain grace (no GPU needed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from switchover import inputs
from switchover.cli import params
from switchover.cli.choose_cmd import choose_cmd
from switchover.cli.common import console, err_console, print_json
from switchover.cli.grace_cmd import grace_cmd
from switchover.cli.limits_cmd import limits_cmd
from switchover.cli.translate_cmd import translate_cmd
from switchover.errors import BadInput, CheckFailed

if TYPE_CHECKING:  # the planning machinery is imported by the command that runs, so `plan --help` stays fast
    from switchover.engines import EngineProfile
    from switchover.plan.canary import CanaryPlan
    from switchover.plan.fit import FitAdvice
    from switchover.plan.parallel import Layout

app = typer.Typer(
    help="Will it fit, with which flags, on which GPUs, and what did the old flags really mean?\n\n"
    "Example: switchover plan capacity -m ./Llama-3.1-8B -e vllm --gpu H100-80G --max-model-len 8192",
    no_args_is_help=True,
)

MODEL = typer.Option(
    ...,
    "--model",
    "-m",
    help="Model dir (config.json + safetensors), config.json, .gguf, a "
    "Hugging Face repo id in the local cache, or builtin:ID (a shipped config; a wrong ID lists "
    "them).",
)
ENGINE = typer.Option(
    "vllm",
    "--engine",
    "-e",
    help="vllm | sglang | trtllm | tgi | llamacpp, optionally at a "
    "release: vllm@0.6.3 (or vllm==0.6.3); default: the newest release known, and said.",
)
ENGINE_VERSION = typer.Option(
    None,
    "--engine-version",
    help="The engine release (instead of ENGINE@VERSION), e.g. "
    "0.11.2 or b3216: its overhead band, defaults and flags apply.",
)
GPU = typer.Option(None, "--gpu", help="GPU from the catalog, e.g. H100-80G (`switchover hw gpus`).")
GPU_MEM = typer.Option(None, "--gpu-mem-gib", help="Total GPU memory in GiB (instead of --gpu).", parser=params.GIB)
OVERHEAD = typer.Option(None, "--overhead", help="Override an overhead: activation_peak|non_torch|cuda_graph=GIB.")
JSON = params.json_flag()
PARALLEL = params.count(hi=inputs.MAX_PARALLEL)
TP = typer.Option(1, "--tp", help="Tensor parallel size.", parser=PARALLEL)
KV_DTYPE = typer.Option("auto", "--kv-dtype", help="KV cache dtype: auto, fp8, fp8_e5m2, q8_0, ...")
MAX_MODEL_LEN = typer.Option(
    None, "--max-model-len", help="Context limit (default: from config).", parser=params.TOKENS
)
CONTEXT = typer.Option(None, "--context", help="Request length for the concurrency figure.", parser=params.TOKENS)
MAX_LEGAL_ROWS = 30  # the best-ranked legal layouts; --json has them all
MAX_ILLEGAL_ROWS = 40  # a console table of thousands of illegal layouts helps no one; --json has them all


def _gpu(name: str | None, mem: float | None) -> tuple[float, str | None, str | None]:
    """(total GiB, catalog name, compute capability)."""
    from switchover.hardware import find_gpu

    if name:
        spec = find_gpu(name)
        return (mem if mem else spec.total_gib), spec.name, spec.compute_capability
    if mem:
        return mem, None, None
    raise BadInput("no GPU given", hint="pass --gpu H100-80G (see `switchover hw gpus`) or --gpu-mem-gib 80")


def gpu_of(name: str | None, mem: float | None) -> tuple[float, str | None, str | None]:
    """(total GiB, catalog name, compute capability) of --gpu / --gpu-mem-gib, for the commands that plan memory."""
    return _gpu(name, mem)


def engine_at(engine: str, engine_version: str | None) -> tuple[EngineProfile, str | None]:
    """`-e ENGINE[@VERSION]` (with --engine-version) as the profile at that release, for every planning command."""
    return _engine_at(engine, engine_version)


def _engine_at(engine: str, engine_version: str | None) -> tuple[EngineProfile, str | None]:
    """The profile of `-e ENGINE[@VERSION]` at that release (or --engine-version's); BadInput when the two disagree
    or a release is malformed."""
    from switchover.engines import load_profile
    from switchover.engines.compat import parse_pin
    from switchover.engines.versions import release_key

    pin = parse_pin(engine, "--engine")
    if engine_version is not None:
        try:
            release_key(engine_version)
        except ValueError as exc:
            raise BadInput(f"--engine-version {engine_version[:40]!r}: {exc}") from None
        if pin.version is not None and pin.version != engine_version:
            raise BadInput(f"--engine {engine[:60]!r} and --engine-version {engine_version[:40]!r} name two releases")
    version = engine_version or pin.version
    return load_profile(pin.engine, version), version


def _overheads(items: list[str] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items or []:
        name, _, value = item.partition("=")
        try:
            gib = float(value)
        except ValueError:
            raise BadInput(f"--overhead {item!r}: expected NAME=GIB, e.g. activation_peak=4.8") from None
        problem = inputs.number_problem(gib, lo=0, hi=inputs.MAX_GIB)
        if problem:
            raise BadInput(f"--overhead {name.strip()}: {problem}")
        out[name.strip()] = gib
    return out


@app.command("card")
def card_cmd(model: str = MODEL, json_out: bool = JSON) -> None:
    """Show what switchover reads from a model: layers by kind, attention, state, experts, weights.

    Example: switchover plan card -m ./Llama-3.1-8B-Instruct
    """
    from switchover.plan.choose_models import resolve_model

    card, _ = resolve_model(model)  # also builtin:ID, as every planning command reads it
    if json_out:
        print_json(card)
        return
    att = card.attention
    console.print(
        f"[bold]{escape(card.name)}[/] {escape(card.architecture)} ({card.family}), {card.num_layers} "
        f"layers, dtype {escape(card.dtype)}",
        highlight=False,
    )
    console.print(
        f"  attention: {att.num_heads} heads, {att.num_kv_heads} KV heads, head_dim {att.head_dim} "
        f"(from {att.head_dim_from})"
        + (f", MLA rank {att.kv_lora_rank}+{att.qk_rope_head_dim}" if att.kv_lora_rank else "")
        + (f", sliding window {att.sliding_window}" if att.sliding_window else ""),
        markup=False,
    )
    kinds = {k.value: card.count(k) for k in set(card.layers)}
    console.print(f"  layers: {kinds}")
    if card.state:
        console.print(
            f"  state: {card.state.kind}, conv {card.state.conv_elements} + ssm {card.state.ssm_elements} "
            "elements per layer per sequence"
        )
    if card.moe:
        console.print(f"  experts: {card.moe.num_experts} (top {card.moe.experts_per_token})")
    w = card.weights
    console.print(
        f"  weights: {w.total_bytes / 2**30:.2f} GiB, {w.params / 1e9:.3f} B params ({w.origin})"
        + (f", {w.scheme or w.quantization}" if w.quantization else ""),
        markup=False,
    )
    console.print(f"    from {escape(w.source or w.origin)}", highlight=False)
    if w.warning:
        console.print(f"  [yellow]warning:[/] {escape(w.warning)}")
    for note in card.notes:
        console.print(f"  [yellow]note:[/] {escape(note)}", highlight=False)


@app.command("capacity")
def capacity_cmd(
    model: str = MODEL,
    engine: str = ENGINE,
    gpu: str = GPU,
    gpu_mem_gib: float = GPU_MEM,
    tp: int = TP,
    pp: int = typer.Option(1, "--pp", help="Pipeline parallel size.", parser=PARALLEL),
    kv_dtype: str = KV_DTYPE,
    memory_fraction: float = typer.Option(
        None,
        "--memory-fraction",
        parser=params.FRACTION,
        help="The engine's own fraction knob (0-1], in its own meaning.",
    ),
    max_model_len: int = MAX_MODEL_LEN,
    context: int = CONTEXT,
    max_num_seqs: int = typer.Option(
        None, "--max-num-seqs", help="Scheduler cap (default: engine default).", parser=params.count()
    ),
    max_batched_tokens: int = typer.Option(
        None, "--max-batched-tokens", help="Tokens-per-step cap.", parser=params.TOKENS
    ),
    weights_gib: float = typer.Option(
        None, "--weights-gib", help="Weights per GPU from a log ('Model loading took').", parser=params.GIB
    ),
    slots: int = typer.Option(None, "--slots", help="llama.cpp -np.", parser=params.count()),
    engine_version: str = ENGINE_VERSION,
    free_gib: float = typer.Option(
        None,
        "--free-gib",
        parser=params.GIB,
        help="GPU memory free at start (SGLang budgets from it; default: total less the CUDA context).",
    ),
    eager: bool = typer.Option(False, "--eager", help="The engine runs without CUDA graphs (--enforce-eager)."),
    draft_layers: int = typer.Option(
        0,
        "--draft-layers",
        parser=params.count(lo=0, hi=64),
        help="Speculative decoding: MTP/EAGLE draft layers sharing the KV pool.",
    ),
    overhead: list[str] = OVERHEAD,
    json_out: bool = JSON,
) -> None:
    """KV pool, tokens, concurrency and the binding limit under ENGINE's memory semantics.

    Example: switchover plan capacity -m ./Llama-3.1-8B -e vllm --gpu H100-80G --max-model-len 8192
    """
    from rich.table import Table

    from switchover.hardware import check_capabilities
    from switchover.plan.capacity import Knobs, capacity
    from switchover.plan.choose_models import resolve_model
    from switchover.plan.fit import advise
    from switchover.plan.parallel import check_layout
    from switchover.plan.weight_format import weight_format

    card, qc = resolve_model(model)  # also builtin:ID; qc names the checkpoint's format
    profile, pinned = _engine_at(engine, engine_version)
    total, gpu_name, cc = _gpu(gpu, gpu_mem_gib)
    check_layout(card, profile, tp, pp)
    if free_gib is not None and free_gib > total:
        raise BadInput(f"--free-gib {free_gib:g} exceeds the GPU's {total:.2f} GiB")
    inputs_now: dict[str, Any] = dict(
        gpu_name=gpu_name,
        tp=tp,
        pp=pp,
        kv_dtype=kv_dtype,
        knobs=Knobs(memory_fraction=memory_fraction),
        max_model_len=max_model_len,
        context=context,
        max_num_seqs=max_num_seqs,
        max_batched_tokens=max_batched_tokens,
        weights_gib=weights_gib,
        overheads=_overheads(overhead),
        slots=slots,
        engine_version=pinned,
        eager=eager,
        free_gib=free_gib,
        draft_layers=draft_layers,
    )
    result = capacity(card, profile, total, **inputs_now)
    caps = check_capabilities(
        cc, model_dtype=card.dtype, kv_dtype=kv_dtype, quantization=card.weights.quantization, engine=profile
    )
    result.warnings.extend(f"{c.setting} needs {c.needs}, GPU is {c.have}: {c.consequence}" for c in caps)
    result.weight_format = weight_format(card, qc, profile.name, cc, pinned)
    if result.weight_format.loads is False:
        result.warnings.append(f"the weights do not load here: {result.weight_format.reason}")
    result.fit = advise(
        result,
        card,
        profile,
        lambda **change: capacity(card, profile, total, **{**inputs_now, **change}),
        tp=tp,
        pp=pp,
        kv_dtype=kv_dtype,
        memory_fraction=memory_fraction,
    )
    if json_out:
        print_json(result)
    else:
        inst = result.instance
        label = result.engine_version.label if result.engine_version else profile.name
        console.print(
            f"[bold]{escape(card.name)}[/] on {escape(label)} ({result.budget}), {total:.2f} GiB/GPU, TP={tp} PP={pp}",
            highlight=False,
        )
        console.print(
            f"  weights {inst.weights_gib:.2f} GiB/GPU ({card.weights.total_bytes / 2**30:.2f} GiB total): "
            f"{escape(result.weights_source)}",
            highlight=False,
        )
        wf = result.weight_format
        if wf is not None:
            console.print(
                f"  format {escape(wf.format)} ({escape(wf.named_from)}): {escape(wf.reason)}"
                + (f" (source: {escape(wf.source)})" if wf.source else "")
                + ("" if wf.verified or wf.loads is None else " (unverified)"),
                highlight=False,
            )
        if result.overhead_model is not None:
            m, o = result.overhead_model, result.overheads
            console.print(
                f"  overheads ({profile.name} {m.version}, band {m.band}): activation "
                f"{o.activation_peak_gib:.2f} (sampler {m.sampler_seqs} seqs x vocab, {m.profile_tokens} "
                f"batched tokens), non-torch {o.non_torch_gib:.2f}, CUDA graphs {o.cuda_graph_gib:.2f} GiB",
                highlight=False,
            )
        console.print(f"  {escape(inst.formula)} = [bold]{inst.kv_pool_gib:.2f} GiB[/]")
        console.print(
            f"  {result.layout.bytes_per_token:.0f} B/token/GPU, page {result.page_tokens}: "
            f"{result.num_blocks} blocks = [bold]{result.tokens}[/] tokens"
        )
        if result.range is not None:
            r = result.range
            high = f"{r.high_tokens:,}" if r.high_tokens is not None else "unbounded"
            console.print(
                f"  likely range {r.low_tokens:,} - {high} tokens (median error {r.median_abs_error:.1%}; {r.source})",
                highlight=False,
            )
        elif result.range_missing:
            console.print(f"  likely range: {result.range_missing}", highlight=False)
        console.print(
            f"  at {result.context} tokens: KV holds {result.kv_concurrency:.2f} requests; "
            f"max concurrency {result.max_concurrency} (binding: [bold]{result.binding_limit}[/])"
        )
        table = Table("max_model_len", "KV concurrency", "concurrency", "binding")
        for row in result.table:
            table.add_row(str(row.max_model_len), f"{row.kv_concurrency:.2f}", str(row.concurrency), row.binding)
        console.print(table)
        for w in result.warnings:
            console.print(f"  [yellow]warning:[/] {escape(w)}", highlight=False)
        _print_fit(result.fit)
    if not result.fit.fits:
        raise CheckFailed(
            result.fit.verdict if json_out else "does not fit (the verdict and what would make it fit are above)"
        )


def _print_fit(fit: FitAdvice) -> None:
    """The verdict line, and each change that would make it fit with the figures after it."""
    console.print(
        f"[bold]{'FITS' if fit.fits else 'DOES NOT FIT'}[/]: {escape(fit.verdict.split(': ', 1)[-1])}", highlight=False
    )
    if fit.fits:
        return
    if not fit.options:
        console.print(
            "  to make it fit: no single change among more GPUs (up to 8), an FP8 KV cache, a higher "
            "memory knob, a quantized checkpoint or a shorter context is enough",
            highlight=False,
        )
    for o in fit.options:
        console.print(
            f"  to make it fit: {escape(o.change)} [dim]({escape(o.flags)})[/]: {o.tokens:,} tokens, "
            f"{o.concurrency} at once" + (f"; {escape(o.note)}" if o.note else ""),
            highlight=False,
        )


@app.command("parallel")
def parallel_cmd(
    model: str = MODEL,
    engine: str = ENGINE,
    gpu: str = GPU,
    gpu_mem_gib: float = GPU_MEM,
    gpus: int = typer.Option(
        None,
        "--gpus",
        help=f"Number of GPUs (1-{inputs.MAX_GPUS}; default: the fingerprint's).",
        parser=params.count(hi=inputs.MAX_GPUS),
    ),
    context: int = CONTEXT,
    max_model_len: int = MAX_MODEL_LEN,
    kv_dtype: str = KV_DTYPE,
    overhead: list[str] = OVERHEAD,
    json_out: bool = JSON,
    show_illegal: bool = typer.Option(True, "--illegal/--no-illegal", help="List illegal layouts and why."),
    fingerprint: str = typer.Option(
        None,
        "--fingerprint",
        help="Host fingerprint JSON (`switchover hw fingerprint "
        "--json`) or catalog:NAMExN: NVLink or PCIe between the GPUs (TP over PCIe "
        "ranks last).",
    ),
) -> None:
    """Every TP x PP x DP (x EP) layout for N GPUs: legal ones ranked by KV per replica (TP across PCIe last, with
    its reason), illegal ones with reasons.

    Example: switchover plan parallel -m ./Qwen3-32B -e vllm --fingerprint host.json
    """
    from rich.table import Table

    from switchover.hardware import find_gpu, load_fingerprint
    from switchover.plan.choose_models import resolve_model
    from switchover.plan.interconnect import host_from
    from switchover.plan.overhead import resolve_version
    from switchover.plan.parallel import plan_layouts

    card, _ = resolve_model(model)  # also builtin:ID, the configs `plan choose` ships
    profile, pinned = _engine_at(engine, None)
    release = resolve_version(profile, pinned)
    host = host_from(
        load_fingerprint(fingerprint) if fingerprint else None,
        gpu_name=gpu and find_gpu(gpu).name,
        total_gib=gpu_mem_gib,
        gpus=gpus,
    )
    total, gpu_name, _ = _gpu(host.gpu_name, host.total_gib) if fingerprint else _gpu(gpu, gpu_mem_gib)
    layouts = plan_layouts(
        card,
        profile,
        host.gpus,
        total,
        gpu_name=gpu_name,
        context=context,
        max_model_len=max_model_len,
        kv_dtype=kv_dtype,
        overheads=_overheads(overhead),
        interconnect=host.interconnect,
        engine_version=release.version,
    )
    ic = host.interconnect
    if json_out:
        print_json([x.model_dump() for x in layouts])
        for line in (ic.facts + ic.warnings) if ic else []:  # the JSON stays a list of layouts
            err_console.print(f"interconnect: {line}", markup=False, highlight=False)
        if release.note:
            err_console.print(f"engine: {release.note}", markup=False, highlight=False)
        if card.weights.warning:  # the JSON stays a list of layouts; the caveat goes to stderr
            err_console.print(f"warning: {card.weights.warning}", markup=False, highlight=False)
        _fail_unless_one_fits(layouts, host.gpus)
        return
    per_request = (
        f"{context:,} tokens (--context)"
        if context
        else (
            f"{max_model_len:,} tokens (--max-model-len)"
            if max_model_len
            else "the model's full context (pass --context for another length)"
        )
    )
    table = Table(
        "TP",
        "PP",
        "DP",
        "EP",
        "legal",
        "KV tokens/replica",
        "conc/replica",
        "total conc",
        "notes",
        title=f"{host.gpus} GPU(s); concurrency counts requests of {per_request}",
    )
    legal = [x for x in layouts if x.legal]
    illegal = [x for x in layouts if not x.legal]
    shown = legal[:MAX_LEGAL_ROWS] + (illegal[:MAX_ILLEGAL_ROWS] if show_illegal else [])
    for x in shown:
        table.add_row(
            str(x.tp),
            str(x.pp),
            str(x.dp),
            str(x.ep),
            "yes" if x.legal else "[red]no[/]",
            str(x.kv_tokens_per_replica or ""),
            str(x.concurrency_per_replica or ""),
            str(x.total_concurrency or ""),
            escape("; ".join(x.reasons)),
        )
    console.print(table)
    for line in ic.facts if ic else []:
        console.print(f"  interconnect: {escape(line)}", highlight=False)
    for line in ic.warnings if ic else []:
        console.print(f"  [yellow]interconnect:[/] {escape(line)}", highlight=False)
    if release.note:
        console.print(f"  [yellow]engine:[/] {escape(release.note)}", highlight=False)
    if len(legal) > MAX_LEGAL_ROWS:
        console.print(
            f"... and {len(legal) - MAX_LEGAL_ROWS} more legal layouts, ranked lower (--json lists every one)"
        )
    if show_illegal and len(illegal) > MAX_ILLEGAL_ROWS:
        console.print(f"... and {len(illegal) - MAX_ILLEGAL_ROWS} more illegal layouts (--json lists every one)")
    if card.weights.warning:
        console.print(f"  [yellow]warning:[/] {escape(card.weights.warning)}", highlight=False)
    _fail_unless_one_fits(layouts, host.gpus)


def _fail_unless_one_fits(layouts: list[Layout], gpus: int) -> None:
    """Exit 1 (as `plan capacity` does) when no layout is legal: nothing fits on these GPUs."""
    if not any(x.legal for x in layouts):
        first = next((r for x in layouts for r in x.reasons), "no layout")
        raise CheckFailed(
            f"no layout fits on {gpus} GPU(s): {first}"
            + (f" (and {len(layouts) - 1} more layouts illegal)" if len(layouts) > 1 else "")
        )


@app.command("canary")
def canary_cmd(
    model: str = MODEL,
    engine: str = ENGINE,
    gpu: str = GPU,
    gpu_mem_gib: float = GPU_MEM,
    new_model: str = typer.Option(None, "--new-model", help="The canary's model (default: the same)."),
    context: int = typer.Option(8192, "--context", help="Request length for concurrency.", parser=params.TOKENS),
    max_model_len: int = MAX_MODEL_LEN,
    engine_version: str = ENGINE_VERSION,
    tp: int = TP,
    kv_dtype: str = KV_DTYPE,
    other_gib: float = typer.Option(
        0.0, "--other-gib", help="Memory already used by other processes.", parser=params.non_negative(inputs.MAX_GIB)
    ),
    weights_gib: float = typer.Option(None, "--weights-gib", help="Weights per GPU from a log.", parser=params.GIB),
    overhead: list[str] = OVERHEAD,
    json_out: bool = JSON,
) -> None:
    """Old and new copies on one GPU: each copy's pool, the flags that make both start, capacity by canary %.

    Example: switchover plan canary -m ./Llama-3.1-8B -e vllm --gpu H100-80G --context 8192
    """
    from rich.table import Table

    from switchover.plan.canary import canary_plan
    from switchover.plan.choose_models import resolve_model
    from switchover.plan.parallel import check_layout

    old, _ = resolve_model(model)  # also builtin:ID, as `plan capacity` reads it
    new = resolve_model(new_model)[0] if new_model else None
    profile, pinned = _engine_at(engine, engine_version)
    total, gpu_name, _ = _gpu(gpu, gpu_mem_gib)
    if other_gib >= total:
        raise BadInput(
            f"--other-gib {other_gib:g} leaves nothing of the GPU's {total:.2f} GiB",
            hint="--other-gib is memory other processes already hold on the GPU",
        )
    check_layout(old, profile, tp, 1)
    plan = canary_plan(
        old,
        profile,
        total,
        new=new,
        tp=tp,
        kv_dtype=kv_dtype,
        context=context,
        max_model_len=max_model_len,
        other_residents_gib=other_gib,
        overheads=_overheads(overhead),
        weights_gib=weights_gib,
        new_weights_gib=weights_gib if new is None else None,
        gpu_name=gpu_name,
        engine_version=pinned,
    )
    if json_out:
        print_json(plan)
        _fail_unless_both_start(plan)
        return
    if plan.engine_version is not None:
        console.print(f"{escape(plan.engine_version.label)} on {total:.2f} GiB", highlight=False)
    console.print(f"single copy: {plan.single_tokens} tokens, {plan.single_concurrency} requests of {context}")
    for c in plan.copies:
        console.print(
            f"  {c.role} ({escape(c.model)}): {escape(' '.join(c.flags)) or '(defaults)'} -> "
            f"{c.instance.kv_pool_gib:.2f} GiB, {c.tokens} tokens, {c.concurrency} requests"
            + ("" if c.instance.starts else f" [red]{escape(c.instance.problem or '')}[/]"),
            highlight=False,
        )
    table = Table("canary %", "copies", "old conc", "new conc", "sustainable total")
    for r in plan.table:
        table.add_row(
            f"{r.canary_percent:g}",
            str(r.copies),
            str(r.old_concurrency or "-"),
            str(r.new_concurrency or "-"),
            str(r.sustainable_total),
        )
    console.print(table)
    for w in plan.warnings:
        console.print(f"  [yellow]note:[/] {escape(w)}", highlight=False)
    _fail_unless_both_start(plan)


def _fail_unless_both_start(plan: CanaryPlan) -> None:
    """Exit 1 (as `plan capacity` does) when a copy cannot start: the canary does not fit."""
    stuck = [f"{c.role}: {c.instance.problem}" for c in plan.copies if not c.instance.starts]
    if stuck:
        raise CheckFailed("the two copies do not fit: " + "; ".join(stuck))


app.command("grace")(grace_cmd)  # `plan grace` lives in cli/grace_cmd.py


app.command("limits")(limits_cmd)  # `plan limits` lives in cli/limits_cmd.py
app.command("choose")(choose_cmd)  # `plan choose` lives in cli/choose_cmd.py
app.command("translate")(translate_cmd)  # `plan translate` lives in cli/translate_cmd.py
