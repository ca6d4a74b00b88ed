"""Prometheus text exposition read one way for every verb: prometheus_client's parser (the format's reference
implementation), and the rows a scrape keeps (series name or its base without a histogram/counter suffix, mapped to
an intent). bench's scraper, check's metrics part, overload and the metrics adapter read /metrics through here."""

from __future__ import annotations

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


def parse_metrics(
    text: str, wanted: Mapping[str, str], *, endpoint: str, t_ns: int, wall: float, errors: list[str] | None = None
) -> list[dict[str, Any]]:
    """Rows for the samples whose series name (or its base without a histogram/counter suffix) is wanted.
    `wanted` maps an exposed series name to its intent."""
    rows: list[dict[str, Any]] = []
    try:
        families = list(metric_families(text))
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
