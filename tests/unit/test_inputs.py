"""One set of rules for numbers, URLs, host:port and env-var names, shared by CLI options and config fields."""

from __future__ import annotations

import math

import pytest
import typer

from switchover import inputs
from switchover.cli import params
from switchover.errors import BadInput


@pytest.mark.parametrize(
    ("value", "kw", "word"),
    [
        (math.nan, {}, "finite"),
        (math.inf, {"lo": 0}, "finite"),
        (0, {"lo": 1}, "at least 1"),
        (0.0, {"lo": 0, "lo_open": True}, "greater than 0"),
        (7, {"hi": 1}, "at most 1"),
        (1.5, {"integer": True}, "whole number"),
    ],
)
def test_number_problems_say_why(value: float, kw: dict[str, object], word: str) -> None:
    problem = inputs.number_problem(value, **kw)  # type: ignore[arg-type]
    assert problem is not None and word in problem
    with pytest.raises(BadInput, match=word):
        inputs.require(value, "--x", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (params.count(), "0"),
        (params.count(), "1.5"),
        (params.count(), "abc"),
        (params.GIB, "nan"),
        (params.GIB, "-inf"),
        (params.GIB, "1e308"),
        (params.FRACTION, "0"),
        (params.FRACTION, "7"),
        (params.PORT, "99999"),
        (params.PORT, "0"),
        (params.URL, "http://"),
        (params.URL, "http://127.0.0.1:99999"),
        (params.URL, "localhost:8000"),
        (params.URL, "http://u:p@h"),
        (params.HOST_PORT, "127.0.0.1:99999"),
        (params.HOST_PORT, "nohost"),
        (params.ENV_VAR, "sk-abcdefghijklmnopqrstuvwx"),
        (params.TEXT, " "),
    ],
)
def test_parsers_refuse_bad_text(parser: params._Parser, text: str) -> None:
    with pytest.raises(typer.BadParameter) as exc:
        parser(text)
    assert "sk-abc" not in str(exc.value)


def test_parsers_accept_good_text() -> None:
    assert params.count()("8") == 8 and params.GIB("80") == 80.0 and params.FRACTION("1") == 1.0
    assert params.URL("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    assert params.HOST_PORT("[::1]:9400") == "[::1]:9400" and inputs.host_port("[::1]:9400") == ("::1", 9400)
    assert params.ENV_VAR("OPENAI_API_KEY") == "OPENAI_API_KEY"


@pytest.mark.parametrize(
    ("rule", "value"), [(inputs.env_var_name, "OPENAI_API_KEY\n"), (inputs.host_port, "localhost\n:80")]
)
def test_a_trailing_newline_is_refused_not_kept(rule: object, value: str) -> None:
    with pytest.raises(ValueError):
        rule(value)  # type: ignore[operator]


@pytest.mark.parametrize(
    "value",
    [
        "0.11.0",
        "2.4.0+cu121",
        "1.0.0-rc1",
        "5092",
        "0.11.2rc1",
        "0.6.3.post1",
        "0.10.1.dev12+g1234abc",
        "v2.0.2",
        "b3216",
        "1.2.0rc1",
    ],
)
def test_engine_releases_accepted(value: str) -> None:
    assert inputs.engine_release(value) == value


@pytest.mark.parametrize(
    "value", ["latest", "0.11.0 ", "", "0.11.0\n", "1" * 50, "0.11.2rc1 extra", "b", "bx12", "0.１"]
)
def test_engine_release_refusals_show_the_value(value: str) -> None:
    with pytest.raises(ValueError, match="is not a version number"):
        inputs.engine_release(value)


def test_releases_order_as_pep440_with_llamacpp_builds() -> None:
    assert inputs.release_version("1.2.0rc1") < inputs.release_version("1.2.0") < inputs.release_version("v1.2.1")
    assert inputs.release_version("b999") < inputs.release_version("b3216")


@pytest.mark.parametrize(
    "token",
    [
        "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
        "a1B2" * 10,
        "d41d8cd98f00b204e9800998ecf8427e",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_" + "a" * 36,
        "xoxb" + "1" * 40,
    ],
)
def test_a_pasted_token_that_is_a_valid_name_by_syntax_is_refused_unechoed(token: str) -> None:
    with pytest.raises(ValueError) as exc:
        inputs.env_var_name(token)
    assert token not in str(exc.value) and "looks like a key" in str(exc.value)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "HF_TOKEN", "hf_token", "MY_LONG_PROVIDER_API_KEY_FOR_TESTS_2"])
def test_ordinary_variable_names_stay_accepted(name: str) -> None:
    assert inputs.env_var_name(name) == name


def test_the_engine_client_refuses_a_pasted_token_without_echoing_it() -> None:
    from switchover.errors import BadInput
    from switchover.wire import EngineClient

    token = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
    with pytest.raises(BadInput) as exc:
        EngineClient("http://127.0.0.1:1", api_key_env=token)
    assert token not in exc.value.message


def test_a_variable_name_is_shown_in_messages_only_when_it_looks_like_one() -> None:
    assert inputs.shown_env_name("OPENAI_API_KEY") == "OPENAI_API_KEY"
    for odd in ("hf_token", "d41d8cd98f00b204e9800998ecf8427e", "AKIAIOSFODNN7EXAMPLE"):
        assert inputs.shown_env_name(odd) == "(name not shown)"
