"""What the gateway writes to its ledger holds no secret a client sent (issue 22): prompts kept with
--log-prompts are redacted, short or long, and so is a 400's message that quotes the request body."""

from __future__ import annotations

from tests.gateway.conftest import chat, stack

SECRETS = "use sk-PLANTEDKEY0123456789 and password=hunter2hunter2, Authorization: Bearer abcdefghijklmnop"
LEAKS = ("PLANTEDKEY", "hunter2", "abcdefghijklmnop")


async def test_logged_prompts_are_redacted_short_or_long(tmp_path):
    async with stack(tmp_path) as s:
        s.gw.log_prompts = True
        for size in (1, 2000):  # 2000 x ~100 characters: past the length redacted inline, so off the event loop
            body = chat(max_tokens=2)
            body["messages"][0]["content"] = " ".join([SECRETS] * size)
            status, _, _ = await s.post(body)
            assert status == 200
        prompts = [r.prompt for r in s.rows()]
    assert len(prompts) == 2 and all(p and "sk-***" in p for p in prompts)
    assert not any(leak in (p or "") for p in prompts for leak in LEAKS)


async def test_a_bad_request_quoting_a_secret_is_masked_in_the_ledger(tmp_path):
    async with stack(tmp_path) as s:
        body = chat()
        body["model"] = {"api_key": "sk-PLANTEDKEY0123456789"}  # 400: 'model' must be a string, got {...}
        status, _, _ = await s.post(body)
        assert status == 400
        errors = [r.error for r in s.rows()]
    assert len(errors) == 1 and errors[0] and "PLANTEDKEY" not in errors[0] and "***" in errors[0]
