"""An in-process fake OpenAI-compatible server whose API behaviour is set by a Persona (for verdict tests)."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

VOCAB = ["the", " sea", " light", "house", " keep", "er", " found", " bottle", " with", " a", " note", ",",
         " and", " wave", "s", " night", " storm", ".", " he", " read", " it", " again", " old", " map"]
EOS = "<|im_end|>"


@dataclass
class Persona:
    """Which API behaviour the fake shows; defaults look like vLLM 0.33 (engines.md §2)."""

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


def _greedy_ids(prompt: str, n: int) -> list[int]:
    h = hashlib.sha256(prompt.encode()).digest()
    return [(h[i % len(h)] + 7 * i) % len(VOCAB) for i in range(n)]


def _sample_ids(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(len(VOCAB)) for _ in range(n)]


class FakeEngine:
    def __init__(self, persona: Persona) -> None:
        self.p = persona

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        return app

    async def models(self, _: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": self.p.served, "max_model_len": self.p.context}]})

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(status=200)

    async def tokenize(self, req: web.Request) -> web.Response:
        body = await req.json()
        text = body.get("prompt", "")
        return web.json_response({"tokens": [0] if text == EOS else list(range(1, 2 + len(text) // 3))})

    def error(self, status: int, message: str) -> web.Response:
        shape = self.p.error_shape
        if shape == "nested":
            obj: dict[str, Any] = {"error": {"message": message, "type": "BadRequestError", "code": status}}
        elif shape == "flat":
            obj = {"object": "error", "message": message, "type": "BadRequestError", "code": status}
        else:
            obj = {"error": message, "error_type": "validation"}
        return web.json_response(obj, status=status)

    async def chat(self, req: web.Request) -> web.StreamResponse:
        return await self.generate(req, chat=True)

    async def completions(self, req: web.Request) -> web.StreamResponse:
        return await self.generate(req, chat=False)

    async def generate(self, req: web.Request, chat: bool) -> web.StreamResponse:
        p = self.p
        p.calls += 1
        if p.die_after is not None and p.calls > p.die_after:
            assert req.transport is not None
            req.transport.close()
            raise web.HTTPInternalServerError()
        try:
            body = await req.json()
        except json.JSONDecodeError:
            return self.error(p.validation_status, "invalid JSON")
        known = {"model", "messages", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "n", "stop",
                 "stream", "stream_options", "logprobs", "top_logprobs", "logit_bias", "response_format", "tools",
                 "tool_choice"}
        if p.unknown_fields == "reject" and set(body) - known:
            return self.error(p.validation_status, f"extra fields not permitted: {sorted(set(body) - known)}")
        key = "messages" if chat else "prompt"
        if not isinstance(body.get(key), list if chat else str):
            return self.error(p.validation_status, f"{key}: wrong type")
        if body.get("model") != p.served and p.unknown_model_status:
            return self.error(p.unknown_model_status, f"The model `{body.get('model')}` does not exist.")
        mt = body.get("max_tokens")
        if mt is not None and mt < 1:
            return self.error(p.validation_status, "max_tokens must be at least 1")
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
        if p.max_stop is not None and len(stop) > p.max_stop:
            return self.error(p.validation_status, f"at most {p.max_stop} stop strings")
        stream = bool(body.get("stream"))
        if body.get("stream_options") and not stream and p.stream_options_needs_stream:
            return self.error(p.validation_status, "stream_options requires stream")
        n = int(body.get("n", 1))
        if n > 1 and p.n_mode == "reject":
            return self.error(p.validation_status, "n must be 1")
        if p.n_mode == "ignore":
            n = 1
        k = body.get("top_logprobs")
        if k is not None and k > p.max_top_logprobs:
            return self.error(p.validation_status, f"top_logprobs must be <= {p.max_top_logprobs}")
        rf = body.get("response_format") or {}
        if rf.get("type") == "json_schema" and ("json_schema" not in rf or not p.json_schema):
            return self.error(422 if p.error_shape == "tgi" else p.validation_status, "bad response_format")
        prompt = json.dumps(body[key])
        prompt_tokens = 2 + len(prompt) // 4
        if prompt_tokens >= p.context:
            return self.error(p.validation_status, f"prompt of {prompt_tokens} tokens exceeds the context")
        if mt is not None and prompt_tokens + mt > p.context and p.over_context == "error":
            return self.error(p.validation_status, "exceeds the context")
        limit = p.context - prompt_tokens
        if mt is None:
            mt = p.default_max_tokens or limit
        mt = min(mt, limit)
        temp = body.get("temperature")
        if temp is None:
            temp = {"openai": 1.0, "greedy": 0.0, "other": 0.7}[p.defaults]
        seed = body.get("seed")
        choices = []
        for i in range(n):
            if temp == 0 or (p.honour_top_k and body.get("top_k") == 1):
                ids = _greedy_ids(prompt, mt)
                if p.salt:
                    ids = ids[:p.salt_after] + _greedy_ids(prompt + p.salt, mt)[p.salt_after:]
            else:
                rng = random.Random(f"{seed}:{i}:{temp}") if seed is not None and p.honour_seed else random.Random()
                ids = _sample_ids(rng, mt)
            toks = [VOCAB[t] for t in ids]
            finish = "length"
            bias = body.get("logit_bias") or {}
            if bias.get("0", 0) > 50:
                toks, finish = [], "stop"
            elif rf.get("type") in ("json_object", "json_schema"):
                toks, finish = ['{"', "ok", '":', " true", "}"], "stop"
            elif body.get("tools") and body.get("tool_choice"):
                toks, finish = [], "tool_calls"
            else:
                toks, finish = self._apply_stop(toks, stop, finish)
            choices.append((toks, finish))
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": sum(len(t) for t, _ in choices),
                 "total_tokens": prompt_tokens + sum(len(t) for t, _ in choices)}
        if p.cached_tokens:
            usage["prompt_tokens_details"] = {"cached_tokens": prompt_tokens // 2}
        model = p.served if p.echo_model else "some/path"
        want_lp = bool(body.get("logprobs"))
        top = k if k is not None else p.default_top_logprobs
        tools = bool(body.get("tools") and body.get("tool_choice"))
        if tools and not p.tools:
            return self.error(p.validation_status, "tools not supported")
        if not stream:
            out = []
            for i, (toks, finish) in enumerate(choices):
                text = "".join(toks)
                ch: dict[str, Any] = {"index": i, "finish_reason": finish}
                if chat:
                    msg: dict[str, Any] = {"role": "assistant", "content": text}
                    if tools:
                        msg["tool_calls"] = [{"index": 0, "id": "c1", "type": "function",
                                              "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
                    ch["message"] = msg
                else:
                    ch["text"] = text
                if want_lp:
                    ch["logprobs"] = {"content": [{"token": t, "logprob": -1.0,
                                                   "top_logprobs": [{"token": t, "logprob": -1.0}] * top}
                                                  for t in toks]}
                out.append(ch)
            return web.json_response({"id": "x", "object": "chat.completion", "model": model, "choices": out,
                                      "usage": usage})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)

        async def send(obj: dict[str, Any]) -> None:
            await resp.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

        for i, (toks, finish) in enumerate(choices):
            if chat:
                await send({"id": "x", "model": model, "choices": [{"index": i, "delta": {"role": "assistant"}}]})
            if tools:
                for part in ('{"city"', ': "Paris"}'):
                    await send({"id": "x", "model": model, "choices": [{"index": i, "delta": {"tool_calls": [
                        {"index": 0, "function": {"name": "get_weather", "arguments": part}}]}}]})
            for t in toks:
                d = {"content": t} if chat else None
                ch = {"index": i, "delta": d} if chat else {"index": i, "text": t}
                await send({"id": "x", "model": model, "choices": [ch]})
            fin = {"index": i, "finish_reason": finish}
            fin.update({"delta": {}} if chat else {"text": ""})
            await send({"id": "x", "model": model, "choices": [fin]})
        opts = body.get("stream_options") or {}
        if opts.get("include_usage") or p.usage_unasked:
            await send({"id": "x", "model": model, "choices": [], "usage": usage})
        await resp.write(b"data: [DONE]\n\n")
        return resp

    def _apply_stop(self, toks: list[str], stop: list[str], finish: str) -> tuple[list[str], str]:
        p = self.p
        text = "".join(toks)
        best: tuple[int, str] | None = None
        for s in stop:
            if p.stop_mode == "token":
                # token-sequence matching: the stop must start and end on token boundaries
                bounds = [0]
                for t in toks:
                    bounds.append(bounds[-1] + len(t))
                hits = [b for b in bounds if text.startswith(s, b) and b + len(s) in bounds]
                pos = hits[0] if hits else -1
            else:
                pos = text.find(s)
            if pos >= 0 and (best is None or pos < best[0]):
                best = (pos, s)
        if best is None:
            return toks, finish
        pos, s = best
        cut = text[:pos + len(s)] if p.keep_stop else text[:pos]
        out, acc = [], 0
        for t in toks:  # re-split the cut text on the original token boundaries
            if acc >= len(cut):
                break
            out.append(t[:len(cut) - acc])
            acc += len(t)
        return out, p.stop_finish
