"""The migration file pins an engine build (`new.engine_version`); `hw diff --migration` checks that build against
the target host's driver, and a malformed version is exit 2 naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from switchover.cli.app import app
from switchover.config import load_migration
from switchover.errors import BadInput
from switchover.hardware import load_fingerprint

runner = CliRunner()


def _migration(tmp_path: Path, version: object) -> Path:
    mig = tmp_path / "switchover.yaml"
    mig.write_text(
        yaml.safe_dump(
            {
                "old": {"url": "http://127.0.0.1:8001", "engine": "vllm"},
                "new": {"url": "http://127.0.0.1:8002", "engine": "vllm", "engine_version": version},
            }
        )
    )
    return mig


def _assert_refused(tmp_path: Path, version: object) -> None:
    """load_migration refuses `version` as new.engine_version, naming the field."""
    try:
        load_migration(_migration(tmp_path, version))
    except BadInput as exc:
        assert "new.engine_version" in exc.message
    else:
        raise AssertionError(f"{version!r} was accepted")


def _host_with_driver(tmp_path: Path, driver: str) -> Path:
    fp = load_fingerprint("catalog:H100-80G").model_dump(mode="json")
    fp["driver_version"] = driver
    out = tmp_path / f"host-{driver}.json"
    out.write_text(json.dumps(fp))
    return out


def test_a_pinned_build_the_target_driver_cannot_run_fails(tmp_path: Path) -> None:
    host = _host_with_driver(tmp_path, "470.82.01")  # below CUDA 12.x's minimum driver
    res = runner.invoke(
        app, ["hw", "diff", "catalog:A100-80G", str(host), "--migration", str(_migration(tmp_path, "0.21.0")), "--json"]
    )
    assert res.exit_code == 1, res.output  # FAILS is a failed check
    (f,) = json.loads(res.stdout)["engines"]
    assert f["engine"] == "vllm" and f["version"] == "0.21.0" and f["status"] == "fails", f


def test_the_same_build_on_a_recent_driver_runs(tmp_path: Path) -> None:
    host = _host_with_driver(tmp_path, "580.65.06")
    res = runner.invoke(
        app, ["hw", "diff", "catalog:A100-80G", str(host), "--migration", str(_migration(tmp_path, "0.21.0")), "--json"]
    )
    (f,) = json.loads(res.output)["engines"]
    assert f["status"] in ("ok", "degraded") and f["version"] == "0.21.0", f


def test_a_malformed_engine_version_names_the_field(tmp_path: Path) -> None:
    for bad in ("latest", "0.21.0\nx", "", 0.21):
        _assert_refused(tmp_path, bad)


def test_every_engines_release_spelling_is_an_engine_version(tmp_path: Path) -> None:
    """llama.cpp's build tags, TGI's v-tags, post-releases and release candidates are releases (engines.versions)."""
    for release in ("b3216", "v2.0.2", "0.8.5.post1", "1.2.0rc1", "0.11.0"):
        assert load_migration(_migration(tmp_path, release)).new.engine_version == release
    for bad in (" 0.11.0", "b32x6", "0.11.0" * 20):
        _assert_refused(tmp_path, bad)


def test_the_migration_file_accepts_exactly_the_releases_release_key_orders(tmp_path: Path) -> None:
    """config may not import engines, so it checks the grammar itself: it must agree with engines.versions."""
    from switchover.engines.versions import release_key

    for text in (
        "b3216",
        "B12",
        "v2.0.2",
        "0.8.5.post1",
        "1.2.0rc1",
        "2.4.0+cu121",
        "3.3.6-dev0",
        "latest",
        "b32x6",
        "vv2",
        "0.11",
        "1!2.0",
        "b",
        "bb12",
        "0.11.0.",
        "v0.6.3rc1",
    ):
        try:
            release_key(text)
            expected = True
        except ValueError:
            expected = False
        try:
            load_migration(_migration(tmp_path, text))
            accepted = True
        except BadInput:
            accepted = False
        assert accepted == expected, text
