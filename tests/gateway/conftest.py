"""An in-process stack for gateway tests: two fault-injecting upstreams (old, new) and a gateway on loopback."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from switchover.config import load_migration
from switchover.gateway.app import Gateway
from switchover.gateway.faults import FaultUpstream
from switchover.gateway.faults import running as running_upstream
from switchover.gateway.ledger import read_ledger
from switchover.gateway.ledger_record import LedgerRecord
from switchover.gateway.server import running as running_gateway
from switchover.testbed.processes import free_port

MODEL = "client-model"


@dataclass
class Stack:
    gw: Gateway
    url: str
    old: FaultUpstream
    new: FaultUpstream
    config_path: Path
    config: dict[str, Any]
    http: aiohttp.ClientSession

    def rows(self) -> list[LedgerRecord]:
        self.gw.ledger.flush()
        return list(read_ledger(self.gw.run_dir))

    def rewrite(self, **gateway_fields: Any) -> None:
        """Atomically rewrite gateway fields in the config file (what the rollout helper does)."""
        self.config["gateway"].update(gateway_fields)
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(self.config))
        tmp.replace(self.config_path)

    async def post(self, body: dict[str, Any], tenant: str = "t1", path: str = "/v1/chat/completions",
                   headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
        h = {"x-tenant-id": tenant, **(headers or {})}
        async with self.http.post(self.url + path, data=orjson.dumps(body), headers=h) as r:
            return r.status, await r.read(), dict(r.headers)


def chat(stream: bool = False, max_tokens: int = 4, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": stream,
            "max_tokens": max_tokens, **extra}


def tenant_in(gw_weight: float, arm: str, start: int = 0) -> str:
    """A tenant name that the weight sends to `arm`."""
    from switchover.gateway.policy import bucket_of, tenant_hash, threshold

    for i in range(start, start + 100000):
        t = f"tenant-{i}"
        if (bucket_of(tenant_hash(t)) < threshold(gw_weight)) == (arm == "new"):
            return t
    raise AssertionError("no tenant found")


@contextlib.asynccontextmanager
async def stack(tmp_path: Path, *, new_url: str | None = None, new_model: str = "engine-new-name",
                **gateway: Any) -> AsyncIterator[Stack]:
    old, new = FaultUpstream("old", model=MODEL), FaultUpstream("new", model=new_model, keep_bodies=4)
    async with running_upstream(old) as old_url, running_upstream(new) as nurl:
        gwcfg: dict[str, Any] = {"weight": 50, "run_dir": str(tmp_path / "run"), "reload_poll_s": 0.05,
                                 "fallback": {"on_timeout_ms": 500},
                                 "timeouts": {"connect_ms": 500, "first_byte_ms": 2000, "idle_ms": 1000},
                                 "kill_switch": {"min_samples": 1000}, **gateway}
        config = {"old": {"url": old_url, "engine": "vllm"},
                  "new": {"url": new_url or nurl, "engine": "llamacpp"}, "gateway": gwcfg}
        path = tmp_path / "switchover.yaml"
        path.write_text(yaml.safe_dump(config))
        gw = Gateway(load_migration(path), path)
        async with running_gateway(gw, port=0) as url, aiohttp.ClientSession() as http:
            yield Stack(gw, url, old, new, path, config, http)


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"
