"""Issue 11, "Seen": one regression test per reported item, through the CLI as a user meets it (exit code, one
error line naming the field or value, no traceback)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli import cases as C
from tests.cli.runner import run_cli
from tests.cli.workspace import BOMB, MIGRATION, _gguf_header
from tests.plan import configs as P

RECURSIVE = "old: &a [*a]\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("seen")
    out = {"dir": d}
    for name, content in {
        "recursive.yaml": RECURSIVE.encode(),
        "key.yaml": b"? [a, b]\n: 1\n",
        "bomb.yaml": BOMB.encode(),
        "binary": bytes(range(128, 256)) * 4,
        "four.gguf": b"GGUF",
        "short.gguf": _gguf_header(1, 2) + b"\x05" * 176,
        "kvcount.gguf": _gguf_header(0, 1 << 40),
        "switchover.yaml": MIGRATION.encode(),
    }.items():
        (d / name).write_bytes(content)
        out[name] = d / name
    (d / "model").mkdir()
    (d / "model" / "config.json").write_text(json.dumps(P.LLAMA_8B))
    out["model"] = d / "model"
    return out


def expect(argv: list[str], code: int, *fragments: str, error_line: bool = True) -> str:
    """Run; assert the exit code, one `error:` line (when not 0) holding every fragment, and no traceback."""
    got, out, err, _ = run_cli(argv)
    assert "Traceback" not in out + err and "internal error" not in err, err
    assert got == code, f"{argv}: exit {got}, wanted {code}: {err.strip()[-300:]}"
    if code and error_line:
        errors = [x for x in err.splitlines() if x.startswith("error:")]
        assert len(errors) == 1, err
        for f in fragments:
            assert f in errors[0], f"{f!r} not in {errors[0]!r}"
    return out


# what else a config reader needs before it reads the file
REQUIRED = {
    "rollout rollback": ["--reason", "x"],
    "rollout abandon": ["--reason", "x"],
    "rollout reset": ["--reason", "x"],
    "review export": ["--out", "out.jsonl"],
}


def _config_commands() -> list[list[str]]:
    """Every command that reads the migration file: a `--config` option, or a `config`/`file` argument."""
    found = []
    for name, cmd in C.commands().items():
        for p in cmd.params:
            if p.name in ("config", "file") and name not in (
                "bench calibrate",
                "bench recompute",
                "bench report",
                "bench sweep",
            ):
                opt = p.opts[0] if p.opts and p.opts[0].startswith("-") else None
                found.append([*name.split(), *REQUIRED.get(name, []), *([opt] if opt else []), "CONFIG"])
    return found


CONFIG_COMMANDS = _config_commands()


def test_config_readers_are_all_found() -> None:
    names = {
        " ".join(w for w in c if w.islower() and not w.startswith("-") and w not in ("x", "out.jsonl"))
        for c in CONFIG_COMMANDS
    }
    assert {"validate", "check", "probe", "verify", "bench", "export argo", "gateway", "rollout status"} <= names
    assert len(CONFIG_COMMANDS) >= 12


@pytest.mark.parametrize("argv", CONFIG_COMMANDS, ids=lambda a: " ".join(a[:-1]))
def test_a_recursive_alias_is_one_line_in_every_config_reader(files: dict[str, Path], argv: list[str]) -> None:
    expect(
        [str(files["recursive.yaml"]) if a == "CONFIG" else a for a in argv], 2, "line 1, column 6", "recursive alias"
    )


def test_a_recursive_alias_in_a_scanned_deploy_file(files: dict[str, Path]) -> None:
    expect(
        ["plan", "grace", "--max-tokens", "2000", "--tpot-p99-ms", "35", "--scan", str(files["recursive.yaml"])],
        2,
        "recursive alias",
    )


@pytest.mark.parametrize(
    ("name", "words"),
    [("key.yaml", ("line 1, column 3", "a key must be a plain value")), ("bomb.yaml", ("expand to more than",))],
)
def test_non_scalar_keys_and_alias_bombs_are_refused(files: dict[str, Path], name: str, words: tuple[str]) -> None:
    expect(["validate", str(files[name])], 2, *words)


PLAN: list[tuple[list[str], str]] = [
    (["capacity", "--gpu-mem-gib", "nan"], "'--gpu-mem-gib': must be a finite number"),
    (["capacity", "--gpu-mem-gib", "inf"], "'--gpu-mem-gib': must be a finite number"),
    (["capacity", "--gpu-mem-gib", "1e308"], "'--gpu-mem-gib': must be at most"),
    (["capacity", "--gpu", "H100-80G", "--tp", "0"], "'--tp': must be at least 1"),
    (["capacity", "--gpu", "H100-80G", "--max-model-len", "-5"], "'--max-model-len': must be at least 1"),
    (["capacity", "--gpu", "H100-80G", "--max-model-len", "0"], "'--max-model-len': must be at least 1"),
    (["capacity", "--gpu", "H100-80G", "--context", "-1"], "'--context': must be at least 1"),
    (["capacity", "--gpu", "H100-80G", "--max-num-seqs", "0"], "'--max-num-seqs': must be at least 1"),
    (["capacity", "--gpu", "H100-80G", "--slots", "0"], "'--slots': must be at least 1"),
    (["capacity", "--gpu", "H100-80G", "--weights-gib", "-1"], "'--weights-gib': must be greater than 0"),
    (["capacity", "--gpu", "H100-80G", "--overhead", "activation_peak=-99"], "--overhead activation_peak"),
    (["canary", "--gpu", "H100-80G", "--context", "0"], "'--context': must be at least 1"),
    (["canary", "--gpu", "H100-80G", "--other-gib", "1000"], "--other-gib 1000 leaves nothing"),
    (["parallel", "--gpu", "H100-80G", "--gpus", "100000"], "'--gpus': must be at most 1024"),
]


@pytest.mark.parametrize(("args", "fragment"), PLAN, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_plan_numbers_are_refused_naming_the_option(files: dict[str, Path], args: list[str], fragment: str) -> None:
    expect(["plan", args[0], "-m", str(files["model"]), *args[1:]], 2, fragment)


def test_plan_parallel_is_bounded_work(files: dict[str, Path]) -> None:
    t0 = time.perf_counter()
    expect(["plan", "parallel", "-m", str(files["model"]), "--gpu", "H100-80G", "--gpus", "1024"], 0)
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize(
    ("launch", "source", "fragment"),
    [
        ("vllm serve m --gpu-memory-utilization 7", "vllm", "--gpu-memory-utilization: must be at most 1"),
        ("python -m sglang.launch_server --model-path m --tp-size -3", "sglang", "must be at least 1, got -3"),
    ],
)
def test_translate_refuses_impossible_values(launch: str, source: str, fragment: str) -> None:
    expect(["plan", "translate", "--from", source, launch, "--to", "vllm"], 2, fragment)


def test_translate_from_a_binary_file_is_one_line(files: dict[str, Path]) -> None:
    expect(["plan", "translate", "--from", "vllm", f"@{files['binary']}", "--to", "sglang"], 2, "not UTF-8")


def test_grace_refuses_nan() -> None:
    expect(["plan", "grace", "--max-tokens", "2000", "--tpot-p99-ms", "nan"], 2, "'--tpot-p99-ms'")


@pytest.mark.parametrize("gguf", ["four.gguf", "short.gguf", "kvcount.gguf"])
@pytest.mark.parametrize("verb", ["diff-model", "plan card"])
def test_truncated_gguf_is_one_line(files: dict[str, Path], gguf: str, verb: str) -> None:
    path = str(files[gguf])
    argv = ["diff-model", path, path, "--no-weights"] if verb == "diff-model" else ["plan", "card", "-m", path]
    expect(argv, 2, "not a readable GGUF file")


ONE_LINERS: list[tuple[Callable[[dict[str, Path]], list[str]], str]] = [
    (lambda f: ["ready", "http://127.0.0.1:99999"], "port must be 1-65535"),
    (lambda f: ["ready", "http://127.0.0.1:1", "--max-ms", "nan"], "'--max-ms': must be a finite number"),
    (lambda f: ["ready", "http://"], "no host"),
    (
        lambda f: [
            "metrics-adapter",
            "--from",
            "sglang",
            "--to",
            "vllm",
            "--upstream",
            "http://127.0.0.1:1",
            "--listen",
            "127.0.0.1:99999",
        ],
        "99999",
    ),
    (lambda f: ["export", "argo", "-c", str(f["switchover.yaml"]), "-o", str(f["dir"])], "is a folder"),
    (lambda f: ["export", "grafana", "-o", "/proc/version"], "cannot write /proc/version"),
    (lambda f: ["export", "envoy", "-c", str(f["switchover.yaml"]), "--port", "99999"], "'--port': must be at most"),
    (lambda f: ["hw", "diff", "catalog:H100-80Gx0", "catalog:H100-80G"], "GPU count"),
    (lambda f: ["cachekey", str(f["model"]), "--model-id", "", "--prompt", "x"], "'--model-id': must not be empty"),
]


@pytest.mark.parametrize(("argv", "fragment"), ONE_LINERS, ids=[f for _, f in ONE_LINERS])
def test_reported_inputs_are_exit_2_with_one_line(
    files: dict[str, Path], argv: Callable[..., list[str]], fragment: str
) -> None:
    expect(argv(files), 2, fragment)


@pytest.mark.parametrize(
    ("field", "value"), [("ledger_rotate_mb", ".inf"), ("ledger_rotate_mb", "1e-12"), ("reload_poll_s", "1e-9")]
)
def test_gateway_numbers_that_broke_the_gateway_fail_validate(tmp_path: Path, field: str, value: str) -> None:
    f = tmp_path / "switchover.yaml"
    f.write_text(MIGRATION.replace("  weight: 5\n", f"  weight: 5\n  {field}: {value}\n"))
    expect(["validate", str(f)], 2, f"gateway.{field}")


def test_hw_install_hint_survives_rich_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    from switchover.hardware.fingerprint import HostFingerprint

    reason = "nvidia-ml-py is not installed (pip install 'switchover[gpu]')"
    monkeypatch.setattr("switchover.cli.hw_cmd.fingerprint", lambda: HostFingerprint(gpu_present=False, reason=reason))
    assert "pip install 'switchover[gpu]'" in expect(["hw", "fingerprint"], 0)


def test_drill_keeps_no_secret(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    expect(
        [
            "drill",
            "--stop-new",
            "true -u admin:SECRET1 http://h/x",
            "--start-old",
            "echo http://admin:SECRET2@host/v1 >&2; true",
            "--url",
            "http://127.0.0.1:1",
            "--timeout",
            "0.2",
            "--runs",
            str(runs),
            "--json",
        ],
        1,
        error_line=False,
    )
    written = [p for p in runs.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"drill.json", "start-old.log"}
    for p in written:
        assert b"SECRET" not in p.read_bytes(), p.name
    assert "***" in (runs.rglob("drill.json").__next__()).read_text()
    expect(
        ["drill", "--stop-new", "true", "--start-old", "true", "--url", "http://admin:SECRET3@127.0.0.1:1"],
        2,
        "credentials",
    )


def test_validate_does_not_echo_a_pasted_key(tmp_path: Path) -> None:
    f = tmp_path / "switchover.yaml"
    f.write_text(MIGRATION.replace("  engine: vllm\n", "  engine: vllm\n  api_key_env: sk-proj-Zx81qPLANTEDkey99\n"))
    got, out, err, _ = run_cli(["validate", str(f)])
    assert got == 2 and "PLANTED" not in out + err and "old.api_key_env" in err


def test_engine_text_that_looks_like_rich_markup_is_printed_not_parsed() -> None:
    """An engine's error body with `[/INST]` (a chat-template tag) once crashed the renderer (MarkupError, exit 70)."""
    from aiohttp import web

    from switchover.testing import FakeEngine

    async def engine(req: web.Request) -> web.Response:
        if req.method == "GET":
            return web.json_response({"data": [{"id": "m"}]})
        return web.json_response({"error": {"message": "template error near [/INST] and [bold]x"}}, status=500)

    with FakeEngine(handler=engine).in_thread() as url:
        out = expect(["ready", url], 1, error_line=False)
    assert "[/INST] and [bold]x" in out


def test_bench_refuses_an_unknown_engine_before_contacting_any(tmp_path: Path) -> None:
    expect(
        [
            "bench",
            "--url",
            "http://127.0.0.1:1",
            "--engine",
            "nope",
            "--no-calibrate",
            "--requests",
            "1",
            "--buckets",
            "16",
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        2,
        "unknown engine 'nope'",
    )


@pytest.mark.parametrize(("name", "fragment"), [("/dev/zero", "not a regular file"), ("binary", "not UTF-8")])
def test_verify_prompts_from_a_device_or_binary_file_is_one_line(
    files: dict[str, Path], name: str, fragment: str
) -> None:
    path = name if name.startswith("/") else str(files[name])
    expect(
        ["verify", "--old", "http://127.0.0.1:1", "--new", "http://127.0.0.1:1", "--prompts", path],
        2,
        "--prompts",
        fragment,
    )
