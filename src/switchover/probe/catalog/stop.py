"""Stop strings: how many take effect, whether the stop string is kept, text vs token matching."""

from __future__ import annotations

from switchover.engines import ApiSemantics
from switchover.probe import stops
from switchover.probe.catalog._util import end_if, not_answered, rejected, send_ok, unusable
from switchover.probe.context import ProbeContext
from switchover.probe.registry import ProbeEnded, probe
from switchover.probe.report import Observation
from switchover.probe.values import StopKept, StopMatching


async def _reference(ctx: ProbeContext) -> tuple[str, list[str]]:
    """The greedy reference text and its streamed text chunks."""
    ref = await ctx.greedy()
    end_if(unusable(ref, "greedy reference"))
    return ref.text, [c for c in ref.chunk_text if c]


async def _reference_stop(ctx: ProbeContext) -> tuple[str, str, int]:
    """The greedy reference text, and a whole-token stop string from it with its position."""
    text, chunks = await _reference(ctx)
    pick = stops.token_stop(chunks, text)
    if pick is None:
        raise ProbeEnded(Observation.failed("greedy output too short to pick a stop string", text=text))
    return text, *pick


def _count_expected(api: ApiSemantics) -> dict[str, bool | int]:
    if api.max_stop_strings is not None and api.max_stop_strings < 6:
        return {"accepted": False, "status": api.validation_status, "honoured": 0}
    return {"accepted": True, "status": 200, "honoured": 6}


@probe(
    id="stop.count",
    title="Stop strings honoured out of 6",
    category="stop",
    request="6 requests at temperature 0, each with 6 stop strings; list k holds a string from the greedy "
    "output at position k and 5 strings that never occur",
    observes="whether the list is accepted, and which positions of the list stop generation",
    breaking=True,
    breaks="clients that pass more stop strings than the new engine honours run past their delimiters "
    "(or get HTTP 400 for the whole request)",
    expect=_count_expected,
)
async def stop_count(ctx: ProbeContext) -> Observation:
    text, s, pos = await _reference_stop(ctx)
    honoured: list[int] = []
    for k, lst in enumerate(stops.stop_lists(s)):
        rec = await ctx.send(temperature=0, max_tokens=48, stop=lst)
        end_if(not_answered(rec, f"stop list {k + 1}"))
        rej = rejected(rec)
        if rej is not None:
            return Observation(
                value={"accepted": False, "status": rej["status"], "honoured": 0},
                summary=f"6 stop strings rejected: HTTP {rej['status']} {rej['message'][:80]}",
                detail=rej,
            )
        if stops.outcome(rec.text, text, s, pos) != "not hit":
            honoured.append(k + 1)
    return Observation(
        value={"accepted": True, "status": 200, "honoured": len(honoured)},
        summary=f"{len(honoured)} of 6 honoured (positions {honoured or 'none'})",
        detail={"stop": s, "positions_honoured": honoured},
    )


@probe(
    id="stop.kept",
    title="Stop string kept in the output",
    category="stop",
    request="temperature 0 with one stop string taken from the greedy output",
    observes="whether the returned text ends before the stop string or includes it",
    breaking=True,
    breaks="clients that strip (or expect) the delimiter themselves get it doubled or missing",
    expect=lambda api: StopKept.KEPT if api.stop_string_in_output else StopKept.TRIMMED,
)
async def stop_kept(ctx: ProbeContext) -> Observation:
    text, s, pos = await _reference_stop(ctx)
    rec = await send_ok(ctx, "request with stop", temperature=0, max_tokens=48, stop=[s])
    out = stops.outcome(rec.text, text, s, pos)
    return Observation(
        value=out,
        summary=f"{out} (stop {s!r}, finish_reason {rec.finish_reason})",
        detail={"stop": s, "text": rec.text[-60:]},
    )


@probe(
    id="stop.matching",
    title="Stop matched on text or on tokens",
    category="stop",
    request="temperature 0 with a stop string spanning two streamed tokens, then one inside a single token",
    observes="whether each stop string ends generation (text matching does; token-sequence matching does not)",
    breaking=True,
    breaks="stop strings that do not align with token boundaries stop matching: outputs run on past them",
    expect=lambda api: StopMatching.TOKEN if api.stop_matching == "token_ids" else StopMatching.TEXT,
)
async def stop_matching(ctx: ProbeContext) -> Observation:
    text, chunks = await _reference(ctx)
    found: dict[str, str] = {}
    for name, pick in (
        ("spanning", stops.straddling_stop(chunks, text)),
        ("inside", stops.inside_token_stop(chunks, text)),
    ):
        if pick is None:
            continue
        s, pos = pick
        rec = await send_ok(ctx, f"{name} stop", temperature=0, max_tokens=48, stop=[s])
        found[name] = "matched" if stops.outcome(rec.text, text, s, pos) != "not hit" else "not matched"
    if not found:
        return Observation.failed("no multi-character tokens in the greedy output to build a stop from")
    kind = StopMatching.TEXT if all(v == "matched" for v in found.values()) else StopMatching.TOKEN
    return Observation(
        value=kind, summary=f"{kind} matching ({', '.join(f'{k}: {v}' for k, v in found.items())})", detail=found
    )
