"""Deprecated environment variables and renamed prefixes, from small snippets of each way the releases say so:
SGLang's environ.py (warning functions with either argument order, a loop over a literal {old: new} dict, a registry
of deprecation objects, a field's deprecated_name alias, the SGL_ -> SGLANG_ rewrite run at import) and vLLM's
envs.py (the comment above a table entry)."""

from __future__ import annotations

import textwrap

from switchover.engines.extract import SourceTree, sglang
from switchover.engines.extract.pyargs import evaluator
from switchover.engines.extract.pyeval import Source
from switchover.engines.extract.sglang_environ import environment as sglang_environment
from switchover.engines.extract.sglang_environ import prefix_aliases
from switchover.engines.extract.vllm_envs import environment as vllm_environment

FIELDS = """
    import os
    import warnings
    from typing import Any

    class EnvField:
        def __init__(self, default: Any):
            self.default = default

    class EnvBool(EnvField):
        def parse(self, value: str) -> bool:
            return value.lower() in ("true", "1")

    class EnvInt(EnvField):
        def parse(self, value: str) -> int:
            return int(value)

    class EnvIntWithAlias(EnvInt):
        def __init__(self, default: Any, deprecated_name: str):
            super().__init__(default)
"""
# 0.5.5-0.5.10: the new name first; 0.5.11 on: the old name first, the new one optional
CALLS = (
    FIELDS
    + """
    class Envs:
        SGLANG_LOG_GC = EnvBool(False)
        SGLANG_REQ_WAITING_TIMEOUT = EnvInt(-1)
        SGLANG_EPLB_P2P_BATCH_CHUNK_SIZE = EnvIntWithAlias(32, deprecated_name="SGLANG_EPLB_ROCM_P2P_BATCH_CHUNK_SIZE")

    def _print_deprecated_env(new_name: str, old_name: str):
        if old_name in os.environ:
            warnings.warn(f"Environment variable {old_name} will be deprecated, please use {new_name} instead")
            os.environ[new_name] = os.environ[old_name]

    def _print_removed_env(old_name: str, new_name: str | None = None):
        if old_name in os.environ:
            if new_name is None:
                warnings.warn(f"Environment variable {old_name} has been deprecated.")

    def _warn_deprecated_env_to_cli_flag(env_name: str, suggestion: str):
        if env_name in os.environ:
            warnings.warn(f"Environment variable {env_name} is deprecated. {suggestion}")

    def _convert_SGL_to_SGLANG():
        _print_deprecated_env("SGLANG_LOG_GC", "SGLANG_GC_LOG")
        _print_removed_env("SGLANG_PER_TOKEN_GROUP_QUANT_8BIT_V2")
        _deprecated_ms_to_s = {"SGLANG_QUEUED_TIMEOUT_MS": "SGLANG_REQ_WAITING_TIMEOUT"}
        for old_name, new_name in _deprecated_ms_to_s.items():
            if old_name in os.environ:
                warnings.warn(f"Environment variable {old_name} (in ms) is deprecated, please use {new_name}")
                os.environ[new_name] = str(float(os.environ[old_name]) / 1000.0)
        for key, value in os.environ.items():
            if key.startswith("SGL_"):
                new_key = key.replace("SGL_", "SGLANG_", 1)
                warnings.warn(f"Environment variable {key} is deprecated, please use {new_key}")
                os.environ[new_key] = value

    _convert_SGL_to_SGLANG()
    _warn_deprecated_env_to_cli_flag("SGLANG_GC_LOG", "It will be removed in 0.5.7.")
"""
)
# 0.5.18 on: one registry of deprecation objects, applied at import
REGISTRY = (
    FIELDS
    + """
    class Envs:
        SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK = EnvBool(True)
        SGLANG_LOG_GC = EnvBool(False)

    def _invert_bool(value: str) -> str:
        return "0" if value.lower() in ("1", "true") else "1"

    class _DeprecatedEnv:
        def __init__(self, replacement=None, transform=None, note=None):
            self.replacement = replacement
            self.transform = transform
            self.note = note

        def apply(self, old_name: str):
            if old_name not in os.environ:
                return
            warnings.warn(f"Environment variable {old_name} is deprecated.")
            if self.replacement is not None:
                value = os.environ[old_name]
                if self.transform is not None:
                    value = self.transform(value)
                os.environ[self.replacement] = value

    _DEPRECATED_ENVS = {
        "SGLANG_GC_LOG": _DeprecatedEnv(replacement="SGLANG_LOG_GC"),
        "SGLANG_DISABLE_TP_MEMORY_INBALANCE_CHECK": _DeprecatedEnv(
            replacement="SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK", transform=_invert_bool),
        "SGLANG_ENABLE_GRPC": _DeprecatedEnv(note="Please use '--grpc-port' to enable the native gRPC server."),
    }

    def _handle_deprecated_envs():
        for old_name, deprecation in _DEPRECATED_ENVS.items():
            deprecation.apply(old_name)

    _handle_deprecated_envs()
"""
)


def _source(files: dict[str, str], package: str) -> Source:
    return Source(SourceTree(files={p: textwrap.dedent(t) for p, t in files.items()}), package)


def _sglang(environ: str) -> tuple[dict[str, dict], dict[str, str]]:
    source = _source({"sglang/srt/environ.py": environ}, "sglang")
    return sglang_environment(evaluator(source), source), prefix_aliases(source)


def test_sglang_warning_functions_mark_the_old_name_whatever_the_argument_order() -> None:
    env, _ = _sglang(CALLS)
    # forwarded unchanged: the replacement's kind; the second declaration's hint joins the first
    assert env["SGLANG_GC_LOG"] == {
        "path": "sglang/srt/environ.py",
        "kind": "bool",
        "deprecated": "Deprecated. Use SGLANG_LOG_GC instead. It will be removed in 0.5.7.",
    }
    assert env["SGLANG_PER_TOKEN_GROUP_QUANT_8BIT_V2"]["deprecated"] == "Deprecated."  # read only to warn
    assert "deprecated" not in env["SGLANG_LOG_GC"]  # the replacement is not deprecated


def test_sglang_loop_over_a_literal_dict_marks_each_old_name_and_a_converted_value_keeps_no_kind() -> None:
    env, _ = _sglang(CALLS)
    assert env["SGLANG_QUEUED_TIMEOUT_MS"] == {
        "path": "sglang/srt/environ.py",
        "kind": "unknown",
        "deprecated": "Deprecated. Use SGLANG_REQ_WAITING_TIMEOUT instead.",
    }


def test_sglang_field_alias_is_deprecated_and_read_only_while_the_field_is_unset() -> None:
    env, _ = _sglang(CALLS)
    assert env["SGLANG_EPLB_ROCM_P2P_BATCH_CHUNK_SIZE"]["deprecated"] == (
        "Deprecated. Use SGLANG_EPLB_P2P_BATCH_CHUNK_SIZE instead. Read only while SGLANG_EPLB_P2P_BATCH_CHUNK_SIZE "
        "is unset."
    )
    assert env["SGLANG_EPLB_ROCM_P2P_BATCH_CHUNK_SIZE"]["kind"] == "int"


def test_sglang_deprecation_registry_gives_replacement_note_and_transform() -> None:
    env, _ = _sglang(REGISTRY)
    assert env["SGLANG_GC_LOG"]["deprecated"] == "Deprecated. Use SGLANG_LOG_GC instead."
    assert env["SGLANG_GC_LOG"]["kind"] == "bool"
    inverted = env["SGLANG_DISABLE_TP_MEMORY_INBALANCE_CHECK"]
    assert inverted["kind"] == "unknown"  # the value is transformed on the way (inverted), not forwarded
    assert inverted["deprecated"] == "Deprecated. Use SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK instead."
    assert env["SGLANG_ENABLE_GRPC"]["deprecated"] == (
        "Deprecated. Please use '--grpc-port' to enable the native gRPC server."
    )


def test_sglang_prefix_rewrite_is_read_only_when_environ_py_runs_it_at_import() -> None:
    assert _sglang(CALLS)[1] == {"SGL_": "SGLANG_"}
    assert _sglang(CALLS.replace("\n    _convert_SGL_to_SGLANG()\n", "\n"))[1] == {}  # defined, never called
    assert _sglang(REGISTRY)[1] == {}


def test_sglang_extract_carries_the_prefix_aliases() -> None:
    files = {
        "sglang/srt/environ.py": textwrap.dedent(CALLS),
        "sglang/srt/server_args.py": textwrap.dedent("""
        import argparse

        class ServerArgs:
            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--tp-size", type=int, default=1)
    """),
    }
    assert sglang.extract(SourceTree(files=files)).env_prefix_aliases == {"SGL_": "SGLANG_"}


def test_a_function_that_only_writes_a_variable_is_not_a_reader() -> None:
    source = _source(
        {
            "sglang/srt/utils.py": """
        import os

        def set_env(name: str, value: str) -> None:
            os.environ[name] = value

        def setup():
            set_env("SGLANG_WRITTEN_ONLY", "1")
    """
        },
        "sglang",
    )
    assert sglang_environment(evaluator(source), source) == {}


ENVS = """
    import os
    from typing import Any, Callable

    environment_variables: dict[str, Callable[[], Any]] = {
        # If set, vllm will skip the deprecation warnings.
        "VLLM_NO_DEPRECATION_WARNING": lambda: bool(int(os.getenv("VLLM_NO_DEPRECATION_WARNING", "0"))),

        # [DEPRECATED] Cache size (in GiB per process) for multimodal input cache
        "VLLM_MM_INPUT_CACHE_GIB": lambda: int(os.getenv("VLLM_MM_INPUT_CACHE_GIB", "4")),
        # Enables torch profiler if set.
        # Deprecated, see profiler_config.
        "VLLM_TORCH_PROFILER_DIR": lambda: os.getenv("VLLM_TORCH_PROFILER_DIR"),
        "VLLM_PORT": lambda: os.getenv("VLLM_PORT"),
    }
"""


def test_vllm_comment_above_a_table_entry_says_when_the_variable_is_deprecated() -> None:
    source = _source({"vllm/envs.py": ENVS}, "vllm")
    env = vllm_environment(evaluator(source), source)
    assert env["VLLM_MM_INPUT_CACHE_GIB"]["deprecated"] == (
        "[DEPRECATED] Cache size (in GiB per process) for multimodal input cache"
    )
    assert (
        env["VLLM_TORCH_PROFILER_DIR"]["deprecated"] == "Enables torch profiler if set. Deprecated, see "
        "profiler_config."
    )
    assert "deprecated" not in env["VLLM_NO_DEPRECATION_WARNING"]  # 'deprecation' is not 'deprecated'
    assert "deprecated" not in env["VLLM_PORT"]  # the comment block above belongs to another entry


WRAPPED = """
    import os
    import warnings
    from typing import Any, Callable

    def deprecated_env(env_name: str, removal_version: str, replacement: str, getter):
        def _read() -> Any:
            if env_name in os.environ:
                warnings.warn(f"{env_name} is deprecated and will be removed in {removal_version}. {replacement}",
                              FutureWarning)
            return getter()
        return _read

    environment_variables: dict[str, Callable[[], Any]] = {
        # Deprecated: pass --linear-backend fbgemm.
        "VLLM_USE_FBGEMM": deprecated_env("VLLM_USE_FBGEMM", "v0.23", "Use --linear-backend fbgemm.",
                                          lambda: bool(int(os.getenv("VLLM_USE_FBGEMM", "0")))),
    }
"""


def test_vllm_deprecated_env_wrapper_gives_its_warning_filled_with_the_entrys_arguments() -> None:
    source = _source({"vllm/envs.py": WRAPPED}, "vllm")
    fbgemm = vllm_environment(evaluator(source), source)["VLLM_USE_FBGEMM"]
    assert fbgemm["deprecated"] == (
        "VLLM_USE_FBGEMM is deprecated and will be removed in v0.23. Use --linear-backend fbgemm."
    )  # the warning wins over the comment
    assert (fbgemm["kind"], fbgemm["default"]) == ("bool", "0")  # the wrapped getter still gives the kind
