"""A Hugging Face repo id as a model: served from a (locally built) HF cache offline, a clear error otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from switchover.errors import BadInput
from switchover.model import load_model_card
from switchover.model.hub import fetch_repo, looks_like_repo_id
from tests.plan import configs as C

COMMIT = "0123456789abcdef0123456789abcdef01234567"
FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}


def _cache(root: Path, repo: str, files: dict[str, object]) -> Path:
    """The on-disk layout huggingface_hub's cache uses: refs/main -> snapshots/<commit>/<files>."""
    base = root / ("models--" + repo.replace("/", "--"))
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(COMMIT)
    snap = base / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    for name, content in files.items():
        (snap / name).write_text(json.dumps(content))
    return snap


@pytest.mark.parametrize(("ref", "expected"), [("Qwen/Qwen3-32B-FP8", True), ("meta-llama/Llama-3.1-8B", True),
                                               ("just-a-name", False), ("a/b/c", False), ("../x/y", False)])
def test_repo_ids_are_owner_slash_name(ref: str, expected: bool) -> None:
    assert looks_like_repo_id(ref) is expected


def test_an_existing_local_folder_wins_over_a_repo_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "org" / "model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert not looks_like_repo_id("org/model")


def test_offline_repo_id_is_read_from_the_cache_with_exact_index_bytes(tmp_path: Path) -> None:
    snap = _cache(tmp_path, "Qwen/Qwen3-32B-FP8", {
        "config.json": {**C.QWQ_32B, "quantization_config": FP8},
        "model.safetensors.index.json": {"metadata": {"total_size": 34_300_000_000}, "weight_map": {}}})
    assert fetch_repo("Qwen/Qwen3-32B-FP8", cache_dir=tmp_path, offline=True) == snap
    card = load_model_card(str(snap))
    assert card.weights.origin == "safetensors-index" and card.weights.total_bytes == 34_300_000_000


def test_load_model_card_accepts_a_repo_id_through_the_cache(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _cache(tmp_path, "Org/Tiny", {"config.json": C.LLAMA_8B})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr("switchover.model.card.fetch_repo",
                        lambda repo: fetch_repo(repo, cache_dir=tmp_path, offline=True))
    monkeypatch.chdir(tmp_path)
    card = load_model_card("Org/Tiny")
    assert card.name == "Org/Tiny" and card.source.startswith("hf:Org/Tiny")
    assert card.num_layers == 32


def test_a_repo_neither_cached_nor_reachable_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as info:
        fetch_repo("Org/Missing", cache_dir=tmp_path, offline=True)
    assert "HF_HUB_OFFLINE" in info.value.message and "Org/Missing" in info.value.message
    assert info.value.hint and "local model folder" in info.value.hint


def test_a_cached_snapshot_without_config_is_refused(tmp_path: Path) -> None:
    _cache(tmp_path, "Org/GgufOnly", {"README.json": {}})
    with pytest.raises(BadInput, match=r"no config\.json"):
        fetch_repo("Org/GgufOnly", cache_dir=tmp_path, offline=True)


@pytest.mark.parametrize("ref", ["a/b-", "a/b--c", "a/.b"])
def test_an_id_the_hub_would_refuse_is_bad_input_not_a_traceback(ref: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput, match="valid Hugging Face repo id"):
        fetch_repo(ref, cache_dir=tmp_path, offline=True)
