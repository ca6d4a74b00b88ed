"""Gateway on real engines: vLLM CPU (the bed's old) and a llama-server of our own as new, weight 20, shadow 100 %.

The new arm is a llama-server started here (not the bed's), so stopping it leaves the shared bed running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml

from switchover.config import load_migration
from switchover.gateway.app import Gateway
from switchover.gateway.policy import bucket_of, tenant_hash, threshold
from switchover.gateway.server import running
from switchover.ledger_files import read_ledger, read_requests
from switchover.ledger_record import LedgerRecord, ShadowRecord
from switchover.testbed import processes
from switchover.testbed.layout import bed_models
from switchover.wire.readiness import check_ready
from switchover.wire.sse import parse_all

pytestmark = pytest.mark.engines


class OwnLlama:
    """A llama-server this module starts and stops (the new arm)."""

    def __init__(self, bed: Any) -> None:
        model = bed_models(bed.layout)[bed.key]
        self.port = processes.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = processes.llama_command(bed.layout, model, self.port, threads=1)
        self.log = bed.layout.run / f"gateway-test-llama-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.model = model.served_name

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(
                self.cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"llama-server exited; see {self.log}"
            r = asyncio.run(check_ready(self.url, model=self.model, max_ms=10000, connect_timeout_s=1))
            if r.ready:
                return
            time.sleep(0.3)  # a bounded poll
        raise AssertionError(f"llama-server not ready in 60 s; see {self.log}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture(scope="module")
def new_arm(bed: Any) -> Iterator[OwnLlama]:
    llama = OwnLlama(bed)
    llama.start()
    try:
        yield llama
    finally:
        llama.stop()


@contextlib.asynccontextmanager
async def gateway(
    tmp_path: Path, old_url: str, new_url: str, old_model: str | None = None, **gw: Any
) -> AsyncIterator[tuple[Gateway, str, Path, dict[str, Any]]]:
    old: dict[str, Any] = {"url": old_url, "engine": "vllm", **({"model": old_model} if old_model else {})}
    config = {
        "old": old,
        "new": {"url": new_url, "engine": "llamacpp"},
        "gateway": {
            "weight": 20,
            "run_dir": "run",
            "reload_poll_s": 0.1,
            "shadow": {"percent": 100, "max_concurrency": 8, "max_tokens_clamp": 8},
            **gw,
        },
    }
    path = tmp_path / "switchover.yaml"
    path.write_text(yaml.safe_dump(config))
    gw_ = Gateway(load_migration(path), path)
    async with running(gw_, port=0) as url:
        yield gw_, url, path, config


def rewrite(path: Path, config: dict[str, Any], **fields: Any) -> None:
    config["gateway"].update(fields)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config))
    tmp.replace(path)


async def post(
    http: aiohttp.ClientSession,
    url: str,
    model: str,
    tenant: str,
    *,
    stream: bool = False,
    max_tokens: int = 4,
    **extra: Any,
) -> tuple[int, bytes]:
    body = {
        "model": model,
        "prompt": "The capital of France is",
        "max_tokens": max_tokens,
        "stream": stream,
        "temperature": 0,
        **extra,
    }
    headers = {"x-tenant-id": tenant, "Content-Type": "application/json"}
    async with http.post(
        url + "/v1/completions", data=orjson.dumps(body), headers=headers, timeout=aiohttp.ClientTimeout(total=60)
    ) as r:
        return r.status, await r.read()


async def settle(gw: Gateway, n: int, mirrors: int = 0) -> list[LedgerRecord]:
    """The request rows once `n` are written and `mirrors` shadow rows too (a mirror writes its own row when
    it ends, after its request's row)."""
    for _ in range(400):
        if gw.ledger.written >= n and gw.ledger.shadows_written >= mirrors:
            break
        await asyncio.sleep(0.05)  # a bounded poll
    gw.ledger.flush()
    return list(read_requests(gw.run_dir))


def mirrors_of(gw: Gateway) -> dict[str, ShadowRecord]:
    """The shadow rows by request id."""
    gw.ledger.flush()
    return {r.request_id: r for r in read_ledger(gw.run_dir) if isinstance(r, ShadowRecord)}


TENANTS = [f"customer-{i}" for i in range(40)]


async def shadow_room(gw: Gateway, deadline_s: float = 60.0) -> None:
    """Wait until no mirror is in flight: the new arm (one thread) is slower than old, and mirrors sent faster than
    it serves them are dropped by design (tests/gateway covers that); this test is about what a mirror records."""
    t = time.monotonic() + deadline_s
    while gw.shadow.in_flight and time.monotonic() < t:
        await asyncio.sleep(0.02)  # a bounded poll


async def test_weight_20_is_sticky_monotonic_and_shadowed(bed, new_arm, tmp_path):
    async with gateway(tmp_path, bed.old_url, new_arm.url) as (gw, url, path, config), aiohttp.ClientSession() as h:
        for _ in range(2):
            for t in TENANTS:
                status, body = await post(h, url, bed.model, t)
                assert status == 200 and orjson.loads(body)["model"] == bed.model, body[:300]
                await shadow_room(gw)
        at20 = {t for t in TENANTS if bucket_of(tenant_hash(t, gw.tenant_seed)) < threshold(20)}
        rows = await settle(gw, 2 * len(TENANTS), mirrors=2 * (len(TENANTS) - len(at20)))
        arms: dict[str, set[str]] = {}
        for r in rows:
            arms.setdefault(r.tenant, set()).add(r.arm)
        assert all(len(a) == 1 for a in arms.values())  # sticky: a tenant never changes arm at a fixed weight
        for r in rows:  # the arm is exactly the bucket rule
            assert r.arm == ("new" if r.bucket < threshold(20) else "old") and r.outcome == "ok"
        assert 0 < len(at20) < len(TENANTS)
        shadowed = [r for r in rows if r.arm == "old"]
        mirrors = mirrors_of(gw)
        sh = [mirrors[r.request_id].shadow if r.request_id in mirrors else None for r in shadowed]
        bad = [m for m in sh if not (m and m.status == 200 and m.completion_tokens)]
        assert shadowed and all(r.shadowed for r in shadowed) and not bad, bad[:3]
        assert not any(r.shadowed for r in rows if r.arm == "new")  # no mirror of what new already serves
        assert {m.request_id for m in mirrors.values()} == {r.request_id for r in shadowed}
        rewrite(path, config, weight=50)
        for _ in range(100):
            if gw.live.gw.weight == 50:
                break
            await asyncio.sleep(0.02)  # a bounded poll
        t_reload = time.time()
        for t in TENANTS:
            await post(h, url, bed.model, t)
        rows50 = [r for r in await settle(gw, 3 * len(TENANTS)) if r.ts >= t_reload]
        assert len(rows50) == len(TENANTS)
        new20 = {tenant_hash(t, gw.tenant_seed) for t in at20}
        new50 = {r.tenant for r in rows50 if r.arm == "new"}
        assert new20 < new50  # raising the weight only moved tenants old -> new


async def test_streams_through_both_arms_are_normalised_and_measured(bed, new_arm, tmp_path):
    async with gateway(tmp_path, bed.old_url, new_arm.url, weight=50) as (gw, url, _, _), aiohttp.ClientSession() as h:
        t_new = next(t for t in TENANTS if bucket_of(tenant_hash(t, gw.tenant_seed)) < threshold(50))
        t_old = next(t for t in TENANTS if bucket_of(tenant_hash(t, gw.tenant_seed)) >= threshold(50))
        for t in (t_new, t_old):
            status, body = await post(h, url, bed.model, t, stream=True, max_tokens=8)
            evs = parse_all([body])
            assert status == 200 and evs[-1].data == b"[DONE]"
            assert all(orjson.loads(e.data)["model"] == bed.model for e in evs[:-1])
        rows = await settle(gw, 2)
        assert [r.arm for r in rows] == ["new", "old"]
        for r in rows:
            assert r.ttft_ms and r.ttft_ms > 0 and r.completion_tokens == 8 and r.finish_reason == "length"


async def test_a_chat_stream_under_a_client_alias_is_renamed_both_ways_and_measured(bed, new_arm, tmp_path):
    """The client asks for a name vLLM does not serve; the gateway sends vLLM its own name and answers with the
    client's, asks vLLM for usage and strips it again (the client did not ask), and measures from that usage."""
    async with (
        gateway(tmp_path, bed.old_url, new_arm.url, old_model=bed.model, weight=0) as (gw, url, _, _),
        aiohttp.ClientSession() as h,
    ):
        body = {
            "model": "client-alias",
            "messages": [{"role": "user", "content": "Name a colour."}],
            "max_tokens": 8,
            "stream": True,
            "temperature": 0,
        }
        async with h.post(
            url + "/v1/chat/completions",
            data=orjson.dumps(body),
            headers={"x-tenant-id": "alias-tenant", "Content-Type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=60),
        ) as r:
            status, raw = r.status, await r.read()
        assert status == 200, raw[:300]  # vLLM itself answers 404 for "client-alias"
        evs = parse_all([raw])
        assert evs[-1].data == b"[DONE]"
        chunks = [orjson.loads(e.data) for e in evs[:-1]]
        assert chunks and all(c["model"] == "client-alias" for c in chunks)
        assert all(c.get("usage") is None for c in chunks)  # asked upstream for the ledger, not passed on
        [row] = await settle(gw, 1)
        assert (row.arm, row.outcome, row.tokens_source) == ("old", "ok", "usage")
        assert row.completion_tokens and row.completion_tokens > 0 and row.ttft_ms and row.ttft_ms > 0
        assert row.model == "client-alias"


async def _vllm_counts(h: aiohttp.ClientSession, url: str) -> tuple[float, float]:
    """(requests running, generation tokens so far) from vLLM's own /metrics."""
    async with h.get(url + "/metrics") as r:
        text = await r.text()
    vals: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0]
        if name in ("vllm:num_requests_running", "vllm:generation_tokens_total"):
            vals[name] = vals.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return vals["vllm:num_requests_running"], vals["vllm:generation_tokens_total"]


async def test_a_client_that_leaves_mid_stream_stops_the_generation_on_vllm(bed, new_arm, tmp_path):
    """Told by vLLM's own counters: the request asks for 1,900 tokens with EOS ignored, so only a cancellation
    ends it short of them. The client leaves after the first bytes; vLLM then stops the request.

    vLLM's API server hears of a disconnect only when it gets the CPU: on a starved 2-core machine it can send its
    first bytes, or act on the disconnect, only after the engine has generated everything (seen in CI, and
    reproduced with two busy loops on the test bed: also without the gateway, 3 of 40 direct requests). Such an
    attempt proves nothing either way, so up to five are made, a second apart; a gateway that never closes the
    upstream fails all five."""
    async with gateway(tmp_path, bed.old_url, new_arm.url, weight=0) as (gw, url, _, _), aiohttp.ClientSession() as h:
        body = {
            "model": bed.model,
            "prompt": "Once upon a time",
            "max_tokens": 1900,
            "ignore_eos": True,
            "stream": True,
            "temperature": 0,
        }
        generated: list[float] = []
        for attempt in range(5):
            if attempt:
                await asyncio.sleep(1)  # a bounded retry (5 attempts): let a starved machine catch up
            _, before = await _vllm_counts(h, bed.old_url)
            async with h.post(
                url + "/v1/completions",
                data=orjson.dumps(body),
                headers={"x-tenant-id": "leaver", "Content-Type": "application/json"},
            ) as r:
                assert r.status == 200
                await r.content.readany()  # the stream is running: first bytes arrived
                r.close()  # the client goes away
            running, after, deadline = 1.0, before, time.monotonic() + 30
            while time.monotonic() < deadline:
                running, after = await _vllm_counts(h, bed.old_url)
                if running == 0:
                    break
                await asyncio.sleep(0.05)  # a bounded poll
            assert running == 0, "vLLM still runs the request 30 s after the client left"
            generated.append(after - before)
            if after - before < 1900:
                break
        rows = await settle(gw, len(generated))
        assert generated[-1] < 1900, (
            "vLLM generated all 1,900 tokens each time the client left",
            generated,
            [r.outcome for r in rows],
        )
        assert rows[-1].outcome == "client_disconnected" and rows[-1].status == 499


async def test_rollback_by_editing_one_line_while_a_stream_is_in_flight(bed, new_arm, tmp_path):
    async with (
        gateway(tmp_path, bed.old_url, new_arm.url, weight=100) as (gw, url, path, config),
        aiohttp.ClientSession() as h,
    ):
        task = asyncio.ensure_future(post(h, url, bed.model, "t", stream=True, max_tokens=1500, ignore_eos=True))
        for _ in range(200):
            if len(gw.inflight):
                break
            await asyncio.sleep(0.01)  # a bounded poll
        rewrite(path, config, rollback=True)
        assert gw.reload()  # what SIGHUP does; the file watcher would pick it up within reload_poll_s too
        assert gw.live.gw.rollback
        assert len(gw.inflight) == 1  # the stream is still running after the reload
        status, _ = await post(h, url, bed.model, "t")
        status_stream, body = await task
        assert status == 200 and status_stream == 200
        assert parse_all([body])[-1].data == b"[DONE]" and b"upstream_error" not in body
        rows = await settle(gw, 2)
        by_reason = {r.route_reason: r for r in rows}
        assert by_reason["rollback"].arm == "old"
        assert by_reason["weight"].arm == "new" and by_reason["weight"].outcome == "ok"
        assert by_reason["weight"].completion_tokens and by_reason["weight"].completion_tokens > 1


async def test_stopping_the_new_engine_falls_back_then_trips_the_kill_switch(bed, new_arm, tmp_path):
    ks = {"min_samples": 6, "max_fallback_ratio": 0.5, "window": 60}
    async with (
        gateway(tmp_path, bed.old_url, new_arm.url, weight=100, kill_switch=ks, shadow={"percent": 0}) as (
            gw,
            url,
            _,
            _,
        ),
        aiohttp.ClientSession() as h,
    ):
        assert (await post(h, url, bed.model, "t0"))[0] == 200
        new_arm.stop()
        statuses = [(await post(h, url, bed.model, f"t{i}", stream=i % 2 == 0))[0] for i in range(1, 10)]
        assert statuses == [200] * 9  # no client ever saw the failure
        rows = await settle(gw, 10)
        assert rows[0].arm == "new" and rows[0].outcome == "ok"
        fell = [r for r in rows[1:] if r.fallback_reason]
        # 1 ok + 5 fallbacks = 5/6 > 0.5 with min_samples 6: the sixth new-arm request trips it
        assert len(fell) == 5 and all(r.arm == "old" and r.outcome == "fallback_ok" for r in fell)
        assert [r.route_reason for r in rows[6:]] == ["kill_switch"] * 4
        assert fell[0].fallback_reason in ("connect", "disconnected")
        assert gw.killswitch.latched
        assert rows[-1].route_reason == "kill_switch" and rows[-1].fallback_reason is None
        async with h.get(url + "/metrics") as r:
            assert "switchover_gateway_kill_switch_latched 1.0" in await r.text()


async def test_metrics_adapter_on_real_engine_scrapes(bed):
    from prometheus_client.parser import text_string_to_metric_families

    from switchover.engines.profile import load_profile
    from switchover.gateway import metrics_adapter as ma

    vllm, sglang, llama = load_profile("vllm"), load_profile("sglang"), load_profile("llamacpp")
    raw = await ma.scrape(ma.scrape_url(bed.old_url, vllm))
    text, report = ma.convert(raw, ma.plan(vllm, sglang))
    assert {"ttft", "e2e", "running", "prompt_tokens"} <= set(report["served"])
    src = {
        s.name: s.value
        for f in text_string_to_metric_families(raw)
        for s in f.samples
        if s.name == "vllm:time_to_first_token_seconds_count"
    }
    out = {f.name: f for f in text_string_to_metric_families(text)}
    ttft = out["sglang:time_to_first_token_seconds"]
    count = next(s.value for s in ttft.samples if s.name.endswith("_count"))
    assert count == sum(src.values()) > 0  # counts carried over exactly
    les = [s.labels["le"] for s in ttft.samples if s.name.endswith("_bucket")]
    assert len(les) == len(sglang.metric("ttft").buckets) + 1  # SGLang's buckets, not vLLM's
    raw = await ma.scrape(ma.scrape_url(bed.new_url, llama))
    text, report = ma.convert(raw, ma.plan(llama, vllm), model=bed.model)
    assert {"running", "prompt_tokens", "generation_tokens"} <= set(report["served"])
    assert "ttft" in report["skipped"]  # llama.cpp exports no latency histograms
    assert f'vllm:num_requests_running{{model_name="{bed.model}"}}' in text


async def test_spot_check_pairs_hold_both_real_engines_answers_redacted(bed, tmp_path):
    """Against the test bed's own llama-server: this module's new_arm is stopped by an earlier test."""
    from switchover.evidence.review_store import ReviewStore

    review = {"pairs_per_day": 3, "per_type_per_day": 3, "sample_percent": 100, "max_concurrency": 4}
    async with (
        gateway(tmp_path, bed.old_url, bed.new_url, weight=0, review=review, shadow={"percent": 0}) as (gw, url, _, _),
        aiohttp.ClientSession() as h,
    ):
        for i in range(3):
            body = {
                "model": bed.model,
                "messages": [{"role": "user", "content": f"write to ann@example.com #{i}"}],
                "max_tokens": 8,
                "temperature": 0,
            }
            async with h.post(
                url + "/v1/chat/completions",
                data=orjson.dumps(body),
                headers={"x-task-type": "email", "Content-Type": "application/json"},
            ) as r:
                assert r.status == 200
        for _ in range(600):  # both real engines answer each copy; bounded at 60 s
            if gw.spotcheck.written >= 3:
                break
            await asyncio.sleep(0.1)  # a bounded poll
        assert gw.spotcheck.written == 3
        store = ReviewStore.open(gw.run_dir / "review.sqlite", create=False)
        try:
            s = store.summary()
            assert [(t.task_type, t.pairs) for t in s.types] == [("email", 3)]
            p = store.next_unrated()
            assert p is not None and (p.old_status, p.new_status) == (200, 200)
            assert p.old_answer.strip() and p.new_answer.strip()  # vLLM's and llama-server's own words
            assert "ann@example.com" not in p.prompt and "[email]" in p.prompt
        finally:
            store.close()
