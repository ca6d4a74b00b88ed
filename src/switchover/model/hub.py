"""A Hugging Face repo id as a model source: fetch only the small files the planner reads, cached, offline-safe.

`-m Qwen/Qwen3-32B-FP8` brings config.json, generation_config.json, the safetensors index (exact weight bytes in
`metadata.total_size`), hf_quant_config.json and the tokenizer files into the Hugging Face cache with
`huggingface_hub.snapshot_download`; no weight file is downloaded. With `HF_HUB_OFFLINE=1` (or no network) the
cached snapshot is used; when neither the hub nor the cache has the repo, one line says so (exit 2).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from switchover.errors import BadInput

#: The files a plan reads; weights are never downloaded (their size comes from the index).
HUB_FILES = ["config.json", "generation_config.json", "model.safetensors.index.json", "hf_quant_config.json",
             "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
             "chat_template.jinja", "chat_template.json", "params.json"]

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9_.-]{1,96}$")


def looks_like_repo_id(ref: str) -> bool:
    """`owner/name` that is not an existing local path (a local folder always wins)."""
    return bool(_REPO_ID.match(ref)) and ".." not in ref and not Path(ref).expanduser().exists()


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def fetch_repo(repo_id: str, *, revision: str | None = None, cache_dir: str | Path | None = None,
               offline: bool | None = None) -> Path:
    """The local snapshot folder holding the planner's files of `repo_id` (downloaded or from the cache)."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError:  # pragma: no cover - the `model` extra brings it
        raise BadInput(f"{repo_id}: reading a Hugging Face repo id needs huggingface_hub",
                       hint="pip install 'switchover[model]', or pass a local model folder") from None
    offline = _offline() if offline is None else offline
    try:
        folder = snapshot_download(repo_id, revision=revision, cache_dir=str(cache_dir) if cache_dir else None,
                                   allow_patterns=HUB_FILES, local_files_only=offline)
    except LocalEntryNotFoundError:
        why = "HF_HUB_OFFLINE is set" if offline else "the hub could not be reached"
        raise BadInput(f"{repo_id}: not a local path, and the Hugging Face cache has no snapshot of it ({why})",
                       hint="download it once with network access (the same command fetches config.json and the "
                            "safetensors index only), or pass a local model folder") from None
    except (RepositoryNotFoundError, GatedRepoError) as exc:
        raise BadInput(f"{repo_id}: the Hugging Face hub refused the repo ({type(exc).__name__})",
                       hint="check the id; gated repos need HF_TOKEN") from None
    except RevisionNotFoundError:
        raise BadInput(f"{repo_id}: revision {revision!r} not found on the hub") from None
    except (HfHubHTTPError, OSError) as exc:
        raise BadInput(f"{repo_id}: fetching from the Hugging Face hub failed: {type(exc).__name__}",
                       hint="retry, set HF_HUB_OFFLINE=1 to use the cache, or pass a local folder") from None
    except ValueError as exc:  # HFValidationError: the hub's own id rules (no '--', no leading/trailing '-' or '.')
        raise BadInput(f"{repo_id}: not a local path, nor a valid Hugging Face repo id ({str(exc)[:120]})",
                       hint="check the path or the id (owner/name)") from None
    path = Path(folder)
    if not (path / "config.json").exists():
        raise BadInput(f"{repo_id}: the snapshot at {path} has no config.json",
                       hint="the repo may be GGUF-only; pass the .gguf file")
    return path
