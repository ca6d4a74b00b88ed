"""Reading /metrics (measure/prometheus.py): only the wanted samples' lines reach the parser, with the same rows as
parsing the whole exposition, and a text that is not the format is still refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchover.bench.scrape import wanted_series
from switchover.measure import prometheus
from switchover.measure.prometheus import parse_metrics, wanted_lines

DATA = Path(__file__).parent / "data"
# /metrics as the test bed's engines answered it (vLLM CPU 0.32.0 and llama-server b11434 serving tiny-llama)
EXPOSITIONS = {
    "vllm": (DATA / "vllm-0.32.0-metrics.txt").read_text(),
    "llamacpp": (DATA / "llamacpp-b11434-metrics.txt").read_text(),
}


def _rows(text: str, wanted: dict[str, str]) -> list[dict]:
    return parse_metrics(text, wanted, endpoint="e", t_ns=1, wall=2.0, errors=[])


@pytest.mark.parametrize("engine", ["vllm", "llamacpp"])
@pytest.mark.parametrize("which", ["profile", "one gauge", "one histogram", "counter by its total", "none"])
def test_the_filtered_parse_gives_the_rows_the_whole_parse_gives(monkeypatch, engine, which) -> None:
    text = EXPOSITIONS[engine]
    wanted = {
        "profile": wanted_series(engine, "0.32.0" if engine == "vllm" else "b11434")[0],
        "one gauge": {"vllm:num_requests_running": "running", "llamacpp:requests_processing": "running"},
        "one histogram": {"vllm:time_to_first_token_seconds": "ttft"},
        "counter by its total": {"vllm:prompt_tokens_total": "p", "llamacpp:prompt_tokens_total": "p"},
        "none": {},
    }[which]
    filtered = _rows(text, wanted)
    monkeypatch.setattr(prometheus, "wanted_lines", lambda t, w: t)  # the whole exposition to the parser
    whole = _rows(text, wanted)
    assert filtered == whole
    if which == "profile":
        assert len(filtered) >= 5  # the test reads real rows, not two empty lists


def test_a_body_that_is_not_the_format_is_an_unreadable_scrape_not_an_empty_one() -> None:
    errors: list[str] = []
    html = "<html><body>502 Bad Gateway</body></html>\n"
    assert (
        parse_metrics(html, {"vllm:num_requests_running": "running"}, endpoint="e", t_ns=1, wall=2.0, errors=errors)
        == []
    )
    assert errors and "unparsable /metrics" in errors[0] and "line 1" in errors[0]


def test_only_the_wanted_families_lines_reach_the_parser() -> None:
    text = EXPOSITIONS["vllm"]
    kept = wanted_lines(text, {"vllm:num_requests_waiting": "waiting"})
    names = {line.split()[2] if line.startswith("#") else line.split("{")[0].split()[0] for line in kept.splitlines()}
    assert names == {"vllm:num_requests_waiting"}
    assert len(kept) < len(text) / 50
