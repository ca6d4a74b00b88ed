"""Out-of-memory as a bench metric (docs/bench.md#oom-rate): which failed answers are an engine running out of
memory, counted per step, and whether an engine process that went away during a sweep step was killed for memory.

The message texts are the engines' own, read at a release (each sign cites where); a text not listed here is not
counted, so an engine whose OOM answer is not listed reads 0 OOM answers plus its other failures, never a guess.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

StepKey = tuple[str, str, int, int]  # endpoint, bucket, step, repeat


class OomSign(BaseModel):
    """A text an engine writes when it runs out of memory, where it appears, and where it was read."""

    engine: str
    text: str
    where: Literal["answer", "log"]
    meaning: str
    source: str


SIGNS: tuple[OomSign, ...] = (
    OomSign(
        engine="llamacpp",
        text="Context size has been exceeded.",
        where="answer",
        meaning="the KV cache had no free cell for the batch even at n_batch 1: every slot processing is failed "
        "with HTTP 500 server_error",
        source="https://github.com/ggml-org/llama.cpp/blob/b11434/tools/server/server-context.cpp",
    ),
    OomSign(
        engine="llamacpp",
        text="failed to find free space in the KV cache",
        where="log",
        meaning="the KV cache was full and the batch was halved (a warning before 'Context size has been exceeded.')",
        source="https://github.com/ggml-org/llama.cpp/blob/b11434/tools/server/server-context.cpp",
    ),
    OomSign(
        engine="torch",
        text="CUDA out of memory",
        where="answer",
        meaning="a PyTorch CUDA allocation failed (vLLM, SGLang, TGI); vLLM 0.32.0 answers an exception raised in "
        "its API server with HTTP 500 and str(exc) as the message",
        source="https://github.com/pytorch/pytorch/blob/v2.13.0/c10/cuda/CUDACachingAllocator.cpp",
    ),
    OomSign(
        engine="torch",
        text="OutOfMemoryError",
        where="log",
        meaning="PyTorch's out-of-memory exception in an engine's traceback",
        source="https://github.com/pytorch/pytorch/blob/v2.13.0/c10/cuda/CUDACachingAllocator.cpp",
    ),
)
# vLLM V1's answer once its engine core died (for any cause, OOM among them); the cause is only in the log
ENGINE_DEAD = OomSign(
    engine="vllm",
    text="EngineCore encountered an issue",
    where="answer",
    meaning="the engine core process died; the answer does not say why (the log does)",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/engine/exceptions.py",
)


def answer_sign(status: int | None, message: str | None) -> OomSign | None:
    """The OOM sign a failed answer carries: an HTTP 5xx, or an error inside a 200 stream, whose message holds an
    engine's out-of-memory text; None otherwise."""
    if not message or (status is not None and status != 200 and status < 500):
        return None
    return next((s for s in SIGNS if s.where == "answer" and s.text in message), None)


def engine_dead(status: int | None, message: str | None) -> bool:
    """The answer says the engine died (cause unknown from the answer alone)."""
    return bool(message) and (status is None or status == 200 or status >= 500) and ENGINE_DEAD.text in str(message)


def log_signs(text: str) -> list[OomSign]:
    """The out-of-memory signs an engine log holds (answer texts are logged too)."""
    return [s for s in SIGNS if s.text in text]


class ProcessEnd(BaseModel):
    """How an engine process that ended during a step ended, and whether memory is the likely reason."""

    returncode: int
    oom: bool
    reason: str


def process_end(returncode: int, log_text: str) -> ProcessEnd:
    """An engine gone: OOM when its log holds an OOM sign; SIGKILL is the kernel OOM killer's signal, so a kill by
    SIGKILL with no sign in the log is said as possible, not counted."""
    signs = log_signs(log_text)
    if signs:
        return ProcessEnd(
            returncode=returncode,
            oom=True,
            reason=f"exited with {returncode}; its log holds {signs[0].text!r} ({signs[0].source})",
        )
    if returncode in (-signal.SIGKILL, 128 + signal.SIGKILL):
        return ProcessEnd(
            returncode=returncode,
            oom=False,
            reason="killed by SIGKILL: possibly the kernel's OOM killer (dmesg says); no OOM text in its log",
        )
    return ProcessEnd(returncode=returncode, oom=False, reason=f"exited with {returncode}; no OOM text in its log")


class StepOom(BaseModel):
    """Out-of-memory answers of one step."""

    requests: int
    oom: int
    engine_dead: int
    texts: list[str]

    @property
    def rate(self) -> float | None:
        return self.oom / self.requests if self.requests else None


def records(run_dir: Path, name: str) -> Path | None:
    """`<name>.parquet` in a run directory, or its folder of closed parts (a checkpointed run); None: neither."""
    for path in (run_dir / f"{name}.parquet", run_dir / name):
        if path.exists():
            return path
    return None


def step_ooms(run_dir: Path) -> dict[StepKey, StepOom]:
    """Per step: measured requests, OOM answers, engine-dead answers, from the run's request rows (counted in
    Arrow; only failed rows are read one by one)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    path = records(run_dir, "requests")
    if path is None:
        return {}
    keys = ["endpoint", "bucket", "step", "repeat"]
    data = ds.dataset(str(path), format="parquet")
    measured = ds.field("warmup").is_null() | (ds.field("warmup") == pa.scalar(False))
    counts = data.to_table(columns=keys, filter=measured).group_by(keys).aggregate([([], "count_all")])
    failed = data.to_table(
        columns=[*keys, "status", "failure_message"], filter=measured & ds.field("failure_message").is_valid()
    )
    out = {_key(r): StepOom(requests=int(r["count_all"]), oom=0, engine_dead=0, texts=[]) for r in counts.to_pylist()}
    for r in failed.to_pylist():
        step = out.get(_key(r))
        if step is None:
            continue
        sign = answer_sign(r["status"], r["failure_message"])
        if sign is not None:
            step.oom += 1
            step.texts = sorted({*step.texts, sign.text})
        elif engine_dead(r["status"], r["failure_message"]):
            step.engine_dead += 1
    return out


def _key(r: dict[str, object]) -> StepKey:
    return (str(r["endpoint"] or ""), str(r["bucket"] or ""), int(str(r["step"] or 0)), int(str(r["repeat"] or 0)))
