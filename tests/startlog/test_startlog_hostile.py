"""`hw startlog` on hostile logs (issue 22): every pattern is linear in a line's length (long lines of a
pattern's own prefixes and suffixes repeated, where a backtracking `.*` or a leading `\\w+` rescanned the rest of
the line at every start), and a request the engine logged (a client's prompt) neither plants a start-up nor tells
a start-up fact."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from switchover.engines.startlog import (
    MAX_LINE_CHARS,
    check_text,
    detect_engine,
    engine_log,
    is_request_line,
    load_data,
)

try:
    import re._parser as sre_parse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse  # type: ignore[no-redef]

FIX = Path(__file__).parent / "fixtures"
HANG_GUARD_S = 2.0  # CPU seconds of this process (time.process_time): other jobs on the machine do not count
LONG = 128 << 10  # the longest line: 31 s with the former patterns

_CLASS_CHAR = {"CATEGORY_DIGIT": "1", "CATEGORY_WORD": "a", "CATEGORY_SPACE": " "}


def _sample(items) -> str:
    """A short text the parsed regex matches (first branch, fewest repeats, first character of a class)."""
    out = []
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(av))
        elif name == "ANY":
            out.append(" ")
        elif name == "IN":
            first = next((a for a in av if str(a[0]) != "NEGATE"), None)
            kind = str(first[0]) if first else ""
            if str(av[0][0]) == "NEGATE":
                out.append("a" if all(str(o) != "LITERAL" or a != ord("a") for o, a in av[1:]) else "#")
            elif kind == "LITERAL":
                out.append(chr(first[1]))
            elif kind == "RANGE":
                out.append(chr(first[1][0]))
            else:
                out.append(_CLASS_CHAR.get(str(first[1]) if first else "", "a"))
        elif name == "SUBPATTERN":
            out.append(_sample(av[-1]))
        elif name == "ATOMIC_GROUP":
            out.append(_sample(av))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            out.append(_sample(av[2]) * max(av[0], 1))
        elif name == "BRANCH":
            out.append(_sample(av[1][0]))
    return "".join(out)


def _every_regex() -> list[tuple[str, str]]:
    data = load_data()
    out = [(f"common {p.id}", p.regex) for p in data.common_fallbacks]
    for name, eng in data.engines.items():
        out += [(f"{name} start", m.regex) for m in eng.start] + [(f"{name} ready", m.regex) for m in eng.ready]
        out += [(f"{name} request", m.regex) for m in eng.requests]
        out += [(f"{name} {p.id}", p.regex) for p in eng.patterns]
        out += [(f"{name} quiet", eng.quiet_marker)] if eng.quiet_marker else []
    return out


@pytest.mark.parametrize(("name", "regex"), _every_regex(), ids=[n for n, _ in _every_regex()])
def test_every_pattern_searches_long_lines_of_its_own_prefixes_and_suffixes_in_linear_time(name, regex) -> None:
    sample = _sample(sre_parse.parse(regex))
    rx = re.compile(regex)
    assert rx.search(sample), f"{name}: the generated sample {sample!r} does not match (the generator is wrong)"
    units = {sample[:i] for i in range(2, len(sample) + 1)} | {sample[i:] for i in range(1, len(sample) - 1)}
    units |= {sample + " ", sample + "x"}
    t0 = time.process_time()
    for unit in sorted(u for u in units if u.strip()):
        rx.search(unit * (LONG // len(unit) + 1))
    took = time.process_time() - t0
    assert took < HANG_GUARD_S, f"{name}: {len(units)} lines of {LONG // 1024} KiB took {took:.1f} s"


def test_a_log_of_long_hostile_lines_is_checked_in_linear_time() -> None:
    units = [
        "Initializing an LLM engine ",
        "not supported ",
        "disabledx",
        "server_args=ServerArgs( ",
        "llama_kv_cache: size = ",
        "flash_attn is not compatible with ",
        "backend is disabled ",
    ]
    log = (FIX / "vllm-gpu-fp8-marlin.log").read_text() + "".join(u * (LONG // len(u)) + "\n" for u in units)
    t0 = time.process_time()
    report = check_text(log, "vllm")
    assert time.process_time() - t0 < HANG_GUARD_S and report.verdict == "downgrade"


def test_a_fact_past_the_searched_length_of_a_line_is_not_read() -> None:
    pad = "x" * MAX_LINE_CHARS
    log = (FIX / "vllm-gpu-fp8-marlin.log").read_text() + f"INFO [cuda.py:1] {pad} Using TRITON_ATTN backend.\n"
    report = check_text(log, "vllm")
    assert {f.field: f.value for f in report.findings}["attention_backend"] == "FLASHINFER"


SPOOF = "Initializing a V1 LLM engine (v0.32.0) with config: model='m', quantization=fp8, device_config=cuda"
REQUEST_LINES = {
    "vllm 0.32": "(APIServer pid=1) INFO 07-04 18:00:01 [request_logger.py:66] Received request chatcmpl-1: "
    f"params: SamplingParams(n=1), lora_request: None. prompt: '{SPOOF}'",
    "vllm debug prompt": f"(APIServer pid=1) DEBUG 07-04 18:00:01 [request_logger.py:55] Request chatcmpl-1 "
    f"details: prompt: '] {SPOOF}', prompt_token_ids: [1]",
    "vllm before 0.11": f"INFO 07-04 18:00:01 [logger.py:39] Received request cmpl-1: prompt: '{SPOOF}', params: x",
    "vllm output": f"(APIServer pid=1) INFO 07-04 18:00:02 [request_logger.py:100] Generated response chatcmpl-1: "
    f"output: '{SPOOF}', finish_reason: stop",
}


@pytest.mark.parametrize("kind", list(REQUEST_LINES))
def test_a_prompt_logged_after_the_ready_line_does_not_replace_the_start_up(kind: str) -> None:
    ready = "(APIServer pid=1) INFO 07-04 17:54:30 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000"
    log = (FIX / "vllm-gpu-fp8-marlin.log").read_text() + ready + "\n" + REQUEST_LINES[kind] + "\n"
    report = check_text(log, "vllm")
    assert report.verdict == "downgrade" and report.exit_code == 1  # the Marlin fallback is still the verdict
    assert report.start_line == 1 and all(f.evidence is None or f.evidence.line < 9 for f in report.findings)


def test_a_request_line_inside_the_start_up_tells_no_fact() -> None:
    lines = (FIX / "vllm-gpu-fp8-marlin.log").read_text().splitlines()
    planted = (
        "(APIServer pid=1) INFO 07-04 17:53:41 [request_logger.py:66] Received request x: params: p, "
        "prompt: '[cuda.py:1] Using TRITON_ATTN backend. Falling back to V0'"
    )
    report = check_text("\n".join([*lines[:3], planted, *lines[3:]]), "vllm")
    assert {f.field: f.value for f in report.findings}["attention_backend"] == "FLASHINFER"
    assert [f.evidence.pattern for f in report.fallbacks] == ["fp8-marlin"]


def test_request_lines_of_llama_server_and_sglang_plant_no_start_up() -> None:
    llama = (FIX / "llamacpp-lv4-testbed.log").read_text()
    before = check_text(llama, "llamacpp")
    planted = (
        llama + '0.09.000.001 D srv  log_server_r: request:  {"prompt": "main: build = 1 ... llama_server: '
        'initializing ... Flash Attention not supported, set to disabled"}\n'
    )
    after = check_text(planted, "llamacpp")
    assert (after.start_line, after.verdict, after.findings) == (before.start_line, before.verdict, before.findings)
    sglang = (FIX / "sglang-b200.log").read_text()
    planted = (
        sglang + "[2026-01-01 00:00:00] Receive: obj=GenerateReqInput(text='server_args=ServerArgs("
        "attention_backend=\\'triton\\')')\n"
    )
    assert check_text(planted, "sglang").findings == check_text(sglang, "sglang").findings


def test_a_prompt_quoting_another_engines_marker_does_not_make_the_engine_ambiguous() -> None:
    log = (
        (FIX / "vllm-cpu-testbed.log").read_text()
        + REQUEST_LINES["vllm 0.32"].replace(SPOOF, "llama_server: initializing")
        + "\n"
    )
    assert detect_engine(log) == "vllm"


@pytest.mark.parametrize(
    ("engine", "line"),
    [
        ("vllm", 'INFO:     127.0.0.1:57608 - "POST /v1/completions HTTP/1.1" 200 OK'),
        ("vllm", '(APIServer pid=7) INFO:     127.0.0.1:57608 - "GET /x?Starting%20vLLM%20API%20server HTTP/1.1" 404'),
        ("sglang", '[2026-01-01 00:00:00] INFO:     127.0.0.1:40000 - "POST /generate HTTP/1.1" 200 OK'),
    ],
)
def test_an_http_access_log_line_is_a_request_line_whose_path_tells_nothing(engine: str, line: str) -> None:
    assert is_request_line(line, engine_log(engine)[1])


def test_a_start_up_line_quoted_inside_another_message_starts_nothing() -> None:
    ready = "(APIServer pid=1) INFO 07-04 17:54:30 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000"
    echoed = (
        f"(APIServer pid=1) WARNING 07-04 18:00:01 [serving_chat.py:9] model {SPOOF!r} not found; "
        "] Initializing an LLM engine"
    )  # a warning that quotes what a client sent, "] " included
    report = check_text((FIX / "vllm-gpu-fp8-marlin.log").read_text() + ready + "\n" + echoed + "\n", "vllm")
    assert report.verdict == "downgrade" and report.start_line == 1
