"""Secrets never reach the ledger, the logs or the metrics: a planted key is grepped for everywhere."""

from __future__ import annotations

import logging

from switchover.testing import await_until
from tests.gateway.conftest import chat, stack

CLIENT_KEY = "sk-PLANTED-client-7f3a9c2e1d"
ENGINE_KEY = "sk-PLANTED-engine-0b8d4e6f2a"


async def test_planted_keys_never_appear_in_ledger_logs_or_metrics(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("NEW_ENGINE_KEY", ENGINE_KEY)
    async with stack(
        tmp_path, weight=50, shadow={"percent": 100}, kill_switch={"min_samples": 3}, clients={"mode": "open"}
    ) as s:
        s.config["new"]["api_key_env"] = "NEW_ENGINE_KEY"
        s.rewrite()  # reload with the engine key configured
        await await_until(lambda: s.gw.live.keys["new"], 2, "the reload with the engine key")
        for i in range(12):
            fault = ["ok", "status:503", "die_mid:1", "refuse"][i % 4]
            await s.post(
                chat(stream=i % 2 == 0), tenant="", headers={"Authorization": f"Bearer {CLIENT_KEY}", "X-Fault": fault}
            )
        s.rewrite(weight=999)  # a rejected reload logs the validation error
        async with s.http.get(s.url + "/metrics") as r:
            metrics = await r.text()
        assert s.gw.live.keys["new"] == ENGINE_KEY  # the key was in use
    text = caplog.text + metrics
    for path in s.gw.run_dir.rglob("*"):
        if path.is_file() and path.name != "admin.token":
            text += path.read_text(errors="replace")
    assert len(s.rows()) == 12 and "ledger-00000" in str(sorted(s.gw.run_dir.iterdir()))
    assert CLIENT_KEY not in text and ENGINE_KEY not in text
    assert "PLANTED" not in text
    assert all(r.prompt is None for r in s.rows())  # and no prompts without --log-prompts
