"""Moving a launch to other GPUs (and to llama.cpp's file format): the layout chosen with `plan parallel`, the memory
knob, context and concurrency re-derived with the one capacity model (`plan capacity`), the GPUs the process sees,
and for an engine that loads converted files (llama.cpp: GGUF) the conversion step, a quantization that fits, and
all layers offloaded to the GPU. Every value set here says what changed and why (`derived`, or the flag's detail)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, Field

from switchover.hardware import find_gpu
from switchover.plan.capacity import capacity
from switchover.plan.launch import LaunchIntent
from switchover.plan.parallel import Layout, plan_layouts
from switchover.plan.translate_values import Derived, Render, Result

_PARALLEL = (("tensor_parallel_size", "tp"), ("pipeline_parallel_size", "pp"), ("data_parallel_size", "dp"))
_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 1.0625, "Q4_K_M": 0.5625}  # bytes per parameter (GGUF)
_ALL_LAYERS = 999  # llama.cpp offloads min(n, layers): any count past the model's layers means all of them


class HardwareMove(BaseModel):
    """Where the launch runs now and where it moves (GPU names from `switchover hw gpus`)."""

    from_gpu: str | None = Field(default=None, description="the source's GPU")
    to_gpu: str | None = Field(default=None, description="the target's GPU (default: the source's)")
    to_gpus: int | None = Field(default=None, description="how many target GPUs (default: as many as the source)")


def _source_gpus(intent: LaunchIntent) -> int:
    if intent.gpu_count:
        return intent.gpu_count
    size = 1
    for name, _ in _PARALLEL:
        value = intent.values.get(name)
        size *= value if isinstance(value, int) and value > 0 else 1
    return size


def _set(r: Render, intent: str, value: Any, why: str, source: str | None = None) -> None:
    """A value for the target: the input flag's detail says why it changed; with no input flag it is derived."""
    before = r.values.get(intent)
    r.values[intent] = value
    r.forced.add(intent)
    if before is None:
        r.derived.append(Derived(what=intent, value=value, why=why, source=source))
    else:
        r.details[intent] = f"{before} -> {value}: {why}" if before != value else why


def _layout(r: Render, intent: LaunchIntent, gpus: int, total: float, gpu_name: str | None) -> Layout | None:
    assert r.card is not None
    mml = intent.values.get("max_context_length")
    layouts = plan_layouts(
        r.card,
        r.dst,
        gpus,
        total,
        gpu_name=gpu_name,
        max_model_len=mml if isinstance(mml, int) and mml > 0 else None,
        kv_dtype=str(intent.values.get("kv_cache_dtype", "auto")),
    )
    legal = [x for x in layouts if x.legal]
    pp = intent.values.get("pipeline_parallel_size")
    shaped = [x for x in legal if x.pp == (pp if isinstance(pp, int) else 1) and x.gpus_used == gpus]
    legal = shaped + [x for x in legal if x not in shaped]  # the source's shape first, then plan parallel's order
    if not legal:
        reasons = "; ".join(sorted({why for x in layouts for why in x.reasons}))[:300]
        r.notes.append(
            f"no layout of {r.card.name} fits {gpus} x {gpu_name or f'{total:.0f} GiB'} in {r.dst.name}: {reasons}"
        )
        return None
    return legal[0]


def move_hardware(r: Render, intent: LaunchIntent, move: HardwareMove) -> None:
    """Layout, memory knob, context and concurrency for the target's GPUs (needs the model card)."""
    if r.card is None:
        r.notes.append(
            "hardware move: pass --model (a model dir or builtin:ID) to choose the layout and re-derive "
            "memory, context and concurrency; the source's values are kept"
        )
        return
    gpu = move.to_gpu or move.from_gpu
    spec = find_gpu(gpu) if gpu else None
    total = spec.total_gib if spec is not None else r.gpu_total_gib
    if total is None:
        r.notes.append("hardware move: no target GPU (--to-gpu): layout and memory not re-derived")
        return
    gpu_name = spec.name if spec is not None else None
    gpus = move.to_gpus or _source_gpus(intent)
    where = f"{gpus} x {gpu_name or f'{total:.0f} GiB'}"
    layout = _layout(r, intent, gpus, total, gpu_name)
    if layout is None:
        return
    why = (
        f"plan parallel's first legal layout for {where}: TP={layout.tp} PP={layout.pp} DP={layout.dp} "
        f"EP={layout.ep}, {layout.kv_tokens_per_replica} KV tokens per replica"
    )
    for name, attr in _PARALLEL:
        value = getattr(layout, attr)
        flag = r.dst.flags.get(name)
        if name == "data_parallel_size" and value > 1 and (flag is None or not flag.flag):
            r.derived.append(
                Derived(
                    what="replicas",
                    value=value,
                    why=f"{why}; {r.dst.name} has no data-parallel flag: run {value} instances, one per GPU group",
                    source=flag.source if flag else None,
                )
            )
        elif value > 1 or isinstance(r.values.get(name), int):
            _set(r, name, value, why)
    if layout.ep > 1:
        _set(
            r,
            "expert_parallel",
            layout.ep if r.dst.flags.get("expert_parallel") and r.dst.flags["expert_parallel"].kind == "int" else True,
            why,
        )
    elif "expert_parallel" in r.values:
        _set(r, "expert_parallel", False if isinstance(r.values["expert_parallel"], bool) else 1, why)
    if "CUDA_VISIBLE_DEVICES" in intent.env or intent.gpu_count is not None:
        r.devices = ",".join(str(i) for i in range(layout.gpus_used))
        r.details["visible_devices"] = f"{intent.env.get('CUDA_VISIBLE_DEVICES', '')} -> {r.devices}: {where}"
    _memory(r, intent, layout, total, gpu_name, where)


def _memory(r: Render, intent: LaunchIntent, layout: Layout, total: float, gpu_name: str | None, where: str) -> None:
    """The memory knob, context and concurrency on the new GPUs, from the one capacity model."""
    assert r.card is not None
    mml = intent.values.get("max_context_length")
    mml = mml if isinstance(mml, int) and mml > 0 else None
    seqs = intent.values.get("max_concurrent_sequences")
    seqs = seqs if isinstance(seqs, int) and seqs > 0 else None
    res = capacity(
        r.card,
        r.dst,
        total,
        gpu_name=gpu_name,
        tp=layout.tp,
        pp=layout.pp,
        kv_dtype=str(intent.values.get("kv_cache_dtype", "auto")),
        max_model_len=mml,
        max_num_seqs=seqs if r.dst.memory.budget != "explicit_context" else None,
        engine_version=r.dst.resolved_version,
    )
    source = r.dst.memory.source
    context = res.max_model_len
    fits = [row for row in res.table if row.kv_concurrency >= 1]
    if res.kv_concurrency < 1 and fits:
        context = max(row.max_model_len for row in fits)
        _set(
            r,
            "max_context_length",
            context,
            f"the {where} KV pool ({res.tokens} tokens) does not hold one "
            f"request of {res.max_model_len}; {context} is the longest that fits",
            source,
        )
    r.values.pop("kv_cache_explicit_size", None)
    if r.dst.memory.budget == "explicit_context":
        if not isinstance(r.values.get("max_context_length"), int):
            _set(
                r,
                "max_context_length",
                context,
                f"the model's context ({context}): slots reserve their whole "
                "context, so it is said, not left to the model",
                source,
            )
        slots = _slots_that_fit(r, layout, total, gpu_name, context, seqs or 4)
        _set(
            r,
            "max_concurrent_sequences",
            slots,
            f"{slots} slots of {context} tokens fit on {where} (plan capacity: each slot holds its whole context)",
            source,
        )
        r.values.pop("gpu_memory_fraction", None)
        ctx_flag = r.dst.flags["max_context_length"].flag if "max_context_length" in r.dst.flags else "its context"
        r.results["gpu_memory_fraction"] = Result(
            "translated",
            detail=f"re-derived for {where}: {r.dst.name} sizes "
            f"its KV by {ctx_flag} (context x slots), not by a fraction",
            source=source,
        )
        return
    fraction = res.instance.fraction_used
    if fraction is not None and r.dst.flags.get("gpu_memory_fraction") is not None:
        _set(
            r,
            "gpu_memory_fraction",
            round(fraction, 3),
            f"re-derived for {where}: {res.instance.kv_pool_gib:.1f} GiB KV pool, {res.tokens} tokens ({res.budget})",
            source,
        )
    r.derived.append(
        Derived(
            what="expected_concurrency",
            value=res.max_concurrency,
            why=f"requests of {res.context} tokens {r.dst.name} runs at once on {where} (binding: "
            f"{res.binding_limit}); plan capacity gives the table",
            source=source,
        )
    )


def _slots_that_fit(r: Render, layout: Layout, total: float, gpu_name: str | None, context: int, asked: int) -> int:
    """The most slots (up to `asked`) whose contexts the GPU holds beside the weights, by the capacity model."""
    assert r.card is not None
    lo, hi = 0, asked
    while lo < hi:
        mid = (lo + hi + 1) // 2
        res = capacity(
            r.card,
            r.dst,
            total,
            gpu_name=gpu_name,
            tp=layout.tp,
            pp=layout.pp,
            max_model_len=context,
            slots=mid,
            engine_version=r.dst.resolved_version,
        )
        if res.instance.starts:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        r.notes.append(f"not one slot of {context} tokens fits beside the weights: lower the context")
    return max(lo, 1)


def gguf_step(r: Render, intent: LaunchIntent, move: HardwareMove | None) -> None:
    """A target that loads converted files: the conversion step (with a quantization that fits) and the file as the
    model; every layer on the GPU when the source engine ran on GPUs."""
    conv = r.dst.launch.conversion
    if conv is None:
        return
    if "gpu_layers" in r.dst.flags and "gpu_layers" not in r.values and "gpu_layers" not in r.src.flags:
        r.values["gpu_layers"] = _ALL_LAYERS
        r.derived.append(
            Derived(
                what="gpu_layers",
                value=_ALL_LAYERS,
                why=f"{r.src.name} ran every layer on the GPU; "
                f"{r.dst.name} offloads the first N layers (N past the model's layers: all)",
                source=r.dst.flags["gpu_layers"].source,
            )
        )
    if r.model.endswith(conv.loads) or intent.model is None:
        return
    outtype, why = _quantization(r, intent, move, conv.outtypes)
    stem = PurePosixPath(r.model.rstrip("/")).name or "model"
    gguf = f"{stem}-{outtype}{conv.loads}"
    if outtype in conv.outtypes:
        r.steps.append(conv.command.format(model=r.model, out=gguf, outtype=outtype))
    else:  # the converter writes 16-bit, the quantizer the rest
        f16 = f"{stem}-f16{conv.loads}"
        r.steps.append(conv.command.format(model=r.model, out=f16, outtype="f16"))
        if conv.quantize:
            r.steps.append(conv.quantize.format(src=f16, out=gguf, type=outtype))
    r.derived.append(Derived(what="quantization", value=outtype, why=why, source=conv.source))
    r.details["model"] = f"{r.model} is a Hugging Face checkpoint: {r.dst.name} loads {gguf} from the steps"
    r.model = gguf


def _quantization(r: Render, intent: LaunchIntent, move: HardwareMove | None, outtypes: list[str]) -> tuple[str, str]:
    """A GGUF type: the checkpoint's precision where it fits the target's GPU memory, smaller when it does not."""
    card = r.card
    quant = (card.weights.quantization or "").lower() if card else str(intent.values.get("quantization", "")).lower()
    if any(q in quant for q in ("awq", "gptq", "int4", "nf4", "4bit", "bitsandbytes")):
        start, why = "Q4_K_M", f"the source checkpoint is 4-bit ({quant})"
    elif any(q in quant for q in ("fp8", "int8", "w8a8", "8bit")):
        start, why = "q8_0", f"the source checkpoint is 8-bit ({quant})"
    else:
        dtype = (card.dtype if card else "bfloat16").lower()
        start = "bf16" if "bf16" in dtype or "bfloat16" in dtype else "f16"
        start = start if start in outtypes else "f16"
        why = f"the checkpoint's own precision ({dtype})"
    gpu = (move.to_gpu or move.from_gpu) if move else None
    spec = find_gpu(gpu) if gpu else None
    total = spec.total_gib if spec else r.gpu_total_gib
    if card is None or not total:
        return start, why + "; no GPU given, so not checked against its memory"
    gpus = (move.to_gpus if move and move.to_gpus else None) or _source_gpus(intent)
    budget = total * gpus * 0.9  # room left for the KV cache and buffers
    order = ["bf16", "f16", "q8_0", "Q4_K_M"]
    for kind in order[order.index(start) :] if start in order else [start]:
        need = card.weights.params * _BYTES[kind] / 2**30
        if need <= budget or kind == "Q4_K_M":
            if kind != start:
                why += f"; {start} weights do not fit {gpus} x {total:.0f} GiB with room for the KV cache: {kind}"
            return kind, why + f" ({need:.1f} GiB of weights)"
    return start, why
