"""The migration file: valid files load; malformed ones name the field and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchover.config import Engine, load_migration, migration_schema
from switchover.errors import BadInput, ExitCode

GOOD = """\
old:
  url: http://127.0.0.1:8001/
  engine: vllm
  model: tiny-llama
new:
  url: http://127.0.0.1:8002
  engine: llamacpp
  api_key_env: NEW_KEY
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "switchover.yaml"
    p.write_text(text)
    return p


def test_good_file_loads_and_normalises_url(tmp_path: Path) -> None:
    m = load_migration(_write(tmp_path, GOOD))
    assert m.old.url == "http://127.0.0.1:8001"
    assert m.old.engine is Engine.VLLM and m.new.engine is Engine.LLAMACPP
    assert m.new.model is None and m.new.api_key_env == "NEW_KEY"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("engine: llamacpp", "engine: llama"), "line 7: new.engine"),
        (GOOD.replace("  model: tiny-llama", "  modle: tiny-llama"), "line 4: old.modle: unknown field"),
        (GOOD.replace("  url: http://127.0.0.1:8002\n", ""), "new.url: required field is missing"),
        (GOOD.replace("http://127.0.0.1:8001/", "127.0.0.1:8001"), "line 2: old.url"),
        (GOOD.replace("NEW_KEY", "sk-abc-123"), "line 8: new.api_key_env"),
        (GOOD + "  engine_version: latest\n", "line 9: new.engine_version: 'latest' is not a version number"),
        ("old: [\n", "not valid YAML (line 2"),
        ("- a\n- b\n", "expected a mapping"),
    ],
)
def test_malformed_files_name_field_and_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(BadInput) as info:
        load_migration(_write(tmp_path, text))
    assert expected in info.value.message
    assert info.value.exit_code == ExitCode.BAD_INPUT


def test_a_bad_list_item_is_named_by_its_index_and_line_without_echoing_a_key(tmp_path: Path) -> None:
    keys = "    keys_env:\n      - OLD_KEY\n      - sk-proj-abcdefghijklmnopq\n"
    text = GOOD + "gateway:\n  clients:\n    mode: keys\n" + keys
    with pytest.raises(BadInput) as info:
        load_migration(_write(tmp_path, text))
    assert "line 14: gateway.clients.keys_env.1: must be the name of an environment variable" in info.value.message
    assert "sk-proj" not in info.value.message


def test_missing_file_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no such file"):
        load_migration(tmp_path / "nope.yaml")


def test_schema_lists_endpoint_fields() -> None:
    schema = migration_schema()
    endpoint = schema["$defs"]["Endpoint"]["properties"]
    assert {"url", "engine", "model", "api_key_env"} <= set(endpoint)
