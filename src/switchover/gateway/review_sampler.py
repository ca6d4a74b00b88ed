"""Which requests become spot-check pairs (pure): the task type of a request, a daily quota overall and per type,
and the redaction applied to every text before it is stored."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from switchover.config.gateway import ReviewConfig, TaskTypesConfig
from switchover.redaction import redact

_TYPE_OK = re.compile(r"[A-Za-z0-9_.:-]{1,40}")
# Always masked: e-mail addresses, and phone-number-like runs of digits (8+ characters, digits and separators).
# Both run in linear time over untrusted text (a client's prompt, up to review.max_chars): an e-mail match starts
# only where its local part starts (no second attempt inside the same run), and a number's run is consumed once,
# possessively, and its end found by one backward scan (_number) instead of by the regex backtracking the run at
# every start: "(1." repeated 13k times took 18 s that way.
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_NUMBER_RUN = re.compile(r"(?<![\w.])(\+?\d)([\d\s().-]*+)")
_NUMBER_MIDDLE = 6  # characters between a number's first and last digit, at least
_DIGIT, _WORD_OR_DOT = re.compile(r"\d"), re.compile(r"[\w.]")
UNKNOWN = "other"


def task_type(cfg: TaskTypesConfig, path: str, model: str | None, header: Callable[[str], str | None]) -> str:
    """The first rule that matches, else the task header's value (when it is a plain name), else 'other'."""
    if not cfg.rules:
        value = header(cfg.header)
        return value if value is not None and _TYPE_OK.fullmatch(value) else UNKNOWN
    for rule in cfg.rules:
        if rule.path is not None and not (path == rule.path or path.startswith(rule.path.rstrip("/") + "/")):
            continue
        if rule.model is not None and model != rule.model:
            continue
        if rule.header is not None:
            value = header(rule.header)
            if value is None or (rule.equals is not None and value != rule.equals):
                continue
        return rule.type
    value = header(cfg.header)
    return value if value is not None and _TYPE_OK.fullmatch(value) else UNKNOWN


def _number(m: re.Match[str]) -> str:
    """A run of digits and separators masked up to its last digit that no word character or dot follows (the
    run's remainder is kept); a run without such a digit far enough in is kept whole."""
    head, run = m.group(1), m.group(2)
    text, after = m.string, m.end()
    for i in range(len(run) - 1, _NUMBER_MIDDLE - 1, -1):
        if not _DIGIT.match(run[i]):
            continue
        nxt = run[i + 1] if i + 1 < len(run) else text[after : after + 1]
        if not _WORD_OR_DOT.match(nxt):
            return "[number]" + run[i + 1 :]
    return head + run


class LabelCap:
    """Task types a client names in a header: the first `limit` distinct ones are kept, later new ones become
    'other' (a client cannot grow the ledger's label set, the per-type gates or the quotas without bound); the
    types of configured rules always pass."""

    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self.seen: set[str] = set()

    def __call__(self, cfg: TaskTypesConfig, label: str) -> str:
        if label == UNKNOWN or label in self.seen or any(r.type == label for r in cfg.rules):
            return label
        if len(self.seen) >= self.limit:
            return UNKNOWN
        self.seen.add(label)
        return label


class Redactor:
    """Secrets (switchover.redaction), e-mail addresses, phone-like numbers and the configured patterns masked;
    texts cut to `max_chars`."""

    def __init__(self, cfg: ReviewConfig) -> None:
        self.extra = [re.compile(p) for p in cfg.redact_patterns]
        self.max_chars = cfg.max_chars

    def __call__(self, text: str) -> str:
        text = redact(text[: self.max_chars * 2])
        text = _NUMBER_RUN.sub(_number, _EMAIL.sub("[email]", text))
        for pattern in self.extra:
            text = pattern.sub("[redacted]", text)
        return text if len(text) <= self.max_chars else text[: self.max_chars] + " […]"


class Quota:
    """Today's pairs per task type against `pairs_per_day` and `per_type_per_day`; a request is considered with
    probability `sample_percent` so the day's samples spread over the day instead of being its first requests."""

    def __init__(self, cfg: ReviewConfig, rng: random.Random | None = None) -> None:
        self.cfg = cfg
        self.rng = rng or random.Random()
        self.day = ""
        self.counts: dict[str, int] = {}

    def load(self, day: str, counts: dict[str, int]) -> None:
        """Start from what the store already holds for `day` (a restart keeps the quota)."""
        self.day, self.counts = day, dict(counts)

    def take(self, day: str, kind: str) -> bool:
        """Whether to sample this request (and count it when so)."""
        cfg = self.cfg
        if cfg.pairs_per_day <= 0:
            return False
        if day != self.day:
            self.day, self.counts = day, {}
        if sum(self.counts.values()) >= cfg.pairs_per_day or self.counts.get(kind, 0) >= cfg.per_type_per_day:
            return False
        if cfg.sample_percent < 100 and self.rng.random() * 100 >= cfg.sample_percent:
            return False
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return True

    def give_back(self, day: str, kind: str) -> None:
        """Undo a take() whose pair could not be started."""
        if day == self.day and self.counts.get(kind, 0) > 0:
            self.counts[kind] -= 1
