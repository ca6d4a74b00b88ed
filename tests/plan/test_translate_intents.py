"""translate, second pass: mechanisms found wanting on real launches (each test is a general rule read from an
engine's source at a release, with its link), proven on launches written for the test."""

from __future__ import annotations

from typing import Any

import pytest

from switchover.engines import releases
from switchover.engines.extract import Extracted, Snapshot, compact
from switchover.engines.releases import EngineReleases, ParserRules
from switchover.plan.translate import Translation, translate


def _flag(takes_value: bool = True, **extra: Any) -> dict[str, Any]:
    return {"path": "args.py", "takes_value": takes_value, **extra}


def _data(engine: str, rules: ParserRules, by_version: dict[str, dict[str, dict[str, Any]]]) -> EngineReleases:
    snaps = [Snapshot(version=v, ref=f"v{v}", archive="test", date=None,
                      facts=Extracted(parser=rules, flags=flags, files=["args.py"])) for v, flags in by_version.items()]
    return compact(engine, snaps, source_url="https://example.invalid/{ref}/{path}", generated_by="test")


@pytest.fixture(autouse=True)
def no_release_data(monkeypatch: pytest.MonkeyPatch) -> dict[str, EngineReleases]:
    """No engine has release data unless a test adds it: results do not move with the packaged data."""
    table: dict[str, EngineReleases] = {}
    monkeypatch.setattr(releases, "load_releases", lambda engine: table.get(engine))
    return table


def _out(tr: Translation) -> dict[str, Any]:
    return {f.input.typed: f for f in tr.flags}


def _after(tr: Translation, option: str) -> str:
    return tr.argv[tr.argv.index(option) + 1]


# ---- the model --------------------------------------------------------------------------------------------------

def test_llamacpp_long_model_flag_is_the_model_not_a_second_one() -> None:
    # llama.cpp common/arg.cpp: {"-m", "--model"} is one option
    # (https://github.com/ggml-org/llama.cpp/blob/b11434/common/arg.cpp#L3038)
    tr = translate("llamacpp", "llama-server --model /m/q4.gguf -c 4096", "llamacpp")
    assert "MODEL" not in " ".join(tr.argv) and tr.steps == []
    assert tr.argv.count("/m/q4.gguf") == 1 and _out(tr)["--model"].outcome == "translated"


LLAMACPP = {"--model": _flag(aliases=["-m"]), "--hf-repo": _flag(aliases=["-hf", "-hfr"]),
            "--ctx-size": _flag(kind="int", aliases=["-c"]), "--parallel": _flag(kind="int", aliases=["-np"]),
            "--kv-unified": _flag(False, kind="bool", aliases=["-kvu"], negation="--no-kv-unified"),
            "--cache-type-k": _flag(aliases=["-ctk"]), "--port": _flag(kind="int"),
            "--chat-template": _flag(), "--chat-template-file": _flag(), "--api-key": _flag()}


def test_a_launch_naming_no_model_gets_no_invented_one_for_the_same_engine(
        no_release_data: dict[str, EngineReleases]) -> None:
    # llama-server -hf REPO downloads the GGUF itself (https://github.com/ggml-org/llama.cpp/blob/b11434/common/arg.cpp#L3063)
    no_release_data["llamacpp"] = _data("llamacpp", ParserRules(source="arg.cpp"), {"b11434": LLAMACPP})
    tr = translate("llamacpp", "llama-server -hf ggml-org/gpt-oss-20b-GGUF -c 4096", "llamacpp")
    assert "-m" not in tr.argv and "MODEL" not in " ".join(tr.argv) and tr.steps == []
    assert _after(tr, "--hf-repo") == "ggml-org/gpt-oss-20b-GGUF"


# ---- KV cache -------------------------------------------------------------------------------------------------------

def test_a_kv_cache_type_the_target_spells_the_same_is_kept() -> None:
    # llama.cpp cache types include q5_0 (https://github.com/ggml-org/llama.cpp/blob/b11434/common/arg.cpp#L304)
    tr = translate("llamacpp", "llama-server -m m.gguf --cache-type-k q5_0", "llamacpp")
    assert _after(tr, "--cache-type-k") == "q5_0" and _out(tr)["--cache-type-k"].outcome == "translated"
    lost = _out(translate("llamacpp", "llama-server -m m.gguf --cache-type-k q5_0", "vllm"))["--cache-type-k"]
    assert lost.outcome == "lost" and "q5_0" in (lost.detail or "")


def test_llamacpp_unified_kv_keeps_the_context_a_request_gets() -> None:
    # with --kv-unified every slot may use the whole -c; without it each gets -c / slots
    # (https://github.com/ggml-org/llama.cpp/blob/b11434/tools/server/README.md, --kv-unified)
    tr = translate("llamacpp", "llama-server -m m.gguf -c 120000 --parallel 3 --kv-unified", "llamacpp")
    assert _after(tr, "--ctx-size") == "120000" and "--kv-unified" in tr.argv
    split = translate("llamacpp", "llama-server -m m.gguf -c 120000 --parallel 3", "llamacpp")
    assert _after(split, "--ctx-size") == "120000"
