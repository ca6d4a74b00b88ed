"""rollout.prometheus.selector is label matchers only: anything else would be spliced into every gate query."""

from __future__ import annotations

import time
from pathlib import Path

import pydantic
import pytest
import yaml

from switchover.config import load_migration
from switchover.config.rollout import PrometheusSource, check_selector
from switchover.errors import BadInput

INJECTIONS = [
    'job="gw"}[1s])) * 0 # ',  # forced the error and fallback counts to 0
    'job="gw"} or vector(0) #',
    "job=gw",
    'job="gw" job="x"',
    'job="gw",,x="y"',
    'job=="gw"',
    'job="gw\n"',
    "{job='gw'}",  # PromQL's single quotes: refused, one form is enough
    'a="x"} or {b="y"',
]


@pytest.mark.parametrize("selector", INJECTIONS)
def test_a_selector_that_is_not_label_matchers_is_refused(selector: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="label matchers only"):
        PrometheusSource(url="http://127.0.0.1:9090", selector=selector)


@pytest.mark.parametrize(
    "selector", ["", 'job="gw"', '{job="gw"}', ' job = "gw" , ns=~"llm-.*", x!="a\\"b",', 'le!~"\\\\d+"']
)
def test_label_matchers_are_accepted(selector: str) -> None:
    assert PrometheusSource(url="http://127.0.0.1:9090", selector=selector).selector == selector


def test_the_config_file_names_the_field_and_exits_2(tmp_path: Path) -> None:
    doc = {
        "old": {"url": "http://127.0.0.1:8001", "engine": "vllm", "model": "m"},
        "new": {"url": "http://127.0.0.1:8002", "engine": "llamacpp", "model": "m"},
        "rollout": {"source": "prometheus", "prometheus": {"url": "http://127.0.0.1:9090", "selector": INJECTIONS[0]}},
    }
    path = tmp_path / "switchover.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(BadInput, match=r"rollout\.prometheus\.selector") as info:
        load_migration(path)
    assert info.value.exit_code == 2


def test_checking_a_long_hostile_selector_stays_fast() -> None:
    for text in ('a="' + "\\" * 1999, "a" * 2000, 'a="b"' + " " * 1990 + "!", ('a="b",' * 333)[:-1] + "}"):
        t0 = time.perf_counter()
        with pytest.raises(ValueError):
            check_selector(text)
        assert time.perf_counter() - t0 < 0.5
