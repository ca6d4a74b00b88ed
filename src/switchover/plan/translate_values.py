"""Per-intent conversions for `plan translate`: what a value means in the source and how the target says the same
(a memory fraction of total vs of free memory, an EP switch vs an EP width, a chunk size vs on/off, KV dtype names,
llama.cpp's context shared by its slots, values with a shared meaning such as "the model's own context"). They work on
the rendering state (`Render`) before values are placed; none branches on an engine name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from switchover.engines import EngineProfile, FlagSpec
from switchover.engines.releases import FlagSpan, ReleaseView
from switchover.model.card import ModelCard
from switchover.plan.equivalence import equivalent_memory_knob

Outcome = Literal["translated", "default_matches", "lost", "passed_through"]
LostKind = Literal["no_equivalent", "different_meaning", "different_default", "not_understood", "refused"]


class Derived(BaseModel):
    """A value set for the target that no input flag carried (metrics switched on, a layout for new GPUs ...)."""

    what: str
    value: Any = None
    why: str
    source: str | None = Field(default=None, description="URL or document behind the rule")


@dataclass
class Result:
    """What became of one intent in the target."""

    outcome: Outcome
    rendered: list[str] = field(default_factory=list)
    detail: str | None = None
    source: str | None = None
    kind: LostKind | None = None


@dataclass
class Render:
    """The rendering state: values still to place, the target's argv/env/YAML, and what became of each intent."""

    src: EngineProfile
    dst: EngineProfile
    dview: ReleaseView | None
    target_label: str
    values: dict[str, Any]
    card: ModelCard | None = None
    gpu_total_gib: float | None = None
    gpu_name: str | None = None  # the source's GPU from the catalog (its overheads), when named
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    yaml_cfg: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Result] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)  # intent -> why its value was converted, not copied
    derived: list[Derived] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    forced: set[str] = field(default_factory=set)  # intents placed even where their meanings differ (slots)
    model: str = "MODEL"
    gpu_count: int | None = None  # GPUs the source launch sees
    devices: str | None = None  # CUDA_VISIBLE_DEVICES for the target, when a hardware move sets it
    json_objs: dict[str, dict[str, Any]] = field(default_factory=dict)  # JSON-valued flag -> its object
    json_members: dict[str, list[str]] = field(default_factory=dict)  # JSON-valued flag -> intents placed in it
    follows: dict[str, str | tuple[str, ...]] = field(default_factory=dict)  # intent -> the intent(s) rendering it

    def lose(self, intent: str, kind: LostKind, detail: str, source: str | None = None) -> None:
        """The intent does not carry over: why, and where to read it."""
        self.values.pop(intent, None)
        self.results[intent] = Result("lost", detail=detail, source=source, kind=kind)

    def default(self, intent: str, detail: str, source: str | None = None) -> None:
        """The target does the same by default: nothing to render."""
        self.values.pop(intent, None)
        self.results[intent] = Result("default_matches", detail=detail, source=source)


def spelled(spec: FlagSpec, value: Any, span: FlagSpan | None = None) -> Any:
    """The target's own spelling of a shared meaning (when the flag declares its values in `canonical`): the spelling
    the target release accepts (its choices, when read), the one named as the meaning itself first, else the first
    listed. A boolean's meaning is 'true'/'false', so a switch becomes `on`/`off` where the target takes a word."""
    if not spec.canonical or not isinstance(value, str | bool):
        return value
    token = str(value).lower() if isinstance(value, bool) else value
    names = [k for k, v in spec.canonical.items() if v == token]
    if span is not None and span.choices:
        names = [k for k in names if k in span.choices] or names
    return (token if token in names else names[0]) if names else value


_KV_DTYPE_FAMILY = {
    "fp8": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e4m3fn": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
    "auto": "auto",
    "bf16": "auto",
    "bfloat16": "auto",
    "f16": "auto",
    "float16": "auto",
}


def kv_dtype_for(target: FlagSpec, value: str) -> str | None:
    """The target's spelling of a KV cache dtype (None: it has none, or its default already is it)."""
    if target.choices is not None and str(value) in target.choices:
        return str(value)  # spelled the same there
    family = _KV_DTYPE_FAMILY.get(str(value).lower())
    if family is None:
        return None
    if family == "auto":
        return None if target.default in ("auto", "f16", "model dtype") else "auto"
    if target.choices is None:
        return str(value)
    for name in (str(value), family, family + "fn", "fp8"):
        if name in target.choices:
            return name
    return None


def memory_knob(r: Render) -> None:
    """With a model card and the GPU's memory, convert the memory fraction to the target's meaning."""
    values, src, dst = r.values, r.src, r.dst
    if (
        r.card is None
        or not r.gpu_total_gib
        or "gpu_memory_fraction" not in values
        or src.name == dst.name
        or "gpu_memory_fraction" in r.details
        or "gpu_memory_fraction" in r.forced
    ):
        return  # a hardware move already derived it in the target's own meaning: converting it again is wrong
    mml = values.get("max_context_length")
    eq = equivalent_memory_knob(
        r.card,
        src,
        dst,
        r.gpu_total_gib,
        float(values["gpu_memory_fraction"]),
        tp=int(values.get("tensor_parallel_size", 1)),
        pp=int(values.get("pipeline_parallel_size", 1)),
        kv_dtype=str(values.get("kv_cache_dtype", "auto")),
        gpu_name=r.gpu_name,
        max_model_len=mml if isinstance(mml, int) and mml > 0 else None,
        src_version=src.resolved_version,
        dst_version=dst.resolved_version,
    )
    values.pop("gpu_memory_fraction")
    if eq is None:
        r.lose(
            "gpu_memory_fraction",
            "different_meaning",
            f"no {dst.name} setting reproduces the source KV pool on this GPU",
            dst.memory.source,
        )
    elif eq.intent == "max_context_length" and isinstance(values.get("max_context_length"), int):
        mml = int(values["max_context_length"])
        fit = max(1, int(eq.value) // mml)  # slots of a full context each that the same memory holds
        asked = values.get("max_concurrent_sequences")
        values["max_concurrent_sequences"] = min(int(asked), fit) if isinstance(asked, int) else fit
        r.forced.add("max_concurrent_sequences")
        r.details["gpu_memory_fraction"] = (
            f"converted, not copied: {eq.explanation}; that is {values['max_concurrent_sequences']} slots of {mml} "
            "tokens"
            + (f" (not {asked}: slots reserve their whole context)" if isinstance(asked, int) and asked > fit else "")
        )
        r.results["gpu_memory_fraction"] = Result(
            "translated", detail=r.details["gpu_memory_fraction"], source=dst.memory.source
        )
        r.details["max_concurrent_sequences"] = r.details["gpu_memory_fraction"]
    else:
        values[eq.intent] = eq.value
        r.details[eq.intent] = f"converted, not copied: {eq.explanation}"
        if eq.intent != "gpu_memory_fraction":
            r.results["gpu_memory_fraction"] = Result(
                "translated", detail=r.details[eq.intent], source=dst.memory.source
            )


def expert_parallel(r: Render) -> None:
    """A bool (on/off) in one engine is a width (an int) in another."""
    if "expert_parallel" not in r.values:
        return
    ep = r.values["expert_parallel"]
    width = int(r.values.get("tensor_parallel_size", 1)) * int(r.values.get("data_parallel_size", 1))
    spec = r.dst.flags.get("expert_parallel")
    if spec is not None and spec.kind == "int" and isinstance(ep, bool):
        r.values["expert_parallel"] = width if ep else 1
        r.details["expert_parallel"] = f"an EP switch here, a width there: TP x DP = {width}"
    elif spec is not None and spec.kind == "bool" and not isinstance(ep, bool):
        r.values["expert_parallel"] = ep > 1
        r.details["expert_parallel"] = f"an EP width ({ep}) here, a switch there (EP spans TP x DP)"


def chunked_prefill(r: Render) -> None:
    """On/off in one engine; a chunk size where -1 means off in another."""
    if "chunked_prefill" not in r.values:
        return
    spec = r.dst.flags.get("chunked_prefill")
    on = r.values["chunked_prefill"]
    on = on if isinstance(on, bool) else on != -1
    if spec is not None and spec.kind == "int":
        if on:
            r.default(
                "chunked_prefill", f"chunked prefill is on by default in {r.dst.name} ({spec.default})", spec.source
            )
        else:
            r.values["chunked_prefill"] = -1
    else:
        r.values["chunked_prefill"] = on


def kv_dtype(r: Render) -> None:
    """The KV cache dtype in the target's spelling (or lost when it has none)."""
    if "kv_cache_dtype" not in r.values or "kv_cache_dtype" not in r.dst.flags:
        return
    value = r.values.pop("kv_cache_dtype")
    spec = r.dst.flags["kv_cache_dtype"]
    mapped = kv_dtype_for(spec, value)
    if mapped is None and _KV_DTYPE_FAMILY.get(str(value).lower()) == "auto":
        r.default(
            "kv_cache_dtype", f"{value} KV is the model dtype, {r.dst.name}'s default ({spec.default})", spec.source
        )
    elif mapped is None:
        r.lose("kv_cache_dtype", "no_equivalent", f"KV dtype {value!r} has no {r.dst.name} spelling", spec.source)
    else:
        r.values["kv_cache_dtype"] = mapped


def context_over_slots(r: Render) -> None:
    """A target whose context flag is shared by all slots gets context x slots, and the slot count with it."""
    slots = r.values.get("max_concurrent_sequences")
    ctx = r.values.get("max_context_length")
    spec = r.dst.flags.get("max_context_length")
    if spec is None or not spec.total_over_slots or not isinstance(ctx, int) or not isinstance(slots, int):
        return
    if r.values.get("kv_unified") is True and "kv_unified" in r.dst.flags:
        # one KV buffer shared by the slots: each request may use the whole context
        # (https://github.com/ggml-org/llama.cpp/blob/b11434/src/llama-context.cpp#L294-L298)
        return
    r.values["max_context_length"] = ctx * slots
    r.forced.add("max_concurrent_sequences")
    r.details["max_context_length"] = (
        f"{spec.flag} is shared by all {slots} slots: context x slots = "
        f"{ctx * slots}; each slot holds its full context in memory (no paging)"
    )


def metrics_on(r: Render) -> None:
    """Metrics on by default in the source stay on in a target where they are off by default."""
    src, dst = r.src, r.dst
    metrics_flag = dst.flags.get("metrics_enable")
    if (
        metrics_flag is not None
        and metrics_flag.kind == "bool"
        and src.metrics_endpoint.enabled_by_default
        and not dst.metrics_endpoint.enabled_by_default
        and "metrics_enable" not in r.values
    ):
        r.values["metrics_enable"] = True
        r.derived.append(
            Derived(
                what="metrics_enable",
                value=True,
                why=f"metrics are on by default in {src.name}, off in {dst.name}: switched on "
                f"({dst.metrics_endpoint.enable}); scrape {dst.metrics_endpoint.path}",
                source=dst.metrics_endpoint.source,
            )
        )
    if dst.metrics_endpoint.enable and "YAML" in dst.metrics_endpoint.enable and r.values.get("metrics_enable"):
        r.yaml_cfg["enable_iter_perf_stats"] = True


def shared_meanings(r: Render) -> None:
    """Values that stand for a meaning (`model`: the model's own context or dtype; a parser's format) in the
    target's spelling, no flag where leaving it unset means the same, and lost where the target has no spelling;
    names that differ per engine (parsers) cross only where the sources map them."""
    for intent, value in list(r.values.items()):
        spec = r.dst.flags.get(intent)
        src_spec = r.src.flags.get(intent)
        if spec is None or src_spec is None or not isinstance(value, str) or r.src.name == r.dst.name:
            continue
        tokens = set((src_spec.canonical or {}).values())
        if value not in tokens:
            if src_spec.mapped_values_only or spec.mapped_values_only:
                r.lose(
                    intent,
                    "no_equivalent",
                    f"{src_spec.flag} {value!r}: no source maps it to a {r.dst.name} "
                    f"{spec.flag or intent} value (names differ between engines)",
                    spec.source,
                )
            continue
        spelled = {v: k for k, v in (spec.canonical or {}).items()}.get(value)
        if spec.default_means == value:
            r.default(
                intent,
                f"{value!r} is what {r.dst.name} does when {spec.flag or intent} is not given "
                f"(default: {spec.default})",
                spec.source,
            )
        elif spelled is None:
            r.lose(
                intent,
                "no_equivalent",
                f"{r.dst.name} has no spelling of {value!r} for {spec.flag or intent}",
                spec.source,
            )


def sharded(r: Render) -> None:
    """'Shard over every visible GPU' (on/off) where the target only takes a tensor-parallel size: the size is the
    number of GPUs the launch sees, when the launch says it."""
    spec = r.dst.flags.get("sharded")
    if "sharded" not in r.values or (spec is not None and spec.flag):
        return
    on = r.values.pop("sharded")
    tp = r.values.get("tensor_parallel_size")
    gpus = r.gpu_count
    if not on and tp in (None, 1):
        r.default("sharded", f"not sharded: one GPU, {r.dst.name}'s default tensor parallelism")
    elif not on:
        r.lose("sharded", "different_meaning", f"sharding off contradicts a tensor-parallel size of {tp}")
    elif isinstance(tp, int):
        r.follows["sharded"] = "tensor_parallel_size"
    elif gpus:
        r.values["tensor_parallel_size"] = gpus
        r.details["tensor_parallel_size"] = f"sharded over the {gpus} GPUs the launch sees: tensor parallelism {gpus}"
        r.follows["sharded"] = "tensor_parallel_size"
    else:
        r.lose(
            "sharded",
            "different_meaning",
            "shards over every visible GPU, and the launch does not say how many "
            "(give CUDA_VISIBLE_DEVICES, docker --gpus or --to-gpus)",
        )


_EVERY_LAYER = 256  # no released model has this many layers: an offload count at least this large means all of them


def gpu_layers(r: Render) -> None:
    """Layers offloaded to the GPU (llama.cpp -ngl) where the target runs every layer on the GPU: the same when
    the count covers the model's layers, lost when it was a partial offload."""
    spec = r.dst.flags.get("gpu_layers")
    if "gpu_layers" not in r.values or (spec is not None and spec.flag):
        return
    value = r.values["gpu_layers"]
    layers = r.card.num_layers if r.card is not None else None
    everything = value == "all" or (
        isinstance(value, int) and (value >= _EVERY_LAYER or (layers is not None and value >= layers))
    )
    if everything:
        r.default(
            "gpu_layers",
            f"every layer on the GPU ({value}), as {r.dst.name} runs" + (f" ({layers} layers)" if layers else ""),
            spec.source if spec else None,
        )
    elif isinstance(value, str):
        r.lose(
            "gpu_layers",
            "different_meaning",
            f"-ngl {value}: as many layers as fit, decided at start; {r.dst.name} runs every layer on the GPU",
            spec.source if spec else None,
        )
    elif layers is None:
        r.lose(
            "gpu_layers",
            "different_meaning",
            f"{value} layers on the GPU: whether that is all of them needs the "
            f"model (--model); {r.dst.name} runs every layer on the GPU",
        )
    else:
        r.lose(
            "gpu_layers",
            "different_meaning",
            f"only {value} of {layers} layers on the GPU: {r.dst.name} has no "
            "partial layer offload (every layer runs on the GPU)",
            spec.source if spec else None,
        )


# vLLM's pooling tasks and the --convert each needs on a checkpoint that is not a pooling model
# (https://github.com/vllm-project/vllm/blob/v0.12.0/vllm/config/model.py#L98-L108, #L525-L536)
_POOLING_TASKS = {"embed": "embed", "classify": "classify", "score": "classify or embed", "reward": "reward"}
_TASK_SOURCE = "https://github.com/vllm-project/vllm/blob/v0.12.0/vllm/config/model.py#L538-L605"


def model_task(r: Render) -> None:
    """A pooling task (--task embed) where the target only says pooling or not (--runner pooling): the runner, and
    the --convert a checkpoint that is not a pooling model also needs, said."""
    spec = r.dst.flags.get("model_task")
    task = r.values.get("model_task")
    if spec is None or task not in _POOLING_TASKS or task in (spec.canonical or {}).values():
        return
    if "pooling" in (spec.canonical or {}).values():
        r.values["model_task"] = "pooling"
        r.details["model_task"] = (
            f"{task} is a pooling task: {spec.flag} pooling; a checkpoint that is not a pooling "
            f"model also needs --convert {_POOLING_TASKS[task]} ({_TASK_SOURCE})"
        )


def attention_dp(r: Render) -> None:
    """With attention data parallelism (SGLang --enable-dp-attention, TRT-LLM enable_attention_dp) the DP ranks split
    attention inside the tensor-parallel group: no replicas. A target with the same mode takes its size from TP; one
    without it gets no data-parallel replicas from it."""
    if not r.values.get("attention_dp") or "data_parallel_size" not in r.values:
        return
    dp = r.values["data_parallel_size"]
    spec = r.dst.flags.get("attention_dp")
    if spec is not None and (spec.flag or spec.yaml_key):
        r.default(
            "data_parallel_size",
            f"attention DP over the TP group: {r.dst.name} sizes it by tensor parallelism",
            spec.source,
        )
    else:
        r.lose(
            "data_parallel_size",
            "different_meaning",
            f"--dp-size {dp} with attention DP is attention data "
            f"parallelism inside the TP group (no replicas); {r.dst.name} has no such mode",
            r.src.flags["attention_dp"].source if "attention_dp" in r.src.flags else None,
        )


# conversions that depend on what a value means, in order, before the values are copied
CONVERSIONS = (
    model_task,
    attention_dp,
    shared_meanings,
    sharded,
    gpu_layers,
    memory_knob,
    expert_parallel,
    chunked_prefill,
    kv_dtype,
    context_over_slots,
    metrics_on,
)
CONVERTED = {"expert_parallel", "chunked_prefill"}  # their kinds differ between engines by design
