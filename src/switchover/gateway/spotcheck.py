"""Spot-check pairs for human review (docs/review.md): a sampled generation request is sent once more to each arm,
off the client's path, and the prompt with both answers, redacted, becomes a pair in the review database.

Both answers come from copies (not from the client's own answer), so the client's path is untouched and the two
answers are produced the same way; a pair costs one extra request on each arm. Copies carry no client credentials
(the arms' own keys in keys / open mode; no credential-named header or query parameter: headers.py), are bounded
by `review.max_concurrency` (a sample beyond it is skipped, never queued) and `review.timeout_ms`, and are
cancelled when the gateway stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any

import orjson

from switchover.config.gateway import ReviewConfig
from switchover.evidence.review import Pair
from switchover.evidence.review_store import ReviewStore
from switchover.gateway.headers import copy_target, forward_headers
from switchover.gateway.live import Live
from switchover.gateway.review_sampler import Quota, Redactor, task_type
from switchover.gateway.shadow import GENERATION_PATHS, shadow_body
from switchover.httpfront.messages import FrontRequest
from switchover.ledger_record import RequestRow
from switchover.wire.client import EngineClient, Timeouts
from switchover.wire.records import RequestRecord

log = logging.getLogger("switchover.gateway")


def render_prompt(obj: dict[str, Any]) -> str:
    """What a reviewer reads as the prompt: each chat message as `role: text`, or the completion prompt."""
    messages = obj.get("messages")
    if isinstance(messages, list):
        lines = []
        for m in messages:
            if not isinstance(m, dict):
                continue
            content = m.get("content")
            if isinstance(content, list):
                content = "\n".join(
                    c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)
                )
            lines.append(f"{m.get('role', '?')}: {content if isinstance(content, str) else ''}")
        return "\n".join(lines)
    prompt = obj.get("prompt")
    if isinstance(prompt, str):
        return prompt
    return orjson.dumps(prompt).decode() if prompt is not None else ""


def answer_text(rec: RequestRecord) -> str:
    """The answer of choice 0 (tool calls appended as JSON), or what went wrong."""
    text = rec.text
    if rec.tool_calls:
        text += "\n" + "\n".join(
            orjson.dumps({"name": t.name, "arguments": t.arguments}).decode() for t in rec.tool_calls
        )
    return text


def utc_day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


class SpotCheck:
    """Samples pairs and writes them to the review database in the run directory."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.quota: Quota | None = None
        self.store: ReviewStore | None = None
        self.clients: dict[tuple[str, float], EngineClient] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.written = 0
        self.skipped = 0

    def _quota(self, cfg: ReviewConfig) -> Quota:
        if self.quota is None or self.quota.cfg != cfg:
            old = self.quota
            self.quota = Quota(cfg)
            if old is not None:
                self.quota.load(old.day, old.counts)
            else:
                with contextlib.suppress(Exception):  # no database yet, or unreadable: start the day at 0
                    day = utc_day(time.time())
                    self.quota.load(day, self._open(cfg).counts_today(day))
        return self.quota

    def _open(self, cfg: ReviewConfig) -> ReviewStore:
        path = self.run_dir / cfg.db
        if self.store is None or self.store.path != path:
            if self.store is not None:
                self.store.close()
            self.store = ReviewStore.open(path)
        return self.store

    def maybe(self, live: Live, request: FrontRequest, obj: dict[str, Any] | None, row: RequestRow) -> bool:
        """Start a pair for this request when it is sampled; True when one was started."""
        cfg = live.gw.review
        if cfg.pairs_per_day <= 0 or obj is None or request.method != "POST" or request.path not in GENERATION_PATHS:
            return False
        asked = row.model
        kind = row.task_type or task_type(live.gw.task_types, request.path, asked, request.headers.get)
        now = time.time()
        quota = self._quota(cfg)
        if not quota.take(utc_day(now), kind):
            return False
        if len(self.tasks) >= cfg.max_concurrency:  # sampled, but too many pairs in flight: skipped, not queued
            quota.give_back(utc_day(now), kind)
            self.skipped += 1
            return False
        headers = {
            arm: dict(
                forward_headers(
                    request.headers.items,
                    live.clients.credentials,
                    keep_credentials=False,
                    api_key=live.engine_key(arm),
                )
            )
            for arm in ("old", "new")
        }
        bodies = {arm: shadow_body(obj, live.models[arm] or asked, None) for arm in ("old", "new")}
        target = copy_target(request.upstream_target)  # no ?api_key= on a copy
        task = asyncio.ensure_future(
            self._pair(live, cfg, target, request.path, bodies, headers, kind, row.request_id, asked, obj, now)
        )
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return True

    def _client(self, url: str, timeout_s: float) -> EngineClient:
        key = (url, timeout_s)
        client = self.clients.get(key)
        if client is None:
            t = Timeouts(connect=min(5.0, timeout_s), first_byte=timeout_s, idle=timeout_s, total=timeout_s)
            client = self.clients[key] = EngineClient(url, timeouts=t)
        return client

    async def _pair(
        self,
        live: Live,
        cfg: ReviewConfig,
        target: str,
        path: str,
        bodies: dict[str, bytes],
        headers: dict[str, dict[str, str]],
        kind: str,
        request_id: str,
        model: str | None,
        obj: dict[str, Any],
        ts: float,
    ) -> None:
        timeout_s = cfg.timeout_ms / 1000
        try:
            old, new = await asyncio.gather(
                *(
                    self._client(live.urls[arm], timeout_s).post(target, bodies[arm], headers[arm], stream=True)
                    for arm in ("old", "new")
                )
            )
        except asyncio.CancelledError:
            return
        except Exception as exc:  # a header the wire client refuses: no pair, said once
            log.warning("spot-check pair for %s not made: %s", request_id, type(exc).__name__)
            return
        clean = Redactor(cfg)
        # redaction is CPU work over client text (up to review.max_chars each): off the event loop (issue 22)
        pair = await asyncio.to_thread(
            lambda: Pair(
                ts=ts,
                day=utc_day(ts),
                task_type=kind,
                request_id=request_id,
                path=path,
                model=model,
                prompt=clean(render_prompt(obj)),
                old_answer=clean(answer_text(old)),
                new_answer=clean(answer_text(new)),
                old_status=old.status,
                new_status=new.status,
                old_error=None if old.failure is None else clean(old.failure.message)[:300],
                new_error=None if new.failure is None else clean(new.failure.message)[:300],
                old_finish_reason=old.finish_reason,
                new_finish_reason=new.finish_reason,
            )
        )
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, lambda: self._open(cfg).add_pair(pair))
            self.written += 1
        except Exception as exc:
            log.error("spot-check pair %s could not be stored in %s: %s", request_id, self.run_dir / cfg.db, exc)

    async def close(self) -> None:
        for t in list(self.tasks):
            t.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        for client in self.clients.values():
            await client.close()
        self.clients.clear()
        if self.store is not None:
            self.store.close()
            self.store = None
