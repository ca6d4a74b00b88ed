"""The registry of --json outputs (switchover.outputs): every name resolves, every schema builds, bad names are
refused as bad input naming the valid ones."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from switchover import outputs
from switchover.config import migration_schema
from switchover.errors import BadInput, ExitCode


@pytest.mark.parametrize("name", list(outputs.OUTPUTS))
def test_every_schema_builds_and_is_a_valid_json_schema(name: str) -> None:
    schema = outputs.schema(name)
    Draft202012Validator.check_schema(schema)
    json.dumps(schema)  # plain JSON: what `switchover schema NAME` prints
    assert schema.get("properties") or schema.get("items") or schema.get("anyOf"), name


@pytest.mark.parametrize("name", list(outputs.OUTPUTS))
def test_every_name_resolves_with_a_one_line_meaning(name: str) -> None:
    out = outputs.get(name)
    assert out is outputs.OUTPUTS[name]
    assert out.what and "\n" not in out.what and len(out.what) <= 120
    assert name == name.lower() and " " not in name


def test_migration_is_the_switchover_yaml_schema_unchanged() -> None:
    assert outputs.schema("migration") == migration_schema()
    assert next(iter(outputs.OUTPUTS)) == "migration"  # first in `schema --list`, and the default


def test_extra_keys_are_added_to_the_model_schema() -> None:
    schema = outputs.schema("plan-choose")
    assert schema["properties"]["verdicts"]["type"] == "object"
    assert "verdicts" in schema["required"]
    alerts = outputs.schema("alerts-translate")
    assert {"output_file", "rules_yaml"} <= set(alerts["required"])
    assert outputs.schema("plan-choose") == schema  # building it twice does not add the keys twice


def test_an_unknown_name_is_bad_input_listing_the_valid_names() -> None:
    with pytest.raises(BadInput) as info:
        outputs.get("plan capacities")
    assert info.value.exit_code == ExitCode.BAD_INPUT
    assert "'plan capacities'" in info.value.message
    assert info.value.hint is not None and "plan-capacity" in info.value.hint and "probe" in info.value.hint


def test_a_name_may_be_typed_as_the_command_is() -> None:
    assert outputs.get("plan capacity") is outputs.get("plan-capacity")


def test_a_printed_document_holds_every_field_and_nothing_else() -> None:
    schema = outputs.schema("probe")
    assert schema["additionalProperties"] is False and set(schema["required"]) == set(schema["properties"])
    nested = [d for d in schema.get("$defs", {}).values() if "properties" in d]
    assert nested and all(d["additionalProperties"] is False for d in nested)
    migration = outputs.schema("migration")  # a file switchover reads: fields with defaults stay optional
    assert set(migration.get("required", [])) < set(migration["properties"])


@pytest.mark.parametrize("name", list(outputs.NOT_MODELS))
def test_a_plain_mapping_output_says_it_has_no_schema(name: str) -> None:
    assert name not in outputs.OUTPUTS
    with pytest.raises(BadInput, match="plain mapping"):
        outputs.get(name)
