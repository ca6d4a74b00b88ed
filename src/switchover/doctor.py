"""`switchover doctor`: symptom → likely cause → the switchover command that confirms it.

The table is data, each row citing where the diagnosis comes from: seed 001 §6 ("five ways a canary gets
slow or strange") and seed 000's tables (§1 impact areas, their "how it shows when missed" column; §2
batch limits; §4 API semantics; §6 readiness and metrics units). Matching is fuzzy: words and aliases
are scored, so "p99 went up but qps is flat" finds the first row.
"""

from __future__ import annotations

import difflib
import re

from pydantic import BaseModel, Field

from switchover.errors import BadInput


class Cause(BaseModel):
    cause: str
    confirm: list[str] = Field(description="switchover commands that confirm or rule it out")
    fix: str
    source: str


class Symptom(BaseModel):
    key: str
    symptom: str
    aliases: list[str] = Field(default_factory=list)
    causes: list[Cause]


class Diagnosis(BaseModel):
    query: str
    score: float
    symptom: Symptom


SYMPTOMS: tuple[Symptom, ...] = (
    Symptom(
        key="p99-up-qps-flat",
        symptom="P99 latency went up while QPS stayed flat",
        aliases=[
            "tail latency up",
            "p99 up",
            "slower at same load",
            "latency regression during canary",
            "ttft p99 higher",
            "same traffic slower",
        ],
        causes=[
            Cause(
                cause="Both versions resident during the canary: two copies of the weights halve the KV pool, "
                "so effective concurrency halves (20 % and 50 % need the same capacity)",
                confirm=[
                    "switchover plan -c switchover.yaml   # capacity with both copies resident",
                    "switchover bench -c switchover.yaml  # where each engine's latency knee sits",
                ],
                fix="size the canary for two resident copies of the weights, not for 20 % of the traffic",
                source="seed 001 §2 and §6 row 1",
            ),
            Cause(
                cause="Past the new engine's concurrency knee: its TPOT tail bends at a lower load than old's",
                confirm=["switchover bench -c switchover.yaml  # concurrency ladder, knee per engine"],
                fix="cap the canary weight below the knee; re-tune batch limits",
                source="seed 000 §5 (knee)",
            ),
        ],
    ),
    Symptom(
        key="wrong-answers-few",
        symptom="A few requests get wrong or off-topic answers",
        aliases=[
            "answers unrelated",
            "garbled output",
            "off topic",
            "wrong answers for some requests",
            "semantic drift",
            "stale answers",
        ],
        causes=[
            Cause(
                cause="A prefix, KV or semantic cache key lacks the model version (weights hash): new requests "
                "hit state computed by the old weights",
                confirm=[
                    "switchover diff-model -c switchover.yaml  # weights/tokenizer/template fingerprints",
                    "switchover verify -c switchover.yaml      # greedy divergence, per prompt",
                ],
                fix="put model id + weights hash + tokenizer hash + template hash in every cache key; the first "
                "requests on new should show a cache hit rate near 0",
                source="seed 001 §4 and §6 row 2",
            ),
            Cause(
                cause="Precision / kernel differences that only show on long inputs",
                confirm=["switchover verify -c switchover.yaml  # long-input boundary and divergence position"],
                fix="treat a new quantisation as a new model and evaluate it on its own",
                source="seed 000 §3",
            ),
        ],
    ),
    Symptom(
        key="empty-at-switch",
        symptom="Empty or truncated responses at switch time",
        aliases=[
            "empty response",
            "half json",
            "cut off during deploy",
            "blank answers on rollout",
            "requests fail during restart",
            "stream ends early at switch",
        ],
        causes=[
            Cause(
                cause="The old instance was killed with requests in flight: the drain grace is shorter than the "
                "longest generation (max_tokens × TPOT p99)",
                confirm=[
                    "switchover plan -c switchover.yaml  # drain grace arithmetic",
                    "switchover drill --stop-new CMD --start-old CMD --url URL  # measured recovery time",
                ],
                fix="set drain_grace / terminationGracePeriodSeconds ≥ max_tokens × TPOT p99 under load",
                source="seed 001 §3 and §6 row 3",
            ),
            Cause(
                cause="Traffic reached an instance that listens but has not loaded the model yet",
                confirm=["switchover ready URL --max-ms 2000  # a 1-token generation, not a port check"],
                fix="point the readiness probe at a 1-token generation",
                source="seed 000 §6 (readiness)",
            ),
        ],
    ),
    Symptom(
        key="token-usage-down",
        symptom="Token usage suddenly went down",
        aliases=[
            "fewer tokens billed",
            "prompt_tokens lower",
            "usage dropped",
            "token count decreased",
            "cost went down unexpectedly",
        ],
        causes=[
            Cause(
                cause="A tokenizer cache keyed without the tokenizer hash returns old token ids, so prompt_tokens "
                "is counted with the wrong tokenizer (and rate limits and budgets with it)",
                confirm=[
                    "switchover diff-model -c switchover.yaml  # tokenizer fingerprint and token-count diff",
                    "switchover probe --old OLD --new NEW    # usage fields side by side",
                ],
                fix="add the tokenizer hash to the cache key",
                source="seed 001 §4 and §6 row 4",
            ),
            Cause(
                cause="The engines count usage differently (cached tokens, where they are counted)",
                confirm=["switchover probe --old OLD --new NEW  # usage semantics"],
                fix="normalise usage in the gateway or the billing code",
                source="seed 000 §4 (usage row)",
            ),
        ],
    ),
    Symptom(
        key="instruction-following-worse",
        symptom='"Instruction following got worse" with the new model',
        aliases=[
            "model got dumber",
            "ignores system prompt",
            "worse quality",
            "role confusion",
            "does not follow instructions",
            "format broken",
        ],
        causes=[
            Cause(
                cause="The chat template was not switched: role markers and the system position are the old "
                "model's, so the new model completes in the old style",
                confirm=["switchover diff-model -c switchover.yaml  # chat template diff"],
                fix="align the chat template first, then evaluate quality",
                source="seed 001 §1 and §6 row 5",
            ),
            Cause(
                cause="Sampling defaults differ (temperature, top_p, repetition penalty) or were tuned in client "
                "code that did not move",
                confirm=["switchover probe --old OLD --new NEW  # defaults and ignored parameters"],
                fix="send the sampling parameters explicitly",
                source="seed 000 §1 (defaults row) and 'three things not in the code'",
            ),
        ],
    ),
    Symptom(
        key="style-changed",
        symptom="Output style changed abruptly; users noticed first",
        aliases=["output longer", "output shorter", "markdown appeared", "answers look different"],
        causes=[
            Cause(
                cause="Default sampling parameters, stop handling or truncation behave differently",
                confirm=[
                    "switchover probe --old OLD --new NEW        # stop, defaults, finish_reason",
                    "switchover rollout compare --mode shadow  # output length and finish_reason mix",
                ],
                fix="pin sampling parameters and stop sequences in the request",
                source="seed 000 §1 (defaults row)",
            ),
        ],
    ),
    Symptom(
        key="output-does-not-stop",
        symptom="Output does not stop where expected / a stop string shows up in the text",
        aliases=["stop ignored", "stop sequence not working", "extra tail after stop", "runs to max_tokens"],
        causes=[
            Cause(
                cause="Stop matching differs (decoded text vs token ids), the stop string is kept in the text, "
                "or only the first few stop strings are honoured",
                confirm=["switchover probe --old OLD --new NEW  # the stop probes"],
                fix="send fewer stop strings, strip stops in post-processing, or match on the text yourself",
                source="seed 000 §4 (stop pitfalls)",
            ),
        ],
    ),
    Symptom(
        key="flaky-seeded-tests",
        symptom="Regression tests with a fixed seed started failing at random",
        aliases=["seed ignored", "non deterministic", "temperature 0 differs", "different output each run"],
        causes=[
            Cause(
                cause="The new engine accepts `seed` (or another parameter) and silently ignores it",
                confirm=["switchover probe --old OLD --new NEW  # seed and unknown-parameter probes"],
                fix="do not rely on seed with this engine; compare greedily instead",
                source="seed 000 §4 (seed row)",
            ),
        ],
    ),
    Symptom(
        key="long-tail-timeouts",
        symptom="Occasional long-tail timeouts that load tests do not reproduce",
        aliases=["sporadic timeouts", "requests time out sometimes", "queueing"],
        causes=[
            Cause(
                cause="Scheduling changed: queue order, timeout semantics, reject-vs-wait",
                confirm=[
                    "switchover bench -c switchover.yaml  # Poisson arrivals, not only closed loop",
                    "switchover probe --old OLD --new NEW  # overload and error semantics",
                ],
                fix="recompute timeouts, retries and concurrency limits for the new scheduler",
                source="seed 000 §1 (scheduling row)",
            ),
        ],
    ),
    Symptom(
        key="concurrency-low-or-oom",
        symptom="OOM after launch, or concurrency far below what was expected",
        aliases=["out of memory", "kv cache full", "concurrency lower than expected", "batch not full"],
        causes=[
            Cause(
                cause="max_model_len reserves KV per request, or a token budget (max_batch_tokens) limits "
                "batches before max_num_seqs does",
                confirm=["switchover plan -c switchover.yaml  # KV bytes, per-request reservation, batch limits"],
                fix="set sequence length and KV budget together; raise the token budget",
                source="seed 000 §1 (KV row) and §2",
            ),
        ],
    ),
    Symptom(
        key="dashboards-flat",
        symptom="Dashboards broke or read near zero after the switch",
        aliases=["metrics missing", "graphs flat", "alerts silent", "metric names changed"],
        causes=[
            Cause(
                cause="Metric names, units (s vs ms: a factor of 1000) and bucket edges differ between engines",
                confirm=[
                    "switchover export grafana  # a dashboard over the gateway's engine-independent metrics",
                    "switchover probe --old OLD --new NEW  # the metrics probe",
                ],
                fix="map new metrics to old names, units and buckets, or watch the gateway's metrics",
                source="seed 000 §1 (observability row) and §6",
            ),
        ],
    ),
)

_WORD = re.compile(r"[a-z0-9]+")
_STOP = {
    "the",
    "a",
    "an",
    "is",
    "are",
    "got",
    "get",
    "with",
    "and",
    "or",
    "of",
    "to",
    "on",
    "at",
    "for",
    "but",
    "while",
    "went",
    "some",
    "few",
    "new",
    "old",
    "when",
    "after",
    "our",
    "my",
    "it",
    "its",
    "was",
    "were",
}


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _score(query: str, s: Symptom) -> float:
    q = _words(query)
    texts = [s.symptom, s.key.replace("-", " "), *s.aliases]
    best = 0.0
    for t in texts:
        w = _words(t)
        overlap = len(q & w) / max(1, len(q)) if q else 0.0
        fuzzy = difflib.SequenceMatcher(None, query.lower(), t.lower()).ratio()
        near = sum(1 for x in q for y in w if x != y and difflib.SequenceMatcher(None, x, y).ratio() >= 0.85)
        best = max(best, 0.6 * overlap + 0.3 * fuzzy + 0.1 * min(1.0, near / max(1, len(q))))
    return round(best, 3)


def diagnose(query: str, *, limit: int = 3, min_score: float = 0.25) -> list[Diagnosis]:
    """Symptoms best matching the query, best first; an exact key wins outright."""
    query = query.strip()
    if not query:
        raise BadInput('describe the symptom, e.g. `switchover doctor "p99 up, qps flat"`')
    exact = [s for s in SYMPTOMS if s.key == query.lower()]
    if exact:
        return [Diagnosis(query=query, score=1.0, symptom=exact[0])]
    scored = sorted(((_score(query, s), s) for s in SYMPTOMS), key=lambda x: -x[0])
    return [Diagnosis(query=query, score=sc, symptom=s) for sc, s in scored[:limit] if sc >= min_score]
