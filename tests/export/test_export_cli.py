"""`switchover export ...` through the real entry point: files written, limitations shown, bad input exit 2."""

from __future__ import annotations

import sys
from pathlib import Path
from unittest.mock import patch

import orjson
import pytest
import yaml

from switchover.cli.app import main
from tests.export.conftest import BASE


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with patch.object(sys, "argv", ["switchover", "export", *args]), pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


@pytest.fixture
def config(tmp_path: Path) -> Path:
    p = tmp_path / "switchover.yaml"
    p.write_text(BASE % dict(weight=5, rollback="false", shadow=10, new_engine="llamacpp"))
    return p


def test_argo_to_file_and_json(config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "k8s" / "rollout.yaml"
    code, _, err = _run(capsys, "argo", "-c", str(config), "--name", "chat", "-o", str(out))
    assert code == 0 and "cannot express" in err
    docs = list(yaml.safe_load_all(out.read_text()))
    assert docs[0]["kind"] == "Rollout" and docs[0]["metadata"]["name"] == "chat"
    code, stdout, _ = _run(capsys, "argo", "-c", str(config), "--json")
    assert code == 0 and orjson.loads(stdout)["cannot_express"]


def test_grafana_and_envoy_print_to_stdout(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, err = _run(capsys, "grafana", "-c", str(config))
    assert code == 0 and orjson.loads(stdout)["panels"] and "cannot express" in err
    code, stdout, _ = _run(capsys, "envoy", "-c", str(config), "--weight", "20")
    assert code == 0 and stdout.startswith("# generated") and yaml.safe_load(stdout)["static_resources"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["argo", "--metrics", "pods"], "--metrics"),
        (["envoy", "--weight", "120"], "'--weight': must be at most 100"),
        (["envoy", "--port", "99999"], "'--port': must be at most 65535"),
        (["argo", "-o", "."], "is a folder"),
        (["grafana", "-o", "/proc/version"], "cannot write /proc/version"),
        (["argo", "-c", "missing.yaml"], "missing.yaml"),
    ],
)
def test_bad_input_is_exit_2_with_one_line(
    config: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    if "-c" not in args:
        args = [*args, "-c", str(config)]
    code, _, err = _run(capsys, *args)
    assert code == 2 and needle in err and "Traceback" not in err


@pytest.mark.parametrize("selector", ['job="gw"}[1s])) * 0 # ', "job=gw", 'job="gw" or vector(1)', 'a="x"} or {b="y"'])
def test_a_selector_that_is_not_label_matchers_is_refused_before_anything_is_written(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], selector: str
) -> None:
    """It is spliced into every gate query: `job="gw"}[1s])) * 0 # ` made the error and fallback counts 0."""
    out = tmp_path / "rollout.yaml"
    code, _, err = _run(capsys, "argo", "-c", str(config), "--selector", selector, "-o", str(out))
    assert code == 2 and "--selector" in err and "label matchers" in err and "Traceback" not in err
    assert not out.exists()


def test_label_matchers_are_accepted_as_a_selector(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = _run(capsys, "argo", "-c", str(config), "--selector", '{namespace="llm", pod=~"gw-.*"}')
    assert code == 0 and 'namespace="llm", pod=~"gw-.*"' in stdout
