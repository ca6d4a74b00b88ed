"""The alert-rule files of the accuracy set (bench/data/translate_accuracy/alerts/: one per engine era, written from
each release's source) are what they claim: a header naming the engine and the release, valid for promtool, and every
engine series they read served by that release (packaged release data)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from switchover.alerts.promql import parse
from switchover.alerts.release import engine_of, engine_release
from switchover.alerts.rules import recorded_names
from switchover.engines.releases import load_releases
from switchover.testing import require_tool

ALERTS = Path(__file__).resolve().parents[2] / "bench" / "data" / "translate_accuracy" / "alerts"
FILES = sorted(ALERTS.glob("*.yaml"))
HEADER = re.compile(r"\A# engine: (?P<engine>\S+)\n# version: (?P<version>\S+)\n")


def _header(path: Path) -> tuple[str, str]:
    m = HEADER.match(path.read_text())
    assert m, f"{path.name}: the first lines must be '# engine: ENGINE' and '# version: VERSION'"
    return m.group("engine"), m.group("version")


def test_the_set_covers_every_engine_era() -> None:
    eras = {_header(p) for p in FILES}
    assert len(FILES) >= 10
    assert {engine for engine, _ in eras} == {"vllm", "sglang", "tgi", "llamacpp", "trtllm"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_file_passes_promtool(path: Path) -> None:
    p = subprocess.run(
        [require_tool("promtool", hint="Debian package prometheus"), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_file_cites_the_source_at_its_release_for_every_series(path: Path) -> None:
    engine, version = _header(path)
    text = path.read_text()
    comments = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    data = yaml.safe_load(text)
    mine = recorded_names(data)
    names = {
        s.name
        for g in data["groups"]
        for r in g["rules"]
        for s in parse(str(r["expr"])).selectors
        if s.name and s.name not in mine
    }
    uncited = sorted(
        n
        for n in names
        if engine_of(n) == engine and re.sub(r"_(bucket|sum|count)$", "", n).removesuffix("_total") not in comments
    )
    assert uncited == []
    assert re.search(rf"https://github\.com/\S+/blob/v?{re.escape(version)}/", comments), "no link at the release"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_series_a_file_reads_is_served_by_its_release(path: Path) -> None:
    engine, version = _header(path)
    if load_releases(engine) is None:
        pytest.skip(f"no packaged release data for {engine}")
    side = engine_release(f"{engine}@{version}", "header")
    if side.view is not None and side.view.resolution.coverage == "older_than_read":
        pytest.skip(f"{side.note}: {path.name}'s series cannot be checked against release data")
    data = yaml.safe_load(path.read_text())
    mine = recorded_names(data)
    dead = sorted(
        {
            f"{s.name}: {side.serves(s.name).reason}"
            for g in data["groups"]
            for r in g["rules"]
            for s in parse(str(r["expr"])).selectors
            if s.name and s.name not in mine and side.serves(s.name).status != "present"
        }
    )
    assert dead == []
