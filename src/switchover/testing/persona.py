"""Probe behaviours of the fake engine: a Persona says which API behaviour it shows (defaults look like vLLM
0.33, docs/probe.md), so the probe and verify tests can tell engines apart without one."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

VOCAB = [
    "the",
    " sea",
    " light",
    "house",
    " keep",
    "er",
    " found",
    " bottle",
    " with",
    " a",
    " note",
    ",",
    " and",
    " wave",
    "s",
    " night",
    " storm",
    ".",
    " he",
    " read",
    " it",
    " again",
    " old",
    " map",
]
EOS = "<|im_end|>"
KNOWN_FIELDS = {
    "model",
    "messages",
    "prompt",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "n",
    "stop",
    "stream",
    "stream_options",
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "response_format",
    "tools",
    "tool_choice",
}
TOOL_CALL = {
    "index": 0,
    "id": "c1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}


@dataclass
class Persona:
    """Which API behaviour the fake shows; defaults look like vLLM 0.33 (docs/probe.md)."""

    max_stop: int | None = 4
    stop_mode: Literal["text", "token"] = "text"
    keep_stop: bool = False
    stop_finish: str = "stop"
    unknown_fields: Literal["ignore", "reject"] = "ignore"
    honour_top_k: bool = True
    honour_seed: bool = True
    n_mode: Literal["honour", "ignore", "reject"] = "honour"
    usage_unasked: bool = False
    cached_tokens: bool = False
    json_schema: bool = True
    validation_status: int = 400
    error_shape: Literal["nested", "flat", "tgi"] = "nested"
    unknown_model_status: int | None = 404
    max_top_logprobs: int = 20
    default_top_logprobs: int = 0
    context: int = 1500
    over_context: Literal["clamp", "error"] = "clamp"
    cap_over_context: Literal["accept", "error"] = "accept"  # max_tokens alone above the context (vLLM 0.32: 400)
    default_max_tokens: int | None = None
    defaults: Literal["openai", "greedy", "other"] = "openai"
    echo_model: bool = True
    tools: bool = True
    stream_options_needs_stream: bool = True
    served: str = "fake-model"
    salt: str = ""  # a different "model": changes the greedy text after the first `salt_after` tokens
    salt_after: int = 0
    die_after: int | None = None  # stop answering after this many generation requests
    calls: int = field(default=0)


class Refused(Exception):
    """The persona refuses the request: `status` and `message` make the error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def greedy_ids(prompt: str, n: int) -> list[int]:
    h = hashlib.sha256(prompt.encode()).digest()
    return [(h[i % len(h)] + 7 * i) % len(VOCAB) for i in range(n)]


def error_response(p: Persona, status: int, message: str) -> web.Response:
    """An error in the persona's shape (nested OpenAI, flat vLLM-style, or TGI)."""
    if p.error_shape == "nested":
        obj: dict[str, Any] = {"error": {"message": message, "type": "BadRequestError", "code": status}}
    elif p.error_shape == "flat":
        obj = {"object": "error", "message": message, "type": "BadRequestError", "code": status}
    else:
        obj = {"error": message, "error_type": "validation"}
    return web.json_response(obj, status=status)


def _check_fields(p: Persona, body: dict[str, Any], chat: bool) -> None:
    bad = p.validation_status
    if p.unknown_fields == "reject" and set(body) - KNOWN_FIELDS:
        raise Refused(bad, f"extra fields not permitted: {sorted(set(body) - KNOWN_FIELDS)}")
    key = "messages" if chat else "prompt"
    if not isinstance(body.get(key), list if chat else str):
        raise Refused(bad, f"{key}: wrong type")
    if body.get("model") != p.served and p.unknown_model_status:
        raise Refused(p.unknown_model_status, f"The model `{body.get('model')}` does not exist.")
    mt = body.get("max_tokens")
    if mt is not None and mt < 1:
        raise Refused(bad, "max_tokens must be at least 1")
    if p.max_stop is not None and len(stops(body)) > p.max_stop:
        raise Refused(bad, f"at most {p.max_stop} stop strings")
    if body.get("stream_options") and not body.get("stream") and p.stream_options_needs_stream:
        raise Refused(bad, "stream_options requires stream")


def _check_options(p: Persona, body: dict[str, Any]) -> None:
    bad = p.validation_status
    if int(body.get("n", 1)) > 1 and p.n_mode == "reject":
        raise Refused(bad, "n must be 1")
    k = body.get("top_logprobs")
    if k is not None and k > p.max_top_logprobs:
        raise Refused(bad, f"top_logprobs must be <= {p.max_top_logprobs}")
    rf = body.get("response_format") or {}
    if rf.get("type") == "json_schema" and ("json_schema" not in rf or not p.json_schema):
        raise Refused(422 if p.error_shape == "tgi" else bad, "bad response_format")


def stops(body: dict[str, Any]) -> list[str]:
    stop = body.get("stop") or []
    return [stop] if isinstance(stop, str) else list(stop)


def _max_tokens(p: Persona, body: dict[str, Any], prompt_tokens: int) -> int:
    if prompt_tokens >= p.context:
        raise Refused(p.validation_status, f"prompt of {prompt_tokens} tokens exceeds the context")
    mt = body.get("max_tokens")
    if mt is not None and mt > p.context and p.cap_over_context == "error":
        raise Refused(p.validation_status, f"max_tokens={mt} cannot be greater than max_model_len={p.context}")
    if mt is not None and prompt_tokens + mt > p.context and p.over_context == "error":
        raise Refused(p.validation_status, "exceeds the context")
    limit = p.context - prompt_tokens
    return min(mt if mt is not None else (p.default_max_tokens or limit), limit)


def apply_stop(p: Persona, toks: list[str], stop: list[str], finish: str) -> tuple[list[str], str]:
    """Cut at the earliest stop string (text or token-boundary matching), keeping it when the persona does."""
    text = "".join(toks)
    bounds = [0]
    for t in toks:
        bounds.append(bounds[-1] + len(t))
    best: tuple[int, str] | None = None
    for s in stop:
        if p.stop_mode == "token":  # the stop must start and end on token boundaries
            hits = [b for b in bounds if text.startswith(s, b) and b + len(s) in bounds]
            pos = hits[0] if hits else -1
        else:
            pos = text.find(s)
        if pos >= 0 and (best is None or pos < best[0]):
            best = (pos, s)
    if best is None:
        return toks, finish
    cut = text[: best[0] + len(best[1])] if p.keep_stop else text[: best[0]]
    out, acc = [], 0
    for t in toks:  # re-split the cut text on the original token boundaries
        if acc >= len(cut):
            break
        out.append(t[: len(cut) - acc])
        acc += len(t)
    return out, p.stop_finish


@dataclass
class Plan:
    """What the persona answers to one accepted request."""

    chat: bool
    stream: bool
    model: str
    choices: list[tuple[list[str], str]]
    usage: dict[str, Any]
    tools: bool
    logprobs: bool
    top: int
    include_usage: bool


def _ids(p: Persona, body: dict[str, Any], prompt: str, mt: int, i: int) -> list[int]:
    temp = body.get("temperature")
    if temp is None:
        temp = {"openai": 1.0, "greedy": 0.0, "other": 0.7}[p.defaults]
    if temp == 0 or (p.honour_top_k and body.get("top_k") == 1):
        ids = greedy_ids(prompt, mt)
        if p.salt:
            ids = ids[: p.salt_after] + greedy_ids(prompt + p.salt, mt)[p.salt_after :]
        return ids
    seed = body.get("seed")
    rng = random.Random(f"{seed}:{i}:{temp}") if seed is not None and p.honour_seed else random.Random()
    return [rng.randrange(len(VOCAB)) for _ in range(mt)]


def _choice(p: Persona, body: dict[str, Any], toks: list[str]) -> tuple[list[str], str]:
    rf = body.get("response_format") or {}
    if (body.get("logit_bias") or {}).get("0", 0) > 50:
        return [], "stop"
    if rf.get("type") in ("json_object", "json_schema"):
        return ['{"', "ok", '":', " true", "}"], "stop"
    if body.get("tools") and body.get("tool_choice"):
        return [], "tool_calls"
    return apply_stop(p, toks, stops(body), "length")


def plan(p: Persona, body: dict[str, Any], chat: bool) -> Plan:
    """Validate `body` as the persona would (raises Refused) and decide the answer."""
    _check_fields(p, body, chat)
    _check_options(p, body)
    prompt = json.dumps(body["messages" if chat else "prompt"])
    prompt_tokens = 2 + len(prompt) // 4
    mt = _max_tokens(p, body, prompt_tokens)
    n = 1 if p.n_mode == "ignore" else int(body.get("n", 1))
    choices = [_choice(p, body, [VOCAB[t] for t in _ids(p, body, prompt, mt, i)]) for i in range(n)]
    completion = sum(len(t) for t, _ in choices)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
    }
    if p.cached_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": prompt_tokens // 2}
    tools = bool(body.get("tools") and body.get("tool_choice"))
    if tools and not p.tools:
        raise Refused(p.validation_status, "tools not supported")
    k = body.get("top_logprobs")
    opts = body.get("stream_options") or {}
    return Plan(
        chat=chat,
        stream=bool(body.get("stream")),
        model=p.served if p.echo_model else "some/path",
        choices=choices,
        usage=usage,
        tools=tools,
        logprobs=bool(body.get("logprobs")),
        top=k if k is not None else p.default_top_logprobs,
        include_usage=bool(opts.get("include_usage") or p.usage_unasked),
    )


def _whole_choice(pl: Plan, i: int, toks: list[str], finish: str) -> dict[str, Any]:
    text = "".join(toks)
    ch: dict[str, Any] = {"index": i, "finish_reason": finish}
    if pl.chat:
        msg: dict[str, Any] = {"role": "assistant", "content": text}
        if pl.tools:
            msg["tool_calls"] = [TOOL_CALL]
        ch["message"] = msg
    else:
        ch["text"] = text
    if pl.logprobs:
        ch["logprobs"] = {
            "content": [
                {"token": t, "logprob": -1.0, "top_logprobs": [{"token": t, "logprob": -1.0}] * pl.top} for t in toks
            ]
        }
    return ch


def whole(pl: Plan) -> web.Response:
    out = [_whole_choice(pl, i, toks, finish) for i, (toks, finish) in enumerate(pl.choices)]
    return web.json_response(
        {"id": "x", "object": "chat.completion", "model": pl.model, "choices": out, "usage": pl.usage}
    )


def events(pl: Plan) -> list[dict[str, Any]]:
    """The streamed events of a plan, in order (before [DONE])."""
    out: list[dict[str, Any]] = []

    def add(choice: dict[str, Any]) -> None:
        out.append({"id": "x", "model": pl.model, "choices": [choice]})

    for i, (toks, finish) in enumerate(pl.choices):
        if pl.chat:
            add({"index": i, "delta": {"role": "assistant"}})
        if pl.tools:
            for part in ('{"city"', ': "Paris"}'):
                add(
                    {
                        "index": i,
                        "delta": {"tool_calls": [{"index": 0, "function": {"name": "get_weather", "arguments": part}}]},
                    }
                )
        for t in toks:
            add({"index": i, "delta": {"content": t}} if pl.chat else {"index": i, "text": t})
        fin: dict[str, Any] = {"index": i, "finish_reason": finish}
        if pl.chat:
            fin["delta"] = {}
        else:
            fin["text"] = ""
        add(fin)
    if pl.include_usage:
        out.append({"id": "x", "model": pl.model, "choices": [], "usage": pl.usage})
    return out


async def answer(p: Persona, request: web.Request, body: dict[str, Any] | None, chat: bool) -> web.StreamResponse:
    """The persona's answer to one generation request (`body` None: it was not JSON)."""
    p.calls += 1
    if p.die_after is not None and p.calls > p.die_after:
        assert request.transport is not None
        request.transport.close()
        raise web.HTTPInternalServerError()
    if body is None:
        return error_response(p, p.validation_status, "invalid JSON")
    try:
        pl = plan(p, body, chat)
    except Refused as exc:
        return error_response(p, exc.status, str(exc))
    if not pl.stream:
        return whole(pl)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for obj in events(pl):
        await resp.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    return resp
