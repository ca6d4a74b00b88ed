"""Every output a user reads is in English and cites only what a user can open: the CLI's representative outputs
(check on a fixture run, report.md and report.html, doctor, export argo, every --help page, every --json schema)
hold no CJK character, no citation of the project's private practitioner notes ("seed 000 §1"), and no path into
documents a user does not have ("shared/...", "engines.md", "reference/*.md")."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import typer.main
from plotly.offline import get_plotlyjs

from switchover.cli.app import app
from tests.check import builders as b
from tests.cli import cases as C
from tests.cli.runner import run_cli
from tests.cli.test_help_and_random_argv import _groups

# CJK ideographs and punctuation, full-width forms; "seed 000"-style citations and "the seeds'"; private doc paths.
FORBIDDEN = re.compile(
    r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]|\bseed 0\d\d\b|\bseeds'|shared/|engines\.md"
    r"|reference/(?:capacity|engines|testbed|gateway|bench-metrics)\.md"
)
# A Python repr leaking into a table: a dict literal, or a bare None where a value belongs.
REPR = re.compile(r"\{'[^']*': |\bNone\b")


def offending(text: str) -> list[str]:
    """Each forbidden match with a little context, for a readable failure (the plotly.js library inlined in an HTML
    report is code, not text a user reads, and is left out)."""
    text = text.replace(get_plotlyjs(), "")
    text = re.sub(r"[\s\u2500-\u257f]+", " ", text)  # a phrase wrapped across lines or table borders still reads
    return [text[max(0, m.start() - 40) : m.end() + 40].replace("\n", " ") for m in FORBIDDEN.finditer(text)]


def test_the_pattern_catches_what_it_must_and_spares_random_seeds() -> None:
    for bad in (
        "source: seed 000 §1 table, row 1",
        "请求调度",
        "see shared/reference/testbed.md",
        "engines.md §2",
        "judged against the seeds' checklists",
        "(reference/capacity.md §2)",
    ):
        assert offending(bad), bad
    for fine in (
        "temperature 1, seed 1234, twice",
        "seed 7",
        "sampling.seed_repeat",
        "the same seed",
        "https://docs.docker.com/reference/cli/docker/container/run/",
        "docs/checklist.md#engine.kv_cache",
    ):
        assert not offending(fine), fine


HELP_PATHS = sorted(set(C.commands()) | set(_groups(typer.main.get_command(app), [])) | {""})
# Help pages whose text lives in files another part of the project owns; each xfail is strict, so the test fails
# (XPASS) as soon as the text is fixed and the mark must go.
OTHERS_HELP: dict[str, str] = {}


def _help_param(path: str) -> Any:
    owner = OTHERS_HELP.get(path)
    mark = [pytest.mark.xfail(strict=True, reason=f"help text in {owner} (change listed in the G26 report)")]
    return pytest.param(path, id=path or "switchover", marks=mark if owner else [])


@pytest.mark.parametrize("path", [_help_param(p) for p in HELP_PATHS])
def test_every_help_page_is_plain_english_with_no_private_citations(path: str) -> None:
    code, out, err, _ = run_cli([*path.split(), "--help"])
    assert code == 0, err
    assert not offending(out), offending(out)


def _schema_names() -> list[str]:
    code, out, _, _ = run_cli(["schema", "--list"])
    assert code == 0
    return [line.split()[0] for line in out.splitlines() if line.strip()]


# schemas whose descriptions come from a docstring another part of the project owns (strict, as above)
OTHERS_SCHEMA: dict[str, str] = {}


def _schema_param(name: str) -> Any:
    owner = OTHERS_SCHEMA.get(name)
    mark = [pytest.mark.xfail(strict=True, reason=f"description in {owner} (change listed in the G26 report)")]
    return pytest.param(name, marks=mark if owner else [])


@pytest.mark.parametrize("name", [_schema_param(n) for n in _schema_names()])
def test_every_json_schema_describes_its_fields_without_private_citations(name: str) -> None:
    code, out, err, _ = run_cli(["schema", name])
    assert code == 0, err
    assert not offending(out), offending(out)


@pytest.fixture
def fixture_run(tmp_path: Path) -> Path:
    """A check run directory whose evidence gives every kind of verdict (no-go, warn, go, not run)."""
    ev = b.full_evidence(
        grace=b.grace(configured=[30.0]),
        diff_model=b.diff_model(weights=("a", "b")),
        live_model=b.live([(100, 140, False), (50, 50, True)]),
    )
    ev.rollback = None
    return Path(b.write_run(tmp_path, ev).path)


def test_check_report_on_a_fixture_run_prints_and_writes_plain_english(fixture_run: Path) -> None:
    code, out, err, _ = run_cli(["report", str(fixture_run)])
    assert code in (0, 1), err
    md = (fixture_run / "report.md").read_text(encoding="utf-8")
    html = (fixture_run / "report.html").read_text(encoding="utf-8")
    check_json = (fixture_run / "check.json").read_text(encoding="utf-8")
    for name, text in (("console", out + err), ("report.md", md), ("report.html", html), ("check.json", check_json)):
        assert not offending(text), (name, offending(text))
    assert "docs/checklist.md#" in md and "docs/checklist.md#" in html  # each row links to its item's page


@pytest.fixture(scope="module")
def unreachable_check(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """`switchover check` against closed ports: its console output and every file of its run directory."""
    tmp = tmp_path_factory.mktemp("check")
    cfg = tmp / "switchover.yaml"
    cfg.write_text(
        "old: {url: 'http://127.0.0.1:1', engine: vllm}\nnew: {url: 'http://127.0.0.1:1', engine: sglang}\n"
        "check:\n  grace: {max_tokens: 2000, drain_grace_s: 120}\n"
    )
    code, out, err, _ = run_cli(["check", str(cfg), "--runs-dir", str(tmp / "runs")])
    assert code == 1, err
    texts = {"console": out + err}
    for run in (tmp / "runs").iterdir():
        texts |= {f.name: f.read_text(encoding="utf-8") for f in run.iterdir() if f.suffix in (".md", ".html", ".json")}
    return texts


@pytest.mark.parametrize(
    "name",
    ["console", "report.md", "report.html", "check.json", "plan.json", "grace.json", "parts.json", "config.json"],
)
def test_check_on_unreachable_engines_prints_and_writes_plain_english(
    unreachable_check: dict[str, str], name: str
) -> None:
    text = unreachable_check[name]
    assert not offending(text), offending(text)


def test_check_rollback_part_file_is_plain_english(unreachable_check: dict[str, str]) -> None:
    assert not offending(unreachable_check["rollback.json"]), offending(unreachable_check["rollback.json"])


@pytest.mark.parametrize(
    "symptom",
    [
        "p99 went up but qps is flat",
        "the canary is slow",
        "NCCL hangs at start",
        "answers changed style after the switch",
        "the dashboard went blank",
        "out of memory on the new gpu",
        "finish_reason differs",
    ],
)
def test_doctor_diagnoses_cite_what_a_user_can_open(symptom: str) -> None:
    code, out, err, _ = run_cli(["doctor", symptom, "--limit", "3"])
    assert code in (0, 2), err
    assert not offending(out + err), offending(out + err)


def test_the_whole_doctor_table_cites_what_a_user_can_open() -> None:
    text = resources.files("switchover").joinpath("data/doctor.yaml").read_text(encoding="utf-8")
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))  # comments aside
    assert not offending(text), offending(text)


ARGO_CONFIG = """\
old: {url: 'http://127.0.0.1:1', engine: vllm}
new: {url: 'http://127.0.0.1:2', engine: sglang}
gateway:
  listen: {host: 127.0.0.1, port: 18089}
  weight: 5
rollout: {}
"""


def test_export_argo_writes_and_prints_plain_english(tmp_path: Path) -> None:
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(ARGO_CONFIG)
    out_file = tmp_path / "argo.yaml"
    code, out, err, _ = run_cli(["export", "argo", "--config", str(cfg), "--out", str(out_file)])
    assert code == 0, err
    text = out + err + out_file.read_text(encoding="utf-8")
    assert not offending(text), offending(text)


def test_plan_translate_table_prints_words_not_python_reprs() -> None:
    code, out, err, _ = run_cli(
        [
            "plan",
            "translate",
            "vllm serve m --max-model-len 8192 --gpu-memory-utilization 0.8 --max-num-seqs 64 --enable-prefix-caching",
            "--from",
            "vllm",
            "--to",
            "sglang",
        ]
    )
    assert code in (0, 1), err
    assert not REPR.search(out), REPR.findall(out)
    assert not offending(out), offending(out)


def test_diff_model_table_prints_words_not_python_reprs(tmp_path: Path) -> None:
    from tests.modeldiff.conftest import make_model

    old, new = make_model(tmp_path, "old"), make_model(tmp_path, "new", temperature=0.6, ctx=4096, seed=1)
    code, out, err, _ = run_cli(["diff-model", str(old), str(new), "--no-weights"])
    assert code in (0, 1), err
    assert not REPR.search(out), REPR.findall(out)
    assert not offending(out), offending(out)


@pytest.mark.parametrize("gpu", ["L4", "H100-80G"])
def test_plan_choose_cites_sources_a_user_can_open_for_its_engine_facts(gpu: str) -> None:
    code, out, err, _ = run_cli(["plan", "choose", "-m", "builtin:openai/gpt-oss-120b", "--gpu", gpu])
    assert code in (0, 1), err
    text = "\n".join(line for line in (out + err).splitlines() if "llama.cpp" not in line and "llamacpp" not in line)
    assert not offending(text), offending(text)


def test_plan_choose_llamacpp_format_facts_cite_sources_a_user_can_open() -> None:
    code, out, err, _ = run_cli(["plan", "choose", "-m", "builtin:openai/gpt-oss-120b", "--gpu", "H100-80G"])
    assert code in (0, 1), err
    assert not offending(out + err), offending(out + err)


def test_every_project_doc_that_doctor_and_the_checklist_cite_exists_with_its_anchor() -> None:
    root = Path(__file__).resolve().parents[2]
    text = "\n".join(
        resources.files("switchover").joinpath(p).read_text(encoding="utf-8")
        for p in ("data/doctor.yaml", "check/data/checklist.yaml")
    )
    cited = set(re.findall(r"\bdocs/([\w-]+\.md)(?:#([\w.-]+))?", text))
    assert len(cited) >= 10
    for name, anchor in cited:
        doc = root / "docs" / name
        assert doc.is_file(), name
        if anchor:
            assert f'<a id="{anchor}"></a>' in doc.read_text(encoding="utf-8"), f"{name}#{anchor}"
