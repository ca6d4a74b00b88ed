"""The vLLM and SGLang extractors on small source snippets of every layout they read: explicit `add_argument`
calls, config dataclasses through `get_kwargs`, frontend fields added by name, parser registries, the `vllm serve`
sub-parser, metric definitions, and SGLang's annotated field namespaces; each as the release's code would run it."""

from __future__ import annotations

import textwrap

import pytest

from switchover.engines.extract import Snapshot, SourceTree, compact, sglang, vllm
from switchover.engines.releases import ReleaseView, resolve


def _tree(files: dict[str, str]) -> SourceTree:
    return SourceTree(files={path: textwrap.dedent(text) for path, text in files.items()})


# --- vLLM, 0.4-style: make_arg_parser() builds a plain argparse parser; EngineArgs adds explicit options
OLD_CLI = """
    import argparse
    from vllm.engine.arg_utils import AsyncEngineArgs

    def make_arg_parser():
        parser = argparse.ArgumentParser(description="server")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--allowed-origins", type=json.loads, default=["*"])
        parser = AsyncEngineArgs.add_cli_args(parser)
        return parser
"""
OLD_ARGS = """
    import argparse
    from dataclasses import dataclass

    @dataclass
    class EngineArgs:
        tokenizer_mode: str = 'auto'
        swap_space: int = 4

        @staticmethod
        def add_cli_args(parser):
            parser.add_argument('--tokenizer-mode', type=str, default=EngineArgs.tokenizer_mode,
                                choices=['auto', 'slow'])
            parser.add_argument('--swap-space', type=int, default=EngineArgs.swap_space)
            parser.add_argument('--enforce-eager', action='store_true')
            parser.add_argument('--enable-chunked-prefill', type=bool, default=False)
            parser.add_argument('--tensor-parallel-size', '-tp', type=int, default=1)
            parser.add_argument('--lora-modules', nargs='+', default=None)
            parser.add_argument('--use-v2-block-manager', action='store_true',
                                help='[DEPRECATED] block manager v2 is now the default.')
            return parser

    class AsyncEngineArgs(EngineArgs):
        @staticmethod
        def add_cli_args(parser):
            parser = EngineArgs.add_cli_args(parser)
            parser.add_argument('--disable-log-requests', action='store_true')
            return parser
"""


def _old_vllm() -> dict[str, str]:
    return {
        "vllm/entrypoints/openai/cli_args.py": OLD_CLI,
        "vllm/entrypoints/openai/api_server.py": "from vllm.entrypoints.openai.cli_args import make_arg_parser\n",
        "vllm/engine/arg_utils.py": OLD_ARGS,
    }


def test_vllm_explicit_add_argument_calls_give_every_option_with_its_value_rules() -> None:
    facts = vllm.extract(_tree(_old_vllm()))
    flags = facts.flags
    assert set(flags) == {
        "--port",
        "--allowed-origins",
        "--tokenizer-mode",
        "--swap-space",
        "--enforce-eager",
        "--enable-chunked-prefill",
        "--tensor-parallel-size",
        "--lora-modules",
        "--use-v2-block-manager",
        "--disable-log-requests",
    }
    assert flags["--tokenizer-mode"]["choices"] == ["auto", "slow"]
    assert flags["--tokenizer-mode"]["default"] == "auto"  # EngineArgs.tokenizer_mode, resolved
    assert flags["--swap-space"] == {
        "path": "vllm/engine/arg_utils.py",
        "aliases": [],
        "takes_value": True,
        "kind": "int",
        "default": "4",
    }
    assert flags["--enforce-eager"]["takes_value"] is False and flags["--enforce-eager"]["kind"] == "bool"
    assert flags["--enable-chunked-prefill"]["takes_value"] is True  # type=bool still takes a value
    assert flags["--tensor-parallel-size"]["aliases"] == ["-tp"]
    assert flags["--lora-modules"]["kind"] == "list"
    assert flags["--allowed-origins"]["kind"] == "json"
    assert "DEPRECATED" in flags["--use-v2-block-manager"]["deprecated"]
    assert "deprecated" not in flags["--disable-log-requests"]
    assert facts.parser.abbrev is True and facts.parser.underscores is False  # plain argparse
    assert facts.parser.source == "vllm/entrypoints/openai/cli_args.py"


FLEX = """
    from argparse import ArgumentParser, BooleanOptionalAction

    class EnableDisableAction(BooleanOptionalAction):
        pass

    class FlexibleArgumentParser(ArgumentParser):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.register("action", BooleanOptionalAction, EnableDisableAction)

        def parse_args(self, args=None, namespace=None):
            processed = ['--' + a[len('--'):].replace('_', '-') for a in args]
            return super().parse_args(processed, namespace)
"""
CONFIG = """
    from dataclasses import dataclass, field, is_dataclass
    from typing import Literal, Optional
    from pydantic import SkipValidation

    CacheDType = Literal["auto", "fp8"]

    @dataclass
    class PassConfig:
        level: int = 0

    @dataclass
    class CacheConfig:
        cache_dtype: CacheDType = "auto"
        \"\"\"KV cache data type.\"\"\"
        enable_prefix_caching: Optional[bool] = None
        block_size: Optional[Literal[8, 16]] = None
        max_model_len: SkipValidation[int] = None
        ignore_patterns: list[str] = field(default_factory=lambda: ["original/**"])
        hf_overrides: dict = field(default_factory=dict)
        compilation: PassConfig = field(default_factory=PassConfig)
        hf_token: bool | str | None = None
        swap_space: float = 4
        \"\"\"This option is deprecated and will be removed in v0.18.\"\"\"
"""
NEW_ARGS = """
    import argparse
    import json
    from dataclasses import is_dataclass
    from vllm.config import CacheConfig
    from vllm.utils import FlexibleArgumentParser

    def _compute_kwargs(cls):
        for field in fields(cls):
            if is_dataclass(field.type):
                pass
            elif type_hints == {bool, str, type(None)}:
                pass

    def get_kwargs(cls):
        return _compute_kwargs(cls)

    class EngineArgs:
        @staticmethod
        def add_cli_args(parser):
            cache_kwargs = get_kwargs(CacheConfig)
            group = parser.add_argument_group(title="CacheConfig")
            group.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
            for name in ("enable_prefix_caching", "block_size", "max_model_len", "ignore_patterns",
                         "hf_overrides", "compilation", "hf_token", "swap_space"):
                group.add_argument("--" + name.replace("_", "-"), **cache_kwargs[name])
            return parser

    class AsyncEngineArgs(EngineArgs):
        pass
"""
FRONTEND = """
    import json
    from dataclasses import dataclass
    from vllm.engine.arg_utils import AsyncEngineArgs, get_kwargs
    from vllm.utils import FlexibleArgumentParser
    from vllm.entrypoints.openai.tool_parsers import ToolParserManager

    @dataclass
    class FrontendArgs:
        port: int = 8000
        allowed_origins: list[str] = field(default_factory=lambda: ["*"])
        tool_call_parser: str | None = None

        @classmethod
        def add_cli_args(cls, parser):
            frontend_kwargs = get_kwargs(cls)
            frontend_kwargs["allowed_origins"]["type"] = json.loads
            del frontend_kwargs["allowed_origins"]["nargs"]
            valid = ToolParserManager.tool_parsers.keys()
            frontend_kwargs["tool_call_parser"]["metavar"] = ",".join(valid)
            group = parser.add_argument_group(title="Frontend")
            for key, value in frontend_kwargs.items():
                group.add_argument(f"--{key.replace('_', '-')}", **value)
            return parser

    def make_arg_parser(parser):
        parser.add_argument("model_tag", nargs="?")
        parser = FrontendArgs.add_cli_args(parser)
        parser = AsyncEngineArgs.add_cli_args(parser)
        parser.add_argument("--reasoning-parser", choices=list(ReasoningParserManager.reasoning_parsers))
        return parser

    from vllm.reasoning import ReasoningParserManager
"""
SERVE = """
    from vllm.entrypoints.openai.cli_args import make_arg_parser

    class ServeSubcommand:
        name = "serve"

        def subparser_init(self, subparsers):
            serve_parser = subparsers.add_parser(self.name, help="serve")
            serve_parser.add_argument("--config", type=str, default="")
            return make_arg_parser(serve_parser)
"""
REGISTRY = {
    "vllm/entrypoints/openai/tool_parsers/__init__.py": """
        from .abstract_tool_parser import ToolParserManager
        from .hermes_tool_parser import Hermes
        _LAZY = {"qwen3_coder": ("qwen3coder", "Q"), "mistral": ("mistral", "M")}
        def register_lazy():
            for name, (file, cls) in _LAZY.items():
                ToolParserManager.register_lazy_module(name, "m." + file, cls)
        register_lazy()
    """,
    "vllm/entrypoints/openai/tool_parsers/abstract_tool_parser.py": """
        class ToolParserManager:
            tool_parsers = {}
            @classmethod
            def register_module(cls, name=None): ...
            @classmethod
            def register_lazy_module(cls, name, path, cls_name): ...
    """,
    "vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py": """
        from .abstract_tool_parser import ToolParserManager
        @ToolParserManager.register_module(["hermes", "hermes2"])
        class Hermes: ...
    """,
    "vllm/reasoning/__init__.py": "from .abs import ReasoningParserManager\nfrom .deepseek import DeepSeek\n",
    "vllm/reasoning/abs.py": "class ReasoningParserManager:\n    reasoning_parsers = {}\n",
    "vllm/reasoning/deepseek.py": """
        from .abs import ReasoningParserManager
        @ReasoningParserManager.register_module("deepseek_r1")
        class DeepSeek: ...
    """,
    # a parser file the package does not import registers nothing (vLLM 0.8.5.post1: no qwen3)
    "vllm/reasoning/qwen3.py": """
        from .abs import ReasoningParserManager
        @ReasoningParserManager.register_module("qwen3")
        class Qwen3: ...
    """,
}


def _new_vllm() -> dict[str, str]:
    return {
        "vllm/utils.py": FLEX,
        "vllm/config.py": CONFIG,
        "vllm/engine/arg_utils.py": NEW_ARGS,
        "vllm/entrypoints/openai/cli_args.py": FRONTEND,
        "vllm/entrypoints/cli/serve.py": SERVE,
        "vllm/entrypoints/openai/api_server.py": "from vllm.entrypoints.openai.cli_args import make_arg_parser\n",
        **REGISTRY,
    }


@pytest.fixture(scope="module")
def new_facts() -> dict:
    return vllm.extract(_tree(_new_vllm())).flags


def test_get_kwargs_turns_config_field_types_into_argparse_rules(new_facts: dict) -> None:
    assert new_facts["--kv-cache-dtype"]["choices"] == ["auto", "fp8"]
    assert new_facts["--kv-cache-dtype"]["default"] == "auto"
    prefix = new_facts["--enable-prefix-caching"]
    assert prefix["takes_value"] is False and prefix["kind"] == "bool"  # BooleanOptionalAction
    assert prefix["negation"] == "--disable-prefix-caching"  # EnableDisableAction's visible inverse
    assert prefix["negations"] == ["--no-enable-prefix-caching"] and prefix["aliases"] == []
    assert new_facts["--block-size"]["choices"] == ["8", "16", "None"]  # Optional adds None
    assert new_facts["--block-size"]["kind"] == "int"
    assert new_facts["--max-model-len"]["kind"] == "int"  # SkipValidation[int] reads as int
    assert new_facts["--ignore-patterns"]["kind"] == "list"
    assert new_facts["--ignore-patterns"]["default"] == "['original/**']"  # default_factory called
    assert new_facts["--hf-overrides"]["kind"] == "json"
    assert new_facts["--compilation"]["kind"] == "json"  # a nested config dataclass is JSON (is_dataclass)
    hf_token = new_facts["--hf-token"]
    assert hf_token["takes_value"] is True and hf_token["value_optional"] is True  # bool | str | None: nargs='?'
    assert new_facts["--swap-space"]["deprecated"].startswith("This option is deprecated")


def test_frontend_fields_become_options_by_name_with_their_customisations(new_facts: dict) -> None:
    assert new_facts["--port"]["default"] == "8000"
    assert new_facts["--allowed-origins"]["kind"] == "json"  # type replaced, nargs deleted
    assert new_facts["--config"]["path"] == "vllm/entrypoints/cli/serve.py"  # from the `serve` sub-parser
    assert "model_tag" not in new_facts  # positionals are not options


def test_registry_names_are_the_parsers_the_package_registers(new_facts: dict) -> None:
    tool = new_facts["--tool-call-parser"]
    assert tool["choices"] == ["hermes", "hermes2", "mistral", "qwen3_coder"]
    assert tool["choices_open"] is True  # checked after plugins load, not by argparse
    reasoning = new_facts["--reasoning-parser"]
    assert reasoning["choices"] == ["deepseek_r1"]  # qwen3.py is not imported by the package
    assert not reasoning.get("choices_open")  # argparse `choices=` refuses anything else


def test_flexible_parser_reads_underscores_and_keeps_abbreviations() -> None:
    rules = vllm.extract(_tree(_new_vllm())).parser
    assert rules.underscores is True and rules.abbrev is True and rules.source == "vllm/utils.py"
    assert rules.dotted_keys is False  # this parse_args does not split '--a.b' into keys


DOTTED = """
        def parse_args(self, args=None, namespace=None):
            processed = ['--' + a[len('--'):].replace('_', '-') for a in args]
            dict_args = {}
            for i, arg in enumerate(processed):
                if arg.startswith("-") and "." in arg:
                    key, *keys = arg.split(".")
                    dict_args[key] = {keys[0]: processed[i + 1]}
            return super().parse_args(processed, namespace)
"""


def test_flexible_parser_that_splits_dotted_options_reads_their_keys() -> None:
    files = _new_vllm()
    head = FLEX[: FLEX.index("        def parse_args")]
    files["vllm/utils.py"] = head + DOTTED
    rules = vllm.extract(_tree(files)).parser
    assert rules.dotted_keys is True and rules.underscores is True and rules.source == "vllm/utils.py"


def test_an_unreadable_value_stays_unknown_rather_than_guessed() -> None:
    files = _old_vllm()
    files["vllm/engine/arg_utils.py"] = OLD_ARGS.replace("choices=['auto', 'slow']", "choices=runtime_modes()")
    flags = vllm.extract(_tree(files)).flags
    assert "choices" not in flags["--tokenizer-mode"]  # None = any value, not an invented list


METRICS_V0 = """
    from prometheus_client import Counter, Gauge, Histogram
    class Metrics:
        def __init__(self, labelnames):
            self.gauge = self._gauge_cls(name="vllm:gpu_cache_usage_perc", documentation="x")
            self.counter = self._counter_cls(name="vllm:num_preemptions_total", documentation="x")
            self.gauge.labels(**labels).set(1)
"""
METRICS_V1 = """
    class PrometheusStatLogger:
        def __init__(self, vllm_config):
            self.counter = self._counter_cls(name="vllm:num_preemptions", documentation="x")
            self.ttft = self._histogram_cls(name="vllm:time_to_first_token_seconds", documentation="x")
            if self.show_hidden_metrics:
                self.old = self._gauge_cls(name="vllm:gpu_cache_usage_perc", documentation="x")
            self.usage = self._gauge_cls(name="vllm:kv_cache_usage_perc", documentation="x")

        def log_info(self, type):
            name = None
            if type == "cache_config":
                name = "vllm:cache_config_info"
            gauge = self._gauge_cls(name=name, documentation="info")


    class SpecDecodingProm:
        def __init__(self, speculative_config):
            specs = [("vllm:spec_decode_num_drafts", "Drafts."), ("vllm:spec_decode_num_draft_tokens", "Tokens.")]
            self.counters = [self._counter_cls(name=name, documentation=doc) for name, doc in specs]
"""


@pytest.mark.parametrize(
    ("use_v1", "expected"),
    [
        ("0", {"vllm:gpu_cache_usage_perc": "gauge", "vllm:num_preemptions_total": "counter"}),
        (
            "1",
            {
                "vllm:num_preemptions_total": "counter",
                "vllm:time_to_first_token_seconds": "histogram",
                "vllm:kv_cache_usage_perc": "gauge",
                "vllm:cache_config_info": "gauge",
                "vllm:spec_decode_num_drafts_total": "counter",
                "vllm:spec_decode_num_draft_tokens_total": "counter",
            },
        ),
    ],
)
def test_metrics_are_the_default_engines_series_as_scraped(use_v1: str, expected: dict[str, str]) -> None:
    files = {
        **_old_vllm(),
        "vllm/engine/metrics.py": METRICS_V0,
        "vllm/v1/metrics/loggers.py": METRICS_V1,
        "vllm/envs.py": f'VLLM_USE_V1 = lambda: bool(int(os.getenv("VLLM_USE_V1", "{use_v1}")))\n',
    }
    metrics = vllm.extract(_tree(files)).metrics
    assert {name: m["type"] for name, m in metrics.items()} == expected  # hidden gauge left out


# --- SGLang
SG_ARGS_OLD = """
    import argparse
    from dataclasses import dataclass
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    @dataclass
    class ServerArgs:
        mem_fraction_static: float = None
        tp_size: int = 1

        @staticmethod
        def add_cli_args(parser: argparse.ArgumentParser):
            parser.add_argument("--model-path", type=str, required=True)
            parser.add_argument("--mem-fraction-static", type=float, default=ServerArgs.mem_fraction_static)
            parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, default=ServerArgs.tp_size)
            parser.add_argument("--data-parallel-size", "--dp-size", type=int, default=1)
            parser.add_argument("--enable-metrics", action="store_true")
            parser.add_argument("--max-running-requests", type=int)
            parser.add_argument("--max-total-tokens", type=int)
            parser.add_argument("--reasoning-parser", choices=list(ReasoningParser.DetectorMap.keys()))

    def prepare_server_args(argv):
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        return ServerArgs.from_cli_args(parser.parse_args(argv))
"""
SG_REASONING = "class ReasoningParser:\n    DetectorMap = {'deepseek-r1': 1, 'qwen3': 2}\n"
SG_COLLECTOR = """
    from prometheus_client import Counter, Gauge, Histogram
    class SchedulerMetricsCollector:
        def __init__(self, labels):
            self.gen_throughput = Gauge(name="sglang:gen_throughput", documentation="x")
            self.prompt_tokens = Counter(name="sglang:prompt_tokens", documentation="x")
            self.itl = Histogram(name="sglang:inter_token_latency_seconds", documentation="x")
"""


def _sglang_old() -> dict[str, str]:
    return {
        "sglang/srt/server_args.py": SG_ARGS_OLD,
        "sglang/srt/parser/reasoning_parser.py": SG_REASONING,
        "sglang/srt/metrics/collector.py": SG_COLLECTOR,
    }


def test_sglang_server_args_options_aliases_and_metrics() -> None:
    facts = sglang.extract(_tree(_sglang_old()))
    assert facts.flags["--tensor-parallel-size"]["aliases"] == ["--tp-size"]
    assert facts.flags["--reasoning-parser"]["choices"] == ["deepseek-r1", "qwen3"]
    assert facts.flags["--enable-metrics"]["takes_value"] is False
    assert facts.parser.abbrev is True and facts.parser.underscores is False
    assert facts.parser.source == "sglang/srt/server_args.py"
    assert facts.metrics == {
        "sglang:gen_throughput": {"path": "sglang/srt/metrics/collector.py", "type": "gauge"},
        "sglang:prompt_tokens_total": {"path": "sglang/srt/metrics/collector.py", "type": "counter"},
        "sglang:inter_token_latency_seconds": {"path": "sglang/srt/metrics/collector.py", "type": "histogram"},
    }


def test_sglang_abbreviations_resolve_when_unique_and_fail_when_ambiguous() -> None:
    facts = sglang.extract(_tree(_sglang_old()))
    data = compact(
        "sglang", [Snapshot("0.4.0", "v0.4.0", "a", None, facts)], source_url="u/{ref}/{path}", generated_by="test"
    )
    at = ReleaseView(data, resolve(data, "0.4.0"))
    assert at.option("--tp").name == "--tensor-parallel-size"
    assert at.option("--dp").name == "--data-parallel-size"
    assert at.option("--mem-frac").name == "--mem-fraction-static"
    assert "ambiguous" in at.option("--max").reason  # --max-running-requests and --max-total-tokens
    assert at.option("--mem_fraction_static").status == "absent"  # plain argparse: no underscores


def test_sglang_refusing_abbreviations_is_read_from_the_parser() -> None:
    files = _sglang_old()
    files["sglang/srt/server_args.py"] = SG_ARGS_OLD.replace(
        "argparse.ArgumentParser()", "argparse.ArgumentParser(allow_abbrev=False)"
    )
    assert sglang.extract(_tree(files)).parser.abbrev is False


SG_ARG_UTILS = """
    from typing import Annotated
    import msgspec
    A = Annotated

    class Arg(msgspec.Struct, frozen=True):
        help: str = ""
        choices: list | None = None
        aliases: list[str] | None = None
        no_cli: bool = False

    def add_cli_args_from_dataclass(parser, cls, *, fields=None):
        ...
"""
SG_FIELDS = """
    from typing import List, Literal, Optional
    import msgspec
    from sglang.srt.arg_groups.arg_utils import A, Arg

    class Parallel(msgspec.Struct):
        tp_size: A[int, Arg(help="The tensor parallelism size.", aliases=["--tensor-parallel-size"])] = 1
        mem_fraction_static: A[Optional[float], "The fraction of the memory used for static allocation."] = None
        enable_metrics: A[bool, "Enable metrics."] = False
        load_format: A[Literal["auto", "pt"], "Load format."] = "auto"
        cuda_graph_bs: A[Optional[List[int]], "Batch sizes."] = None
        gpu_id: A[int, Arg(help="internal", no_cli=True)] = 0
        sampling_backend: A[str, Arg(help="registered by hand", no_cli=True)] = "pytorch"
        rank: int = 0
"""
SG_ARGS_NEW = """
    import argparse
    from sglang.srt.arg_groups.arg_utils import add_cli_args_from_dataclass
    from sglang.srt.arg_groups.fields import collect_input_fields
    from sglang.srt.arg_groups.fields.parallel import Parallel

    class ServerArgs:
        @staticmethod
        def add_cli_args(parser):
            add_cli_args_from_dataclass(parser, ServerArgs)
            parser.add_argument("--sampling-backend", type=str, default=_declared_default("sampling_backend"))
            parser.add_argument("--config", type=str)

    _INPUT_NAMESPACES = [Parallel]
    _annotations, _defaults, _namespaces = collect_input_fields(_INPUT_NAMESPACES)
    ServerArgs = msgspec.defstruct("ServerArgs", [])

    def _declared_default(name):
        return next(f.default for f in msgspec.structs.fields(ServerArgs) if f.name == name)

    def prepare_server_args(argv):
        parser = argparse.ArgumentParser(prog="sglang serve")
        ServerArgs.add_cli_args(parser)
"""


def test_sglang_annotated_namespace_fields_become_options_citing_their_file() -> None:
    files = {
        "sglang/srt/server_args.py": SG_ARGS_NEW,
        "sglang/srt/arg_groups/arg_utils.py": SG_ARG_UTILS,
        "sglang/srt/arg_groups/fields/__init__.py": "def collect_input_fields(sources): ...\n",
        "sglang/srt/arg_groups/fields/parallel.py": SG_FIELDS,
    }
    flags = sglang.extract(_tree(files)).flags
    assert set(flags) == {
        "--tp-size",
        "--mem-fraction-static",
        "--enable-metrics",
        "--load-format",
        "--cuda-graph-bs",
        "--sampling-backend",
        "--config",
    }  # no_cli and unannotated: none
    tp = flags["--tp-size"]
    assert tp == {
        "path": "sglang/srt/arg_groups/fields/parallel.py",
        "aliases": ["--tensor-parallel-size"],
        "takes_value": True,
        "kind": "int",
        "default": "1",
    }
    assert flags["--mem-fraction-static"]["kind"] == "float"  # a bare help string is the Arg
    assert flags["--enable-metrics"]["takes_value"] is False
    assert flags["--load-format"]["choices"] == ["auto", "pt"]
    assert flags["--cuda-graph-bs"]["kind"] == "list"
    assert flags["--sampling-backend"]["default"] == "pytorch"  # _declared_default reads the field's default


SG_PLUGINS_ARGS = """
    import argparse
    from dataclasses import dataclass

    ATTENTION_BACKEND_CHOICES = ["fa3", "triton"]
    add_attention_backend_choices = ATTENTION_BACKEND_CHOICES.extend

    @dataclass
    class ServerArgs:
        sampling_backend: str = "flashinfer"

        @staticmethod
        def add_cli_args(parser):
            parser.add_argument("--attention-backend", choices=ATTENTION_BACKEND_CHOICES)
            parser.add_argument("--dtype", choices=["auto", "half"])
            parser.add_argument("--sampling-backend", default=ServerArgs.sampling_backend)

    def prepare_server_args(argv):
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
"""
LAUNCH_WITH_PLUGINS = """
    import sys
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import prepare_server_args
    if __name__ == "__main__":
        load_plugins()
        server_args = prepare_server_args(sys.argv[1:])
"""


@pytest.mark.parametrize(
    ("launch", "open_choices"),
    [
        (LAUNCH_WITH_PLUGINS, {"--attention-backend"}),
        ("from sglang.srt.server_args import prepare_server_args\n", set()),
    ],
)
def test_sglang_choices_a_plugin_can_extend_before_parsing_are_open(launch: str, open_choices: set[str]) -> None:
    files = {"sglang/srt/server_args.py": SG_PLUGINS_ARGS, "sglang/launch_server.py": launch}
    flags = sglang.extract(_tree(files)).flags
    assert {name for name, facts in flags.items() if facts.get("choices_open")} == open_choices
    assert flags["--sampling-backend"]["default"] == "flashinfer"
