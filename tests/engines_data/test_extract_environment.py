"""The environment variables vLLM and SGLang releases read, from small source snippets of each layout: vLLM's
envs.py table (lambdas, env_with_choices, helper functions, fallbacks, TYPE_CHECKING kinds), the package-wide
reads of releases before it, SGLang's Envs registry and its get_bool_env_var / os.getenv reads."""

from __future__ import annotations

import textwrap

from switchover.engines.extract import SourceTree, vllm
from switchover.engines.extract.pyargs import evaluator
from switchover.engines.extract.pyenv import may_read, read_lines
from switchover.engines.extract.pyeval import Source
from switchover.engines.extract.sglang_environ import environment as sglang_environment
from switchover.engines.extract.vllm_envs import environment as vllm_environment


def _source(files: dict[str, str], package: str) -> Source:
    return Source(SourceTree(files={p: textwrap.dedent(t) for p, t in files.items()}), package)


def _vllm_env(files: dict[str, str]) -> dict[str, dict]:
    source = _source(files, "vllm")
    return vllm_environment(evaluator(source), source)


def _sglang_env(files: dict[str, str]) -> dict[str, dict]:
    source = _source(files, "sglang")
    return sglang_environment(evaluator(source), source)


ENVS = """
    import os
    from typing import TYPE_CHECKING, Any, Callable, Optional

    if TYPE_CHECKING:
        VLLM_OPAQUE: Optional[int] = None

    def get_default_config_root():
        return os.getenv("XDG_CONFIG_HOME", os.path.join(os.path.expanduser("~"), ".config"))

    def maybe_convert_int(value: Optional[str]) -> Optional[int]:
        return None if value is None else int(value)

    def env_with_choices(env_name: str, default: Optional[str], choices) -> Callable[[], Optional[str]]:
        def _get_validated_env() -> Optional[str]:
            value = os.getenv(env_name)
            return default if value is None else value
        return _get_validated_env

    def env_list_with_choices(env_name: str, default: list[str], choices) -> Callable[[], list[str]]:
        def _get() -> list[str]:
            value = os.getenv(env_name)
            return default if value is None else value.split(",")
        return _get

    def env_set_with_choices(env_name: str, default: list[str], choices) -> Callable[[], set[str]]:
        def _get() -> set[str]:
            return set(env_list_with_choices(env_name, default, choices)())
        return _get

    def get_vllm_port() -> Optional[int]:
        if "VLLM_PORT" not in os.environ:
            return None
        return int(os.getenv("VLLM_PORT", "0"))

    environment_variables: dict[str, Callable[[], Any]] = {
        "VLLM_USE_V1": lambda: bool(int(os.getenv("VLLM_USE_V1", "1"))),
        "VLLM_USE_MODELSCOPE": lambda: os.environ.get("VLLM_USE_MODELSCOPE", "False").lower() == "true",
        "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", "") or os.getenv("HOST_IP", ""),
        "VLLM_PORT": get_vllm_port,
        "VLLM_RPC_TIMEOUT": lambda: maybe_convert_int(os.environ.get("VLLM_RPC_TIMEOUT", None)),
        "VLLM_CONFIG_ROOT": lambda: os.path.expanduser(
            os.getenv("VLLM_CONFIG_ROOT", os.path.join(get_default_config_root(), "vllm"))),
        "VLLM_WORKER_MULTIPROC_METHOD": env_with_choices("VLLM_WORKER_MULTIPROC_METHOD", "fork", ["spawn", "fork"]),
        "VLLM_ATTENTION_BACKEND": env_with_choices(
            "VLLM_ATTENTION_BACKEND", None,
            lambda: list(__import__("vllm.attention.registry", fromlist=["Backend"]).Backend.__members__.keys())),
        "VLLM_LABELS": env_set_with_choices("VLLM_LABELS", default=[], choices=["container", "web_search"]),
        "S3_ACCESS_KEY_ID": lambda: os.environ.get("S3_ACCESS_KEY", None),
        "VLLM_TPU_USING_PATHWAYS": lambda: bool("proxy" in os.getenv("JAX_PLATFORMS", "").lower()),
        "VLLM_OPAQUE": lambda: computed_elsewhere(),
    }
"""
REGISTRY = """
    import enum

    class Backend(enum.Enum):
        FLASH_ATTN = enum.auto()
        FLASHINFER = enum.auto()
"""


def test_vllm_envs_table_gives_each_variable_its_kind_default_and_choices() -> None:
    env = _vllm_env({"vllm/envs.py": ENVS, "vllm/attention/registry.py": REGISTRY})
    assert env["VLLM_USE_V1"] == {"path": "vllm/envs.py", "kind": "bool", "default": "1"}
    assert env["VLLM_USE_MODELSCOPE"] == {"path": "vllm/envs.py", "kind": "bool", "default": "False"}
    assert env["VLLM_PORT"]["kind"] == "int"  # the helper's return type, not the string it reads
    assert env["VLLM_RPC_TIMEOUT"]["kind"] == "int"
    assert env["VLLM_WORKER_MULTIPROC_METHOD"] == {
        "path": "vllm/envs.py",
        "kind": "str",
        "default": "fork",
        "choices": ["spawn", "fork"],
    }
    assert env["VLLM_ATTENTION_BACKEND"]["choices"] == ["FLASH_ATTN", "FLASHINFER"]  # the enum's member names
    assert "default" not in env["VLLM_ATTENTION_BACKEND"]
    assert env["VLLM_LABELS"] == {
        "path": "vllm/envs.py",
        "kind": "list",
        "default": "[]",
        "choices": ["container", "web_search"],
    }  # handed on to env_list_with_choices
    assert env["VLLM_CONFIG_ROOT"]["default"] == "os.path.join(get_default_config_root(), 'vllm')"
    assert env["VLLM_OPAQUE"]["kind"] == "int"  # unreadable function: the TYPE_CHECKING declaration


def test_vllm_envs_entries_record_what_their_functions_really_read() -> None:
    env = _vllm_env({"vllm/envs.py": ENVS, "vllm/attention/registry.py": REGISTRY})
    assert env["HOST_IP"]["default"] == ""  # VLLM_HOST_IP's fallback is read too
    assert "XDG_CONFIG_HOME" in env  # through get_default_config_root()
    assert "S3_ACCESS_KEY" in env and "S3_ACCESS_KEY_ID" not in env  # the table's key is never read
    assert "JAX_PLATFORMS" in env and "VLLM_TPU_USING_PATHWAYS" not in env  # derived, not read


OLD_SELECTOR = """
    import os
    VLLM_ATTENTION_BACKEND = "VLLM_ATTENTION_BACKEND"

    def which_backend():
        return os.getenv(VLLM_ATTENTION_BACKEND)
"""
OLD_ENGINE = """
    import os
    ENGINE_ITERATION_TIMEOUT_S = int(
        os.environ.get("VLLM_ENGINE_ITERATION_TIMEOUT_S", "60"))
    os.environ["VLLM_WRITTEN_ONLY"] = "1"
    HOST = os.environ.get("HOST_IP")
"""


def test_vllm_before_envs_py_reads_its_variables_where_it_uses_them() -> None:
    env = _vllm_env(
        {
            "vllm/attention/selector.py": OLD_SELECTOR,
            "vllm/engine/async_llm_engine.py": OLD_ENGINE,
            "vllm/tests/conftest.py": 'import os\nos.getenv("VLLM_TEST_ONLY")\n',
        }
    )
    assert env == {
        "VLLM_ATTENTION_BACKEND": {"path": "vllm/attention/selector.py", "kind": "str"},
        "VLLM_ENGINE_ITERATION_TIMEOUT_S": {"path": "vllm/engine/async_llm_engine.py", "kind": "int", "default": "60"},
    }


ENVIRON = """
    import os
    from typing import Any

    class EnvField:
        def __init__(self, default: Any):
            self.default = default

        def parse(self, value: str) -> Any:
            raise NotImplementedError()

    class EnvBool(EnvField):
        def parse(self, value: str) -> bool:
            return value.lower() in ("true", "1")

    class EnvInt(EnvField):
        def parse(self, value: str) -> int:
            return int(value)

    class EnvTuple(EnvField):
        def parse(self, value: str) -> tuple[str, ...]:
            return tuple(value.split(","))

    class _Fallback:
        def __init__(self, default: Any, deprecated_name: str):
            self.deprecated_name = deprecated_name

    class EnvBoolWithAlias(_Fallback, EnvBool):
        pass

    def _default_hip() -> bool:
        return False

    class Envs:
        SGLANG_IS_IN_CI = EnvBool(False)
        SGLANG_RETRACT_DECODE_STEPS = EnvInt(20)
        SGLANG_PLATFORMS = EnvTuple(("cuda",))
        SGLANG_USE_AITER = EnvBool(_default_hip)
        SGLANG_NEW_NAME = EnvBoolWithAlias(True, deprecated_name="SGLANG_OLD_NAME")
        not_a_field = 3

    envs = Envs()
"""
SG_UTILS = """
    import os

    def get_bool_env_var(name: str, default: str = "false") -> bool:
        value = os.getenv(name, default)
        return value.lower() in ("true", "1")

    def get_int_env_var(name: str, default: int = 0) -> int:
        value = os.getenv(name)
        return default if value is None else int(value)
"""
SG_SCHEDULER = """
    import os
    from sglang.srt.utils import get_bool_env_var, get_int_env_var

    class Scheduler:
        def __init__(self):
            self.in_ci = get_bool_env_var("SGLANG_IS_IN_CI", "true")
            self.steps = get_int_env_var("SGLANG_CLIP_MAX_NEW_TOKENS", 4096)
            self.jit = get_bool_env_var(
                "SGL_ENABLE_JIT_DEEPGEMM", default="true")
            self.profile_dir = os.getenv("SGLANG_TORCH_PROFILER_DIR", "/tmp")
            self.skip = get_bool_env_var("SGLANG_SKIP_CHECK")
            self.host = os.getenv("MASTER_ADDR", "localhost")  # not SGLang's own name
"""
SG_WORKER = """
    import os

    def size():
        raw = os.getenv("SGLANG_CLIP_MAX_NEW_TOKENS")
        return raw

    if os.getenv("SGLANG_TORCH_PROFILER_DIR", "") == "":
        pass
"""


def test_sglang_reads_by_name_with_the_helpers_signature_defaults_and_merged_kinds() -> None:
    env = _sglang_env(
        {
            "sglang/srt/utils.py": SG_UTILS,
            "sglang/srt/managers/scheduler.py": SG_SCHEDULER,
            "sglang/srt/managers/worker.py": SG_WORKER,
            "sglang/bench_serving.py": 'import os\nos.getenv("SGLANG_BENCH_ONLY")\n',
        }
    )
    assert env["SGLANG_IS_IN_CI"] == {"path": "sglang/srt/managers/scheduler.py", "kind": "bool", "default": "true"}
    assert env["SGL_ENABLE_JIT_DEEPGEMM"]["default"] == "true"  # spread over two lines, keyword default
    assert env["SGLANG_SKIP_CHECK"]["default"] == "false"  # the helper's own default
    clip = env["SGLANG_CLIP_MAX_NEW_TOKENS"]
    assert clip["kind"] == "int" and clip["default"] == "4096"  # the plain read elsewhere defers to the int one
    assert env["SGLANG_TORCH_PROFILER_DIR"] == {"path": "sglang/srt/managers/scheduler.py", "kind": "str"}
    assert set(env) == {
        "SGLANG_IS_IN_CI",
        "SGL_ENABLE_JIT_DEEPGEMM",
        "SGLANG_CLIP_MAX_NEW_TOKENS",
        "SGLANG_TORCH_PROFILER_DIR",
        "SGLANG_SKIP_CHECK",
    }  # no MASTER_ADDR, no benchmark-only variable


def test_sglang_envs_registry_fields_win_with_their_parsed_kind_and_aliases() -> None:
    env = _sglang_env(
        {
            "sglang/srt/environ.py": ENVIRON,
            "sglang/srt/utils.py": SG_UTILS,
            "sglang/srt/managers/scheduler.py": SG_SCHEDULER,
        }
    )
    assert env["SGLANG_IS_IN_CI"] == {"path": "sglang/srt/environ.py", "kind": "bool", "default": "False"}
    assert env["SGLANG_RETRACT_DECODE_STEPS"] == {"path": "sglang/srt/environ.py", "kind": "int", "default": "20"}
    assert env["SGLANG_PLATFORMS"]["kind"] == "list"
    assert env["SGLANG_USE_AITER"]["default"] == "_default_hip()"
    assert env["SGLANG_OLD_NAME"] == {
        "path": "sglang/srt/environ.py",
        "kind": "bool",  # read when the new is unset
        "deprecated": "Deprecated. Use SGLANG_NEW_NAME instead. Read only while SGLANG_NEW_NAME is unset.",
    }
    assert "not_a_field" not in env
    assert env["SGLANG_TORCH_PROFILER_DIR"]["path"] == "sglang/srt/managers/scheduler.py"  # still read by name


def test_the_vllm_extractor_puts_the_environment_in_the_facts() -> None:
    files = {
        "vllm/envs.py": textwrap.dedent(ENVS),
        "vllm/entrypoints/openai/cli_args.py": "import argparse\ndef make_arg_parser():\n"
        "    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--port', type=int)\n"
        "    return parser\n",
    }
    facts = vllm.extract(SourceTree(files=files))
    assert facts.environment["VLLM_USE_V1"] == {"path": "vllm/envs.py", "kind": "bool", "default": "1"}


def test_only_lines_that_can_name_a_variable_are_looked_at() -> None:
    text = 'import os\nx = 1\nv = os.getenv(\n    NAME)\ny = "SGLANG_X"\n'
    assert read_lines(text, ("SGLANG_",)) == [3, 5]
    assert may_read(text, ("SGLANG_",)) and not may_read("x = 'VLLM_Y'\n", ("SGLANG_",))
