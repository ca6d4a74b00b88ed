"""`run_verify` end to end against fake engines: divergences found, boundary searched, partial on a dead side."""

from __future__ import annotations

from switchover.probe import Target
from switchover.testing import Persona
from switchover.verify import BUILTIN, VerifyOptions, run_verify
from tests.probe.conftest import serve


async def test_same_fake_on_both_sides_is_identical_and_boundary_is_below_the_context() -> None:
    async with serve(Persona(context=600)) as a, serve(Persona(context=600)) as b:
        r = await run_verify(Target(a), Target(b), BUILTIN[:4], VerifyOptions(structured=2))
    assert r.summary is not None and r.summary.identical == 4 and r.summary.flagged == 0
    assert r.summary.token_agreement_mean == 1.0
    assert [s.valid for s in r.structured] == [0, 0]  # the fake answers {"ok": true}, not the schema
    side = r.long_inputs[0]
    assert side.context == 600 and len(side.checks) == 3
    # the two English inputs fit; the fake over-counts escaped CJK, so the Chinese one may be refused: reported
    assert [c.status for c in side.checks[:2]] == ["ok", "ok"] and side.checks[2].status in ("ok", "error")
    assert 300 <= side.checks[0].prompt_tokens <= 420
    b_ = side.boundary
    assert b_ is not None and b_.longest_ok_prompt_tokens is not None and b_.longest_ok_prompt_tokens < 600
    assert b_.failure is not None and "exceeds the context" in b_.failure


async def test_different_fakes_diverge_where_expected_and_early_divergence_is_flagged() -> None:
    cases = [c.model_copy(update={"max_tokens": 12}) for c in BUILTIN[:3]]
    async with (
        serve(Persona(context=600)) as a,
        serve(Persona(context=600, salt="x", salt_after=4)) as b,
        serve(Persona(context=600, salt="y", salt_after=0, served="other")) as c,
    ):
        late = await run_verify(Target(a), Target(b), cases, VerifyOptions(structured=0, long_inputs=False))
        early = await run_verify(
            Target(a), Target(c, model="other"), cases, VerifyOptions(structured=0, long_inputs=False)
        )
    assert late.summary is not None and late.summary.identical == 0
    assert all(d.first_token == 4 or d.first_char is not None for d in late.greedy)
    assert [d.first_token for d in late.greedy if d.old_tokens] and late.summary.token_agreement_mean < 1.0
    assert early.model_new == "other" and early.summary is not None
    assert early.summary.flagged >= 1 and any("first 8" in f for d in early.greedy for f in d.flags)


async def test_endpoint_dying_mid_verify_gives_a_partial_report() -> None:
    async with serve(Persona(context=600)) as a, serve(Persona(context=600, die_after=3)) as b:
        r = await run_verify(Target(a), Target(b), BUILTIN[:6], VerifyOptions(structured=0, long_inputs=False))
    assert r.partial and r.partial_reason and len(r.greedy) == 3
