"""Values typed inside a one-letter option (`-O3`, `-qfp8`), read from small source snippets of each vLLM layout:
argparse's own reading where a one-letter option takes a value (ParserRules.attached_short), and vLLM's
FlexibleArgumentParser rewrite of `-O<value>` (ParserRules.attached_values) into the dotted key `-O.level` (0.9.2),
`-O.mode` (0.11.1) or `--optimization-level` (0.12.0); then what `ReleaseView.option("-O3")` answers from them."""

from __future__ import annotations

import textwrap

import pytest

from switchover.engines.extract import Snapshot, SourceTree, compact, sglang, vllm
from switchover.engines.extract.pyargs import attached_short
from switchover.engines.releases import ReleaseView, resolve

CLI = """
    from vllm.utils import FlexibleArgumentParser

    def make_arg_parser(parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--quantization", "-q", type=str, default=None)
        parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
        parser.add_argument({compile_strings}, type=str, default=None)
        {optimization}
        return parser
"""
SERVE = """
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils import FlexibleArgumentParser

    def main():
        parser = FlexibleArgumentParser()
        return make_arg_parser(parser)
"""
PARSER = """
    import argparse

    class FlexibleArgumentParser(argparse.ArgumentParser):
        def parse_args(self, args=None, namespace=None):
            processed_args = []
            for i, arg in enumerate(args):
                if arg.startswith('--'):
                    processed_args.append('--' + arg[len('--'):].replace('_', '-'))
{branch}
                else:
                    processed_args.append(arg)
{dotted}
            return super().parse_args(processed_args, namespace)
"""
# 0.9.0 on: '--a.b VALUE' (and '-O.level=3') is a key of the JSON option --a
DOTTED = """
            for i, processed_arg in enumerate(processed_args):
                if processed_arg.startswith("-") and "." in processed_arg:
                    key, *keys = processed_arg.split(".")"""
# 0.6.5-0.9.1: a branch that can never run (len(arg) == 2 is '-O' itself) and would hand the value to -O anyway
DEAD = """
                elif arg.startswith('-O') and arg != '-O' and len(arg) == 2:
                    processed_args.append('-O')
                    processed_args.append(arg[2:])"""
LEVEL = """
                elif arg.startswith('-O') and arg != '-O' and arg[2] != '.':
                    level = arg[3:] if arg[2] == '=' else arg[2:]
                    processed_args.append(f'-O.level={level}')"""
MODE = LEVEL.replace("level", "mode")
OPTIMIZATION = """
                elif arg.startswith("-O") and arg != "-O" and arg[2] != ".":
                    optimization_level = arg[3:] if arg[2] == "=" else arg[2:]
                    processed_args += ["--optimization-level", optimization_level]
                elif arg.startswith("-O."):
                    logger.warning_once("-O.* is deprecated: use -cc.* instead, e.g. -cc.backend=eager")
                    processed_args.append(arg.replace("-O", "-cc", 1))"""


def _files(
    branch: str, *, compile_strings: str = '"--compilation-config", "-O"', optimization: str = ""
) -> dict[str, str]:
    files = {
        "vllm/utils.py": PARSER.format(branch=branch, dotted="" if branch == DEAD else DOTTED),
        "vllm/entrypoints/openai/cli_args.py": CLI.format(compile_strings=compile_strings, optimization=optimization),
        "vllm/entrypoints/openai/api_server.py": "from vllm.entrypoints.openai.cli_args import make_arg_parser\n",
        "vllm/scripts.py": SERVE,
    }
    return {path: textwrap.dedent(text) for path, text in files.items()}


def _vllm(branch: str, **layout: str) -> SourceTree:
    return SourceTree(files=_files(branch, **layout))


NEWEST = {
    "branch": OPTIMIZATION,
    "compile_strings": '"--compilation-config", "-cc"',
    "optimization": 'parser.add_argument("--optimization-level", type=int, default=2)',
}


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        ({"branch": DEAD}, {}),
        ({"branch": LEVEL}, {"-O": "--compilation-config.level"}),
        ({"branch": MODE}, {"-O": "--compilation-config.mode"}),
        (NEWEST, {"-O": "--optimization-level"}),
    ],
)
def test_vllm_parse_args_rewrite_of_an_attached_O_value_is_read_per_layout(layout: dict, expected: dict) -> None:
    rules = vllm.extract(_vllm(**layout)).parser
    assert rules.attached_values == expected
    assert rules.attached_short is True  # -q takes a value: argparse reads -qfp8 as -q fp8
    assert rules.source == "vllm/utils.py"


def test_attached_values_need_a_one_letter_option_that_takes_a_value() -> None:
    takes = {"--quantization": {"aliases": ["-q"], "takes_value": True}}
    assert attached_short(takes)
    assert not attached_short({"--tensor-parallel-size": {"aliases": ["-tp"], "takes_value": True}})  # two letters
    assert not attached_short({"--verbose": {"aliases": ["-v"], "takes_value": False}})  # -vv is two switches


def test_sglang_without_one_letter_options_reads_no_attached_value() -> None:
    files = {
        "sglang/srt/server_args.py": textwrap.dedent("""
        import argparse

        class ServerArgs:
            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)

        def prepare_server_args(argv):
            parser = argparse.ArgumentParser()
            ServerArgs.add_cli_args(parser)
    """)
    }
    assert sglang.extract(SourceTree(files=files)).parser.attached_short is False


def _view(layout: dict) -> ReleaseView:
    data = compact(
        "vllm",
        [Snapshot("1.0.0", "v1.0.0", "a", None, vllm.extract(_vllm(**layout)))],
        source_url="https://example.invalid/{ref}/{path}",
        generated_by="test",
    )
    return ReleaseView(data, resolve(data, "1.0.0"))


def test_O3_is_argparse_s_O_with_3_attached_where_no_rewrite_runs() -> None:
    found = _view({"branch": DEAD}).option("-O3")
    assert (found.name, found.status, found.attached_value) == ("--compilation-config", "present", "3")
    assert "-O with the value 3 attached" in (found.matched_as or "")


def test_O3_is_a_key_of_the_compilation_config_where_parse_args_rewrites_it() -> None:
    found = _view({"branch": LEVEL}).option("-O3")
    assert (found.name, found.status, found.attached_value) == ("--compilation-config", "present", "3")
    assert "--compilation-config.level 3" in (found.matched_as or "")


def test_O3_is_the_optimization_level_where_parse_args_hands_it_there() -> None:
    view = _view(NEWEST)
    found = view.option("-O3")
    assert (found.name, found.status, found.attached_value) == ("--optimization-level", "present", "3")
    assert view.option("-qfp8").name == "--quantization"  # argparse's reading of the other one-letter option
    assert view.option("-tp4").status == "absent"  # a two-letter option never takes an attached value


FROM_CLI = """
    import ast
    from dataclasses import dataclass

    @dataclass
    class CompilationConfig:
        level: int = 0

        @classmethod
        def from_cli(cls, cli_value: str) -> "CompilationConfig":
            if cli_value in ["0", "1", "2", "3"]:
                return cls(level=int(cli_value))
            return CompilationConfig(**ast.literal_eval(cli_value))
"""


def test_O_value_read_as_a_level_or_a_dict_literal_is_json_not_int() -> None:
    files = _files(DEAD)
    files["vllm/config.py"] = textwrap.dedent(FROM_CLI)
    cli = files["vllm/entrypoints/openai/cli_args.py"]
    files["vllm/entrypoints/openai/cli_args.py"] = "from vllm.config import CompilationConfig\n" + cli.replace(
        '"-O", type=str', '"-O", type=CompilationConfig.from_cli'
    )
    flags = vllm.extract(SourceTree(files=files)).flags
    assert flags["--compilation-config"]["kind"] == "json"  # 0.6.5: -O3 and -O '{"level": 3}' both parse
