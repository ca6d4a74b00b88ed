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


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("Qwen/Qwen3-32B-FP8", True),
        ("meta-llama/Llama-3.1-8B", True),
        ("just-a-name", False),
        ("a/b/c", False),
        ("../x/y", False),
    ],
)
def test_repo_ids_are_owner_slash_name(ref: str, expected: bool) -> None:
    assert looks_like_repo_id(ref) is expected


def test_an_existing_local_folder_wins_over_a_repo_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "org" / "model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert not looks_like_repo_id("org/model")


def test_offline_repo_id_is_read_from_the_cache_with_exact_index_bytes(tmp_path: Path) -> None:
    snap = _cache(
        tmp_path,
        "Qwen/Qwen3-32B-FP8",
        {
            "config.json": {**C.QWQ_32B, "quantization_config": FP8},
            "model.safetensors.index.json": {"metadata": {"total_size": 34_300_000_000}, "weight_map": {}},
        },
    )
    assert fetch_repo("Qwen/Qwen3-32B-FP8", cache_dir=tmp_path, offline=True) == snap
    card = load_model_card(str(snap))
    assert card.weights.origin == "safetensors-index" and card.weights.total_bytes == 34_300_000_000


def test_load_model_card_accepts_a_repo_id_through_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _cache(tmp_path, "Org/Tiny", {"config.json": C.LLAMA_8B})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(
        "switchover.model.card.fetch_repo", lambda repo: fetch_repo(repo, cache_dir=tmp_path, offline=True)
    )
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
def test_an_id_the_hub_would_refuse_is_bad_input_not_a_traceback(
    ref: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput, match="valid Hugging Face repo id"):
        fetch_repo(ref, cache_dir=tmp_path, offline=True)


class _Sibling:
    def __init__(self, name: str, size: int | None) -> None:
        self.rfilename, self.size = name, size


class _Info:
    def __init__(self, files: dict[str, int | None]) -> None:
        self.sha = COMMIT
        self.siblings = [_Sibling(n, s) for n, s in files.items()]


def _fake_hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, files: dict[str, int | None], sent: dict[str, int] | None = None
) -> list[str]:
    """The hub's file list (names and sizes) and a downloader that records what it was asked to write; it writes
    each file at its listed size, or at the size in `sent` (a file that disagrees with the list)."""
    import huggingface_hub

    sizes = {**files, **(sent or {})}

    written: list[str] = []

    def download(repo_id: str, filename: str, revision: str | None = None, cache_dir: str | None = None) -> str:
        written.append(filename)
        path = tmp_path / "snap" / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(C.LLAMA_8B if filename == "config.json" else {})
        path.write_text(text + " " * max(0, (sizes.get(filename) or 0) - len(text)))  # JSON padded to its size
        return str(path)

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, *a, **k: _Info(files))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    return written


def test_online_only_the_planner_files_are_downloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = _fake_hub(
        monkeypatch,
        tmp_path,
        {
            "config.json": 700,
            "model.safetensors.index.json": 30_000,
            "tokenizer.json": 9_000_000,
            "model-00001-of-00002.safetensors": 5 * 2**30,
            "original/consolidated.00.pth": 8 * 2**30,
            "README.md": 10,
        },
    )
    path = fetch_repo("Org/Model", cache_dir=tmp_path, offline=False)
    assert path == tmp_path / "snap"
    assert written == ["config.json", "model.safetensors.index.json", "tokenizer.json"]


@pytest.mark.parametrize(
    ("files", "match"),
    [
        ({"config.json": 700, "tokenizer.json": 200 * 2**20}, r"tokenizer\.json is 200 MiB"),
        ({"config.json": 700, "model.safetensors.index.json": None}, "did not report the size"),
        ({"model.safetensors.index.json": 30_000}, r"no config\.json"),
    ],
)
def test_online_files_are_size_checked_before_anything_is_written(
    files: dict[str, int | None], match: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = _fake_hub(monkeypatch, tmp_path, files)
    with pytest.raises(BadInput, match=match):
        fetch_repo("Org/Model", cache_dir=tmp_path, offline=False)
    assert written == []  # refused from the file list: not one file reached the disk


def test_a_file_that_arrives_at_another_size_than_listed_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_hub(monkeypatch, tmp_path, {"config.json": 700, "tokenizer.json": 9_000}, sent={"tokenizer.json": 20_000})
    with pytest.raises(BadInput, match=r"tokenizer\.json arrived with 20000 bytes, but the hub's file list says 9000"):
        fetch_repo("Org/Model", cache_dir=tmp_path, offline=False)


def test_an_unreachable_hub_falls_back_to_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    def unreachable(self: object, *a: object, **k: object) -> None:
        raise OSError("Name or service not known")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", unreachable)
    snap = _cache(tmp_path, "Org/Cached", {"config.json": C.LLAMA_8B})
    assert fetch_repo("Org/Cached", cache_dir=tmp_path, offline=False) == snap
    with pytest.raises(BadInput, match="could not be reached"):
        fetch_repo("Org/NotCached", cache_dir=tmp_path, offline=False)
