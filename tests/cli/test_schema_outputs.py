"""`switchover schema [NAME]`: the registry (switchover.outputs) names every command that prints --json, and what
the commands really print validates against the schema the registry gives for them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from jsonschema import Draft202012Validator

from switchover import outputs
from switchover.config import migration_schema
from tests.cli import cases as C
from tests.cli import workspace as W
from tests.cli.runner import run_cli


def _json_commands() -> set[str]:
    return {path for path, cmd in C.commands().items() if any("--json" in p.opts for p in cmd.params)}


def test_every_command_with_json_output_is_registered_and_every_name_is_a_command() -> None:
    names = {path.replace(" ", "-") for path in _json_commands() if path != "schema"}
    registered = (set(outputs.OUTPUTS) - {"migration"}) | set(outputs.NOT_MODELS)
    assert names - registered == set(), "a command prints --json that `switchover schema` does not know"
    assert registered - names == set(), "a registered name is not a command that prints --json"


def test_schema_prints_the_migration_schema_by_default_and_any_output_by_name() -> None:
    code, out, err, _ = run_cli(["schema"])
    assert code == 0, err
    assert json.loads(out) == migration_schema()
    code, out, err, _ = run_cli(["schema", "plan-capacity"])
    assert code == 0, err
    assert json.loads(out) == outputs.schema("plan-capacity")


def test_schema_list_names_every_output_with_its_meaning() -> None:
    code, out, err, _ = run_cli(["schema", "--list", "--json"])
    assert code == 0, err
    assert json.loads(out) == [{"name": n, "what": o.what} for n, o in outputs.OUTPUTS.items()]
    code, out, err, _ = run_cli(["schema", "--list"])
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()] == list(outputs.OUTPUTS)


@pytest.mark.parametrize("name", ["nope", "plan capacities", "gateway-state"])
def test_an_unknown_name_is_one_error_line_and_exit_2(name: str) -> None:
    code, out, err, _ = run_cli(["schema", name])
    assert code == 2 and out == ""
    assert [x for x in err.splitlines() if x.startswith("error:")] == [next(iter(err.splitlines()))]
    assert name in err and "Traceback" not in err
    assert "hint: valid names: migration, plan-card" in err


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[W.Workspace]:
    workspace = W.build(tmp_path_factory.mktemp("schema"))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(workspace.work)
        yield workspace


MODEL = ["-m", "{in}/model"]
# (schema name, the command line after `switchover`): outputs that need no engine, or that an unreachable one ends
RUNS: list[tuple[str, list[str]]] = [
    ("plan-card", ["plan", "card", *MODEL]),
    ("plan-capacity", ["plan", "capacity", *MODEL, "--gpu", "H100-80G"]),
    ("plan-parallel", ["plan", "parallel", *MODEL, "--gpu", "H100-80G", "--gpus", "4"]),
    ("plan-canary", ["plan", "canary", *MODEL, "--gpu", "H100-80G"]),
    ("plan-translate", ["plan", "translate", "vllm serve m --max-model-len 8192", "--from", "vllm", "--to", "sglang"]),
    ("plan-choose", ["plan", "choose", *MODEL, "--gpu", "H100-80G"]),
    ("plan-grace", ["plan", "grace", "--max-tokens", "2000", "--tpot-p99-ms", "35", "--scan", "{in}/deploy"]),
    ("hw-gpus", ["hw", "gpus"]),
    ("hw-diff", ["hw", "diff", "catalog:H100-80G", "catalog:A100-80Gx8", "-e", "vllm", *MODEL]),
    ("hw-startlog", ["hw", "startlog", C.STARTLOG, "--engine", "vllm"]),
    ("doctor", ["doctor"]),
    ("doctor", ["doctor", "p99 went up"]),
    ("validate", ["validate", "{in}/switchover.yaml"]),
    ("export-argo", ["export", "argo", "-c", "{in}/switchover.yaml"]),
    ("export-envoy", ["export", "envoy", "-c", "{in}/switchover.yaml"]),
    ("export-grafana", ["export", "grafana"]),
    ("alerts-translate", ["alerts", "translate", "{in}/rules.yaml", "--from", "vllm", "--to", "sglang"]),
    ("cachekey", ["cachekey", "{in}/hf", "--model-id", "m", "--prompt", "Hello"]),
    ("diff-model", ["diff-model", "{in}/hf", "{in}/hf", "--no-weights"]),
    ("ready", ["ready", W.CLOSED, "--max-ms", "200"]),
    ("probe", ["probe", "--old", W.CLOSED, "--new", W.CLOSED, "--budget-s", "1"]),
    ("rollout-status", ["rollout", "status", "-c", "{in}/switchover.yaml"]),
    ("rollout-gates", ["rollout", "gates", "-c", "{in}/switchover.yaml"]),
    ("rollout-prerequisites", ["rollout", "prerequisites", "-c", "{in}/switchover.yaml"]),
    ("check", ["check", "{in}/switchover.yaml", "--skip", "bench", "--runs-dir", "{out}/check"]),
]


@pytest.mark.parametrize(("name", "argv"), RUNS, ids=[" ".join(a[:2]) for _, a in RUNS])
def test_what_a_command_prints_validates_against_its_schema(ws: W.Workspace, name: str, argv: list[str]) -> None:
    line = [a.format(**{"in": ws.inputs, "out": ws.root / "out"}) for a in argv]
    code, out, err, _ = run_cli([*line, "--json"])
    assert code in (0, 1, 3) and out, (code, err[-400:])
    Draft202012Validator(outputs.schema(name)).validate(json.loads(out))


def test_list_and_json_combinations_that_mean_nothing_are_refused() -> None:
    for name in ("probe", "migration"):  # migration too: naming the default is still a NAME
        code, _, err, _ = run_cli(["schema", name, "--list"])
        assert code == 2 and "--list takes no NAME" in err
    code, _, err, _ = run_cli(["schema", "--json"])
    assert code == 2 and "--json goes with --list" in err
    code, out, _, _ = run_cli(["schema", "plan capacity"])  # typed as the command is
    assert code == 0 and '"title": "CapacityResult"' in out
