"""Where a model's files are: an HF directory or a GGUF file; the GGUF metadata is read once per path."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from switchover.errors import BadInput
from switchover.textfile import load_json

MAX_JSON_BYTES = 64 << 20  # config / tokenizer_config / generation_config; tokenizer.json is read by `tokenizers`

Kind = Literal["hf", "gguf"]


def resolve(path: str | Path) -> tuple[Kind, Path]:
    """('hf', dir) or ('gguf', file); BadInput naming the path when it is neither or unreadable."""
    p = Path(path).expanduser()
    if not p.exists():
        raise BadInput(f"{p}: no such file or directory")
    if p.is_file():
        if p.suffix == ".gguf":
            return "gguf", p
        raise BadInput(f"{p}: not a model directory or .gguf file")
    try:
        ggufs = sorted(p.glob("*.gguf"))
        has_hf = any((p / n).exists() for n in ("tokenizer.json", "config.json", "tokenizer_config.json"))
    except OSError as exc:
        raise BadInput(f"{p}: cannot read the directory: {exc}") from None
    if has_hf:
        return "hf", p
    if len(ggufs) == 1:
        return "gguf", ggufs[0]
    raise BadInput(
        f"{p}: no tokenizer.json/config.json"
        + (f" and {len(ggufs)} .gguf files; name one" if ggufs else " and no .gguf file")
    )


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from a file; None when absent; BadInput when unreadable or malformed."""
    if not path.exists():
        return None
    obj = load_json(path, max_bytes=MAX_JSON_BYTES, what="JSON file")
    if not isinstance(obj, dict):
        raise BadInput(f"{path}: expected a JSON object")
    return obj


@lru_cache(maxsize=8)
def _gguf_fields(path: str, mtime: float) -> dict[str, Any]:
    try:
        import gguf
    except ImportError:
        raise BadInput("reading GGUF needs the `gguf` package", hint="pip install 'switchover[model]'") from None
    try:
        reader = gguf.GGUFReader(path)
        tensors = [
            (t.name, int(t.tensor_type), [int(x) for x in t.shape], int(t.data_offset), int(t.n_bytes))
            for t in reader.tensors
        ]
    except Exception as exc:  # the reader raises ValueError, IndexError, struct and numpy errors on bad files
        raise BadInput(f"{path}: not a readable GGUF file: {type(exc).__name__}: {exc}") from None
    out: dict[str, Any] = {}
    arch = reader.fields.get("general.architecture")
    try:
        prefixes: tuple[str, ...] = (
            ("tokenizer.", "general.", f"{arch.contents()}.") if arch else ("tokenizer.", "general.")
        )
    except (ValueError, IndexError, TypeError):
        prefixes = ("tokenizer.", "general.")
    for key, field in reader.fields.items():
        if key.startswith(prefixes) or key.endswith(".context_length"):
            try:
                out[key] = field.contents()
            except (ValueError, IndexError, TypeError):
                continue
    out["__tensors__"] = tensors
    return out


def gguf_fields(path: Path) -> dict[str, Any]:
    """tokenizer.*, general.*, the architecture's own (`llama.*`) and *.context_length metadata, plus the tensor
    table (name, type, shape, offset, n bytes). The one GGUF reader of the package (cached per file version)."""
    return _gguf_fields(str(path), path.stat().st_mtime)


def ggml_type_name(ty: int) -> str:
    """The GGML tensor type's name (Q4_K, F16, ...), or ggml_type_N when the gguf package does not know it."""
    try:
        import gguf

        return gguf.GGMLQuantizationType(ty).name
    except (ImportError, ValueError):
        return f"ggml_type_{ty}"
