"""Every `switchover ...` example in the README and docs/ runs as written.

The examples are read from the fenced shell blocks (``` bash / sh / console / shell / none), a `$ ` prompt and
trailing `# comments` removed, `\\` continuations joined. An offline example runs in-process from a folder that holds
what the docs name (./Llama-3.1-8B, vllm.log, rules.yaml, deploy/, switchover.yaml, ...), built from the test
fixtures; it must not be refused as a usage error (exit 2) or crash (exit 70, a traceback). Exit 1 is a finding (a
failed gate, a plan that does not fit), which examples may show. A live example (an engine URL, a gateway, a
rollout, a bench) needs running engines: it is listed, and the real-engine tier runs those verbs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from switchover.plan.choose_models import builtin_models
from tests.cli import workspace as W
from tests.cli.runner import run_cli

ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_FENCES = {"", "bash", "sh", "console", "shell"}
# verbs or arguments that need engines, a gateway or a rollout state: the real-engine tier runs them
LIVE = re.compile(
    r"https?://|<[a-z]|\s--(old|new|url|upstream)(?=[\s=]|$)|\sruns/|~/\.cache/switchover/testbed|"
    r"^switchover (gateway|rollout|probe|verify|check|drill|ready|overload|review|testbed|demo|bench|"
    r"metrics-adapter)\b"
)
STARTLOG = ROOT / "tests" / "startlog" / "fixtures" / "vllm-cpu-testbed.log"


def examples() -> Iterator[tuple[str, int, str]]:
    """(file, line, command) for every `switchover` command line in a shell block."""
    for doc in DOCS:
        fence: str | None = None
        pending = ""
        for number, raw in enumerate(doc.read_text().splitlines(), 1):
            line = raw.strip()
            if line.startswith("```"):
                fence = line[3:].strip() if fence is None else None
                continue
            if fence is None or fence not in SHELL_FENCES:
                continue
            line = pending + re.sub(r"^\$ ", "", line)
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            pending = ""
            if line.startswith("switchover "):
                command = re.split(r"\s+#\s|\s\|\s|\s&&\s|\s>\s", line)[0].strip()
                yield doc.name, number, command


ALL = list(examples())
OFFLINE = [e for e in ALL if not LIVE.search(e[2])]


def _workspace(root: Path) -> Path:
    """A folder holding every input the offline examples name, made from the test fixtures."""
    ws = W.build(root / "fixtures")
    here = root / "work"
    here.mkdir()
    models = builtin_models()
    for name, ref in (
        ("Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct"),
        ("Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
        ("Qwen3-32B", "Qwen/Qwen3-32B"),
        ("M", "meta-llama/Llama-3.1-8B-Instruct"),
    ):
        (here / name).mkdir()
        (here / name / "config.json").write_text(json.dumps(models[ref]["config"]))
    for name in ("model-v1", "model-v2", "tiny-llama-v1", "tiny-llama-v2", "SmolLM2-hf", "v1", "v2"):
        shutil.copytree(ws.path("hf"), here / name)
    for name in ("vllm.log", "new.log", "old.log"):
        shutil.copy(STARTLOG, here / name)
    for name in ("rules.yaml", "switchover.yaml", "prompts.jsonl"):
        shutil.copy(ws.path(name), here / name)
    shutil.copytree(ws.path("deploy"), here / "deploy")
    (here / "start.sh").write_text("trtllm-serve M --tp_size 2 --extra_llm_api_options ./extra.yml\n")
    (here / "extra.yml").write_text("enable_attention_dp: true\nkv_cache_config:\n  free_gpu_memory_fraction: 0.85\n")
    (here / "tests").symlink_to(ROOT / "tests")  # examples that name the repository's own fixtures
    return here


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    here = _workspace(tmp_path_factory.mktemp("examples"))
    before = Path.cwd()
    os.chdir(here)
    try:
        yield here
    finally:
        os.chdir(before)


def test_the_docs_have_examples_of_both_kinds() -> None:
    assert len(OFFLINE) >= 20 and len(ALL) - len(OFFLINE) >= 20, (len(OFFLINE), len(ALL))


@pytest.mark.parametrize(("doc", "line", "command"), OFFLINE, ids=[f"{d}:{n}" for d, n, _ in OFFLINE])
def test_each_offline_example_runs_as_written(work: Path, doc: str, line: int, command: str) -> None:
    code, out, err, _ = run_cli(shlex.split(command)[1:])
    assert code in (0, 1), f"{doc}:{line}: `{command}` exited {code}: {(err or out).strip()[-400:]}"
    assert "Traceback" not in out + err
