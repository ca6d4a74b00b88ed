"""Prometheus text exposition read one way for every verb: prometheus_client's parser (the format's reference
implementation), and the rows a scrape keeps (series name or its base without a histogram/counter suffix, mapped to
an intent). bench's scraper, check's metrics part, overload and the metrics adapter read /metrics through here."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families


def metric_families(text: str) -> Iterable[Metric]:
    """The metric families of an exposition text, lazily; ValueError/TypeError for text that is not the format."""
    return text_string_to_metric_families(text)


_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created", "_gcount", "_gsum")


def _base(sample: str) -> list[str]:
    names = [sample]
    for s in _SUFFIXES:
        if sample.endswith(s):
            names.append(sample[: -len(s)])
    return names


_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# the shape of a sample line of the text format 0.0.4: name, optional {labels}, a value, an optional integer
# timestamp (https://prometheus.io/docs/instrumenting/exposition_formats/); the wanted lines' values and labels are
# then the parser's to check
_SAMPLE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?[ \t]+[^\s{]\S*(?:[ \t]+-?\d+)?")


def _family_wanted(family: str, wanted: Mapping[str, str]) -> bool:
    """Whether a HELP/TYPE line's family holds a wanted series (a counter's family may be named with or without its
    _total)."""
    return any(b in wanted for b in _base(family)) or any(family + suffix in wanted for suffix in _SUFFIXES)


def wanted_lines(text: str, wanted: Mapping[str, str]) -> str:
    """The exposition text with only the samples whose series name (or its base) is wanted, and their families'
    HELP and TYPE lines: what the parser then reads. vLLM 0.32's /metrics is 57 KB of ~40 families, of which a
    bench keeps a few: 3.8 ms of CPU a scrape instead of 9.0 (python bench/scrape_parse.py). ValueError for a line
    that is no sample (the format's metric name first)."""
    keep: list[str] = []
    known: dict[str, bool] = {}  # name -> wanted (a histogram's bucket lines repeat one name)
    for n, line in enumerate(text.split("\n"), 1):
        s = line.lstrip(" \t")
        if not s:
            continue
        if s[0] == "#":  # "# HELP name ..." / "# TYPE name type": kept for a wanted family; other comments dropped
            words = s.split(None, 3)
            if len(words) >= 3 and words[1] in ("HELP", "TYPE") and _family_wanted(words[2], wanted):
                keep.append(line)
            continue
        if _SAMPLE.fullmatch(s.rstrip()) is None:
            raise ValueError(f"line {n} is not a sample: {s[:60]!r}")
        name = _NAME.match(s).group()  # type: ignore[union-attr]  # the line matched _SAMPLE, which starts so
        hit = known.get(name)
        if hit is None:
            hit = known[name] = any(b in wanted for b in _base(name))
        if hit:
            keep.append(line)
    return "\n".join(keep)


def parse_metrics(
    text: str, wanted: Mapping[str, str], *, endpoint: str, t_ns: int, wall: float, errors: list[str] | None = None
) -> list[dict[str, Any]]:
    """Rows for the samples whose series name (or its base without a histogram/counter suffix) is wanted.
    `wanted` maps an exposed series name to its intent. Only the wanted samples' lines reach the parser
    (`wanted_lines`); every line is still checked to be a comment or a sample."""
    rows: list[dict[str, Any]] = []
    try:
        families = list(metric_families(wanted_lines(text, wanted)))
    except (ValueError, TypeError) as exc:  # no rows; the caller's `errors` hears why
        if errors is not None:
            errors.append(f"unparsable /metrics: {exc}")
        return rows
    for fam in families:
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            intent = next((wanted[n] for n in (*_base(s.name), fam.name) if n in wanted), None)
            if intent is None:
                continue
            rows.append(
                {
                    "endpoint": endpoint,
                    "t_ns": t_ns,
                    "wall": wall,
                    "intent": intent,
                    "name": s.name,
                    "labels": orjson.dumps(dict(s.labels), option=orjson.OPT_SORT_KEYS).decode(),
                    "value": float(s.value),
                }
            )
    return rows
