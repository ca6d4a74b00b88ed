"""Workloads: prompts synthesised to exact token lengths (verified against the server), a per-request
cache-buster prefix, JSONL datasets and traces, seeded arrival times.

Exact length: the prompt is `<cache-buster words> <filler words>`; the number of filler words is searched
(bisection) until the *server* counts exactly the target, either from `usage.prompt_tokens` of a 1-token
request (what the server really charged, chat template and BOS included) or from `/tokenize` plus an offset
calibrated against that usage once. When no word count hits the target exactly, the nearest is used and the
deviation is reported (the per-request `usage.prompt_tokens` is recorded in every row as well).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import orjson

from switchover.errors import BadInput, Unreachable
from switchover.evidence.bench_findings import FILLER, BucketFit
from switchover.textfile import check_text_file, read_text
from switchover.wire import EngineClient, FailureKind

Arrival = Literal["constant", "poisson", "gamma"]
Api = Literal["completions", "chat"]

_FILLER_WORDS = tuple(FILLER)
BUSTER_WORDS = 4


def _rng(*parts: object) -> np.random.Generator:
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def filler_words(seed: int, bucket: str, n: int, vocab: Sequence[str] = FILLER) -> list[str]:
    """The seeded filler sequence of one bucket (the same for every request and endpoint)."""
    idx = _rng(seed, "filler", bucket).integers(0, len(vocab), size=n)
    return [vocab[i] for i in idx]


def cache_buster(seed: int, key: tuple[object, ...], unique: bool = True, vocab: Sequence[str] = FILLER) -> str:
    """A few seeded words unique per request (or fixed when prefix caching is allowed). A key ending in a request
    number takes its words from that number's block (one generator per BUSTER_BLOCK requests, not one per request:
    the per-request generator was a seventh of a bench run's CPU)."""
    words = _FILLER_WORDS if vocab is FILLER else tuple(vocab)
    if unique and key and type(key[-1]) is int and key[-1] >= 0:
        i = int(key[-1])
        return _buster_block(seed, key[:-1], i // BUSTER_BLOCK, words)[i % BUSTER_BLOCK]
    rng = _rng(seed, "buster", *(key if unique else ("shared",)))
    return _buster_text(rng.integers(0, len(words), size=(1, BUSTER_WORDS)), words)[0]


BUSTER_BLOCK = 1024  # requests whose cache-busters one seeded generator draws at once


@functools.lru_cache(maxsize=64)
def _buster_block(seed: int, head: tuple[object, ...], block: int, vocab: tuple[str, ...]) -> list[str]:
    """The cache-busters of requests block × BUSTER_BLOCK onwards of the requests keyed `head + (number,)`."""
    rng = _rng(seed, "buster", *head, "block", block)
    return _buster_text(rng.integers(0, len(vocab), size=(BUSTER_BLOCK, BUSTER_WORDS)), vocab)


def _buster_text(idx: np.ndarray, vocab: tuple[str, ...]) -> list[str]:
    # a fixed first word: the varying words then all follow a space, where unit_words() checked them
    return ["ref " + " ".join([vocab[i] for i in row]) + "." for row in idx.tolist()]


async def unit_words(count: Counter, candidates: Sequence[str] = FILLER, minimum: int = 16) -> list[str]:
    """The candidate words that add exactly one token after a space on this server, so every request's
    cache-buster has the same length; all candidates when fewer than `minimum` qualify."""
    base = await count("the")
    units = [w for w in candidates if await count(f"the {w}") - base == 1]
    return units if len(units) >= minimum else list(candidates)


def as_payload(api: Api, text: str) -> str | list[dict[str, str]]:
    return text if api == "completions" else [{"role": "user", "content": text}]


# ------------------------------------------------------------------------------------------- token counting

Counter = Callable[[str], Awaitable[int]]


class TokenCounter:
    """Counts prompt tokens the way the server charges them (usage.prompt_tokens), cheaply when possible."""

    def __init__(
        self, client: EngineClient, api: Api, model: str, *, use_tokenize: bool = True, tokenize_path: str = "/tokenize"
    ) -> None:
        self.client, self.api, self.model = client, api, model
        self.use_tokenize = use_tokenize
        self.tokenize_path = tokenize_path
        self.offset: int | None = None  # usage − len(/tokenize) for the same text
        self.method = "usage.prompt_tokens"
        self.calls = 0

    async def by_usage(self, text: str) -> int:
        body: dict[str, Any] = {"model": self.model, "max_tokens": 1, "stream": False, "temperature": 0}
        body["prompt" if self.api == "completions" else "messages"] = as_payload(self.api, text)
        rec = await self.client.generate(self.api, body, include_usage=False)
        self.calls += 1
        if rec.failure is not None:
            if rec.failure.kind in (FailureKind.CONNECT, FailureKind.CONNECT_TIMEOUT):
                raise Unreachable(rec.failure.message)
            raise BadInput(f"{self.client.base_url}: cannot measure prompt length: {rec.failure.message}")
        if rec.usage is None or rec.usage.prompt_tokens is None:
            raise BadInput(
                f"{self.client.base_url}: the server reports no usage.prompt_tokens, so prompt lengths "
                "cannot be verified",
                hint="use a JSONL dataset instead of ISL buckets",
            )
        return int(rec.usage.prompt_tokens)

    async def tokenize(self, text: str) -> list[int] | None:
        """Token ids from the engine's tokenize endpoint (path from its profile); None where it has none."""
        body = {"model": self.model, "prompt": text, "content": text, "add_special_tokens": True}
        res = await self.client.request("POST", self.tokenize_path, json_body=body, timeout=30)
        self.calls += 1
        if res.failure or res.status != 200:
            return None
        try:
            tokens = res.json().get("tokens")
        except (orjson.JSONDecodeError, AttributeError):
            return None
        if not isinstance(tokens, list):
            return None
        return [t if isinstance(t, int) else -1 for t in tokens]

    async def calibrate(self) -> None:
        """Use /tokenize + a fixed offset when two probes of different length agree with usage."""
        if not self.use_tokenize:
            return
        offsets = []
        for n in (8, 40):
            text = " ".join(FILLER[:n])
            ids = await self.tokenize(text)
            if ids is None:
                return
            offsets.append(await self.by_usage(text) - len(ids))
        if offsets[0] == offsets[1]:
            self.offset = offsets[0]
            self.method = f"/tokenize + {self.offset} (calibrated against usage.prompt_tokens)"

    async def __call__(self, text: str) -> int:
        if self.offset is not None:
            ids = await self.tokenize(text)
            if ids is not None:
                return len(ids) + self.offset
        return await self.by_usage(text)


async def fit_bucket(
    count: Counter, target: int, seed: int, bucket: str, *, method: str = "", vocab: Sequence[str] = FILLER
) -> BucketFit:
    """Bisection on the number of filler words so that buster + filler counts `target` tokens."""
    if target < BUSTER_WORDS + 4:
        raise BadInput(f"input length {target} is too short: buckets need at least {BUSTER_WORDS + 4} tokens")
    words = filler_words(seed, bucket, 2 * target + 8, vocab)
    buster = cache_buster(seed, ("fit", bucket), vocab=vocab)
    probes = 0

    async def n_tokens(w: int) -> int:
        nonlocal probes
        probes += 1
        return await count(f"{buster} {' '.join(words[:w])}")

    lo, hi = 0, len(words)
    c_hi = await n_tokens(hi)
    if c_hi < target:
        raise BadInput(f"cannot reach {target} prompt tokens with filler text (got {c_hi})")
    c_lo = await n_tokens(lo)
    if c_lo > target:
        raise BadInput(f"the cache-buster alone is {c_lo} tokens, more than the {target} wanted")
    while hi - lo > 1:  # invariant: count(lo) < target <= count(hi), or equal at lo
        mid = (lo + hi) // 2
        c = await n_tokens(mid)
        if c < target:
            lo, c_lo = mid, c
        else:
            hi, c_hi = mid, c
    best_w, best_c = (hi, c_hi) if abs(c_hi - target) <= abs(target - c_lo) else (lo, c_lo)
    return BucketFit(
        bucket=bucket,
        target=target,
        words=best_w,
        achieved=best_c,
        deviation=best_c - target,
        method=method,
        probes=probes,
        vocab=list(vocab),
    )


class Prompt(NamedTuple):
    """One request's input (a named tuple: one is made per request, and a tuple is made in a quarter of the time of
    a frozen dataclass)."""

    api: Api
    payload: str | list[dict[str, Any]]
    isl_target: int | None
    max_tokens: int
    bucket: str
    at_s: float | None = None  # trace replay: arrival offset in seconds


@functools.lru_cache(maxsize=64)
def _filler_text(seed: int, bucket: str, n: int, vocab: tuple[str, ...]) -> str:
    """The filler of a bucket, joined once (it is the same for every request of the bucket)."""
    return " ".join(filler_words(seed, bucket, n, vocab))


def bucket_prompt(
    api: Api, fit: BucketFit, seed: int, key: tuple[object, ...], osl: int, *, unique: bool = True
) -> Prompt:
    """The prompt of request `key` in a fitted bucket (same text for the same seed and key)."""
    text = f"{cache_buster(seed, key, unique, fit.vocab)} {_filler_text(seed, fit.bucket, fit.words, tuple(fit.vocab))}"
    return Prompt(api, as_payload(api, text), fit.target, osl, fit.bucket)


def with_buster(p: Prompt, buster: str) -> Prompt:
    """A dataset prompt with the cache-buster words in front of its text (of its first message, for chat; the other
    messages are the dataset's own, shared: nothing changes a prompt's messages once made)."""
    if isinstance(p.payload, str):
        return Prompt(p.api, f"{buster} {p.payload}", p.isl_target, p.max_tokens, p.bucket, p.at_s)
    msgs = list(p.payload)
    first = msgs[0]
    if isinstance(first.get("content"), str):
        msgs[0] = {**first, "content": f"{buster} {first['content']}"}
    return Prompt(p.api, msgs, p.isl_target, p.max_tokens, p.bucket, p.at_s)


class PromptMaker:
    """The prompts of one step's requests, request `number` keyed `head + (number,)`: a fitted bucket's, or the
    dataset's line `number` (cycling), with its cache-buster unless --allow-prefix-cache (`plan` a BenchPlan). What
    every request of the step shares (the bucket's filler, the vocabulary) is made once, and the cache-busters a
    block at a time, so a request costs a lookup and one string."""

    def __init__(
        self, plan: Any, fit: BucketFit | None, dataset: list[Prompt] | None, head: tuple[object, ...]
    ) -> None:
        if dataset is None and fit is None:
            raise ValueError("a prompt needs a fitted bucket or a dataset")
        self.api: Api = plan.api
        self.seed, self.osl, self.head = plan.seed, plan.output_tokens, head
        self.fit, self.dataset = fit, dataset
        vocab: Sequence[str] = FILLER if fit is None else fit.vocab
        self.vocab = _FILLER_WORDS if tuple(vocab) == _FILLER_WORDS else tuple(vocab)
        self.filler = "" if fit is None else _filler_text(self.seed, fit.bucket, fit.words, self.vocab)
        self.shared = None if not plan.allow_prefix_cache else cache_buster(self.seed, head, False, self.vocab)
        self._block, self._busters = -1, [""]

    def buster(self, number: int) -> str:
        """Request `number`'s cache-buster (cache_buster's words for the key `head + (number,)`)."""
        if self.shared is not None:
            return self.shared
        if number < 0:
            return cache_buster(self.seed, (*self.head, number), True, self.vocab)
        block = number // BUSTER_BLOCK
        if block != self._block:
            self._busters, self._block = _buster_block(self.seed, self.head, block, self.vocab), block
        return self._busters[number % BUSTER_BLOCK]

    def __call__(self, number: int) -> Prompt:
        if self.dataset is not None:
            p = self.dataset[number % len(self.dataset)]
            return p if self.shared is not None else with_buster(p, self.buster(number))
        fit = self.fit
        assert fit is not None
        text = f"{self.buster(number)} {self.filler}"
        return Prompt(self.api, as_payload(self.api, text), fit.target, self.osl, fit.bucket)


def request_body(plan: Any, p: Prompt, model: str, extra: dict[str, Any], min_field: str | None) -> dict[str, Any]:
    """The JSON body of a streamed generation request for prompt `p`: length forced the engine profile's way."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": p.max_tokens,
        "stream": True,
        "temperature": plan.temperature,
        **extra,
    }
    if min_field:
        body[min_field] = p.max_tokens
    body["prompt" if p.api == "completions" else "messages"] = p.payload
    return body


# ------------------------------------------------------------------------------------------- datasets, traces


MAX_DATASET_BYTES = 1 << 30  # a --dataset JSONL (ShareGPT is ~0.7 GiB); it is held in memory while the run lasts


def load_dataset(path: str | Path, default_max_tokens: int) -> list[Prompt]:
    """JSONL: one object per line with `prompt` (completions) or `messages` (chat), optional `max_tokens`
    and `timestamp` (seconds; makes it a trace replayed at those offsets)."""
    p = Path(path)
    check_text_file(p, max_bytes=MAX_DATASET_BYTES, what="dataset (JSONL)")  # a regular file: no read of a device
    lines = read_text(p, max_bytes=MAX_DATASET_BYTES, what="dataset (JSONL)").splitlines()
    out: list[Prompt] = []
    t0: float | None = None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise BadInput(f"{p}:{i}: not valid JSON") from None
        if not isinstance(obj, dict) or ("prompt" in obj) == ("messages" in obj):
            raise BadInput(f"{p}:{i}: each line needs exactly one of `prompt` or `messages`")
        if "prompt" in obj and not isinstance(obj["prompt"], str):
            raise BadInput(f"{p}:{i}: `prompt` must be a string")
        if "messages" in obj and not (isinstance(obj["messages"], list) and obj["messages"]):
            raise BadInput(f"{p}:{i}: `messages` must be a non-empty list")
        mt = obj.get("max_tokens", default_max_tokens)
        if not isinstance(mt, int) or mt < 1:
            raise BadInput(f"{p}:{i}: `max_tokens` must be a positive integer, got {mt!r}")
        ts = obj.get("timestamp")
        if ts is not None and not isinstance(ts, int | float):
            raise BadInput(f"{p}:{i}: `timestamp` must be a number of seconds, got {ts!r}")
        at = None
        if ts is not None:
            t0 = float(ts) if t0 is None else t0
            at = float(ts) - t0
            if at < 0:
                raise BadInput(f"{p}:{i}: timestamps must not go backwards")
        api: Api = "completions" if "prompt" in obj else "chat"
        payload: str | list[dict[str, Any]] = obj["prompt"] if api == "completions" else obj["messages"]
        out.append(Prompt(api, payload, None, mt, "dataset", at))
    if not out:
        raise BadInput(f"{p}: the dataset is empty")
    if len({q.api for q in out}) > 1:
        raise BadInput(f"{p}: mixes `prompt` and `messages` lines; use one kind per file")
    if any(q.at_s is None for q in out) and any(q.at_s is not None for q in out):
        raise BadInput(f"{p}: either every line has a `timestamp` or none has")
    return out


def arrival_offsets(kind: Arrival, rate: float, n: int, seed: int, burstiness: float = 1.0) -> list[float]:
    """Seeded send offsets (s) for n requests at `rate` req/s: constant gaps, exponential gaps (Poisson),
    or gamma gaps with shape = burstiness and mean 1/rate (burstiness 1 = Poisson, as vLLM's --burstiness)."""
    return list(iter_arrival_offsets(kind, rate, seed, burstiness, n))


def iter_arrival_offsets(
    kind: Arrival, rate: float, seed: int, burstiness: float = 1.0, n: int | None = None, block: int = 65536
) -> Iterator[float]:
    """The offsets of `arrival_offsets`, drawn in blocks (the same values: numpy draws them in sequence), so a
    long run holds one block, not its whole schedule; n=None never ends."""
    if rate <= 0:
        raise BadInput(f"rate must be positive, got {rate:g}")
    if burstiness <= 0:
        raise BadInput(f"burstiness must be positive, got {burstiness:g}")
    rng = _rng(seed, "arrivals", kind, rate, burstiness)
    t, left = 0.0, n
    while left is None or left > 0:
        size = block if left is None else min(block, left)
        if kind == "constant":
            gaps = np.full(size, 1.0 / rate)
        elif kind == "poisson":
            gaps = rng.exponential(1.0 / rate, size=size)
        else:
            gaps = rng.gamma(burstiness, 1.0 / (rate * burstiness), size=size)
        # offset i is the sum of the first i gaps (offset 0 = 0): cumsum from the running total
        offs = np.concatenate([[0.0], np.cumsum(gaps[:-1])]) + t
        t = float(offs[-1] + gaps[-1])
        yield from offs.tolist()
        if left is not None:
            left -= size
