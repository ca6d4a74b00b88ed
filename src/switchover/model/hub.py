"""A Hugging Face repo id as a model source: fetch only the small files the planner reads, cached, offline-safe.

`-m Qwen/Qwen3-32B-FP8` brings config.json, generation_config.json, the safetensors index (exact weight bytes in
`metadata.total_size`), hf_quant_config.json and the tokenizer files into the Hugging Face cache with
`huggingface_hub`: the hub's file list (with sizes) is read first, and only those files, each size-checked, are
downloaded, each checked again on disk against that size; no weight file is. With `HF_HUB_OFFLINE=1` (or no
network) the cached snapshot is used; when neither the hub nor the cache has the repo, one line says so (exit 2).
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

from switchover.errors import BadInput

#: The files a plan reads; weights are never downloaded (their size comes from the index).
HUB_FILES = [
    "config.json",
    "generation_config.json",
    "model.safetensors.index.json",
    "hf_quant_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
    "params.json",
]

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9_.-]{1,96}$")


def looks_like_repo_id(ref: str) -> bool:
    """`owner/name` that is not an existing local path (a local folder always wins)."""
    return bool(_REPO_ID.match(ref)) and ".." not in ref and not Path(ref).expanduser().exists()


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


#: The largest planner file fetched (a big tokenizer.json is ~35 MB, a 1,000-shard index a few MB).
MAX_FILE_BYTES = 64 * 2**20


def _remote_files(repo_id: str, revision: str | None) -> tuple[str, dict[str, int | None]]:
    """The repo's commit and the size of each planner file it has (top level only), from the hub's metadata;
    nothing is downloaded."""
    from huggingface_hub import HfApi

    info = HfApi().model_info(repo_id, revision=revision, files_metadata=True)
    wanted = set(HUB_FILES)
    return str(info.sha or revision or "main"), {
        s.rfilename: s.size for s in info.siblings or [] if s.rfilename in wanted
    }


def _network_errors() -> tuple[type[BaseException], ...]:
    """No network, DNS failures and timeouts as huggingface_hub's HTTP client raises them (httpx2 or httpx)."""
    out: list[type[BaseException]] = [OSError]
    for name in ("httpx2", "httpx"):
        try:
            out.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(out)


def _download(repo_id: str, filename: str, commit: str, cache_dir: str | None, size: int | None = None) -> Path:
    """One planner file; its size on disk must be the size the hub's file list declared (checked before)."""
    from huggingface_hub import hf_hub_download

    path = Path(hf_hub_download(repo_id, filename, revision=commit, cache_dir=cache_dir))
    got = path.stat().st_size
    if size is not None and got != size:
        raise BadInput(
            f"{repo_id}: {filename} arrived with {got} bytes, but the hub's file list says {size}",
            hint="retry (the repo may have changed between the two requests), or pass a local folder",
        )
    return path


def _checked(repo_id: str, files: dict[str, int | None]) -> list[str]:
    """The files to fetch, each size-checked before anything is written; config.json must be among them."""
    if "config.json" not in files:
        raise BadInput(
            f"{repo_id}: the repo has no config.json at its top level",
            hint="the repo may be GGUF-only; pass the .gguf file",
        )
    for name, size in sorted(files.items()):
        if size is None:
            raise BadInput(
                f"{repo_id}: the hub did not report the size of {name}, so it is not downloaded",
                hint="download the repo's config and index files yourself and pass the folder",
            )
        if size > MAX_FILE_BYTES:
            raise BadInput(
                f"{repo_id}: {name} is {size / 2**20:.0f} MiB, over the {MAX_FILE_BYTES >> 20} MiB a "
                "planner file may be; not downloaded",
                hint="pass a local model folder",
            )
    return sorted(files)


def _from_cache(repo_id: str, revision: str | None, cache_dir: str | None, why: str) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:  # local_files_only: reads the cache, never the network, writes nothing
        return Path(
            snapshot_download(
                repo_id, revision=revision, cache_dir=cache_dir, allow_patterns=HUB_FILES, local_files_only=True
            )
        )
    except LocalEntryNotFoundError:
        raise BadInput(
            f"{repo_id}: not a local path, and the Hugging Face cache has no snapshot of it ({why})",
            hint="download it once with network access (the same command fetches config.json and the "
            "safetensors index only), or pass a local model folder",
        ) from None


def fetch_repo(
    repo_id: str, *, revision: str | None = None, cache_dir: str | Path | None = None, offline: bool | None = None
) -> Path:
    """The local snapshot folder holding the planner's files of `repo_id`: from the cache when offline or when the
    hub cannot be reached; otherwise the hub's file list is read first and only the planner's files, each under
    MAX_FILE_BYTES, are downloaded (no weight file, no file of unknown size)."""
    try:
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError:  # pragma: no cover - the `model` extra brings it
        raise BadInput(
            f"{repo_id}: reading a Hugging Face repo id needs huggingface_hub",
            hint="pip install 'switchover[model]', or pass a local model folder",
        ) from None
    offline = _offline() if offline is None else offline
    cache = str(cache_dir) if cache_dir else None
    unreachable: tuple[type[BaseException], ...] = (HfHubHTTPError, *_network_errors())
    try:
        if offline:
            path = _from_cache(repo_id, revision, cache, "HF_HUB_OFFLINE is set")
        else:
            try:
                commit, files = _remote_files(repo_id, revision)
            except (RepositoryNotFoundError, GatedRepoError, RevisionNotFoundError):
                raise
            except unreachable:  # no network, DNS, timeouts, 5xx: the cache may have it
                path = _from_cache(repo_id, revision, cache, "the hub could not be reached")
            else:
                names = _checked(repo_id, files)  # every size checked before the first byte is written
                path = _download(repo_id, "config.json", commit, cache, files["config.json"]).parent
                for name in names:
                    if name != "config.json":
                        _download(repo_id, name, commit, cache, files[name])
    except (RepositoryNotFoundError, GatedRepoError) as exc:
        raise BadInput(
            f"{repo_id}: the Hugging Face hub refused the repo ({type(exc).__name__})",
            hint="check the id; gated repos need HF_TOKEN",
        ) from None
    except RevisionNotFoundError:
        raise BadInput(f"{repo_id}: revision {revision!r} not found on the hub") from None
    except unreachable as exc:
        raise BadInput(
            f"{repo_id}: fetching from the Hugging Face hub failed: {type(exc).__name__}",
            hint="retry, set HF_HUB_OFFLINE=1 to use the cache, or pass a local folder",
        ) from None
    except ValueError as exc:  # HFValidationError: the hub's own id rules (no '--', no leading/trailing '-' or '.')
        raise BadInput(
            f"{repo_id}: not a local path, nor a valid Hugging Face repo id ({str(exc)[:120]})",
            hint="check the path or the id (owner/name)",
        ) from None
    if not (path / "config.json").exists():
        raise BadInput(
            f"{repo_id}: the snapshot at {path} has no config.json",
            hint="the repo may be GGUF-only; pass the .gguf file",
        )
    return path
