"""Translation across engine versions, scored on two sets of real launches and alert-rule files (both by default).

Two sets under data/translate_accuracy/, same format:
  dev/      the first set (46 launches), whose failures were read while fixing the translator: a development set;
  heldout/  the second set (46 launches), collected by someone else and held out: it was measured once with the
            translator frozen (2026-12-05 01:56 UTC; the figures are in docs/plan.md), then its failures were read and
            fixed as general rules, so it is no longer a held-out measure (the directory keeps its name). Never copy
            entries of either set into tests.
Each set has launches.yaml (real launches from public issues, scripts and engine docs: link, the version the poster
or page states, every argv flag / env var / config key annotated from the engine's source at that release, with
URLs), expected.yaml (per launch and intent, what a correct translation to each engine's newest release read must
do) and may have alerts/ (Prometheus rule files from engine eras); the shared data/translate_accuracy/alerts/ is
scored with either set. Each launch goes through `switchover plan translate --json` to all five engines (its own:
the same-engine upgrade), each rule file through `switchover alerts translate --json`. Counted per source engine:
  false unknowns  an existing, valid input reported refused/unknown at its version;
  wrong mappings  an expectation not met, an invalid input reported ok, a rendered option absent at the target's
                  release, a value outside its choices, or a value given to a switch;
  silent drops    an argv flag, config key, CUDA_VISIBLE_DEVICES or engine env argument (tokenized here, not by the
                  translator) in no list of the output;
  dead series     a rule marked translated/unchanged reading a series the target does not serve at its version;
  failed runs     a translation refused or crashed (the launches are real: each must translate).

    python bench/translate_accuracy.py [--set all|dev|heldout] [--json] [--engine vllm] [--launch ID]
    exit 0: all counts 0 in every set scored; 1: not
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling module, when loaded by path (tests)

from translate_accuracy_score import (
    COUNTERS,
    ENGINE_COMMANDS,
    ENGINES,
    Failure,
    Input,
    check_expectation,
    check_inputs,
    check_rendered,
    counted,
    dead_series,
    expectations,
    launch_inputs,
    launch_text,
    parse_argv,
    rule_file_era,
    same_value,
    series_served,
)

from switchover.cli.app import invoke
from switchover.engines.releases import view as release_view

__all__ = [
    "COUNTERS",
    "ENGINES",
    "ENGINE_COMMANDS",
    "Failure",
    "Input",
    "Tally",
    "check_expectation",
    "check_inputs",
    "check_rendered",
    "counted",
    "dead_series",
    "expectations",
    "launch_inputs",
    "launch_text",
    "load",
    "main",
    "parse_argv",
    "render",
    "rule_file_era",
    "same_value",
    "score",
    "series_served",
    "translate",
]

DATA = Path(__file__).resolve().parent / "data" / "translate_accuracy"
SETS = ("heldout", "dev")
SHARED_ALERTS = DATA / "alerts"


@dataclass
class Tally:
    """Counts and coverage for the launches (and rule files) of one source engine."""

    engine: str
    launches: int = 0
    versions: set[str] = field(default_factory=set)
    runs: int = 0
    rule_files: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    failures: list[Failure] = field(default_factory=list)

    def add(self, failures: list[Failure]) -> None:
        for f in failures:
            self.counts[f.counter] += 1
        self.failures += failures


def load(data: Path = DATA / "heldout") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The launches and the expectations of one set; a launch whose annotated inputs differ from its tokenized ones
    is a data error (both must describe the same command)."""
    launches = yaml.safe_load((data / "launches.yaml").read_text())["launches"]
    expected = yaml.safe_load((data / "expected.yaml").read_text())
    for launch in launches:
        tokens = {(i.typed, i.via) for i in launch_inputs(launch_text(launch), launch.get("files"))}
        annotated = {(f["typed"], f.get("via", "argv")) for f in launch["inputs"]}
        if tokens != annotated:
            raise SystemExit(
                f"{launch['id']}: annotated inputs differ from the command's: {sorted(tokens ^ annotated)}"
            )
    return launches, expected


def alert_files(data: Path) -> list[Path]:
    """The set's own rule files (data/alerts/) and the shared ones (data/translate_accuracy/alerts/)."""
    dirs = [data / "alerts", SHARED_ALERTS]
    return [p for d in dict.fromkeys(dirs) if d.is_dir() for p in sorted(d.glob("*.y*ml"))]


def run_cli(argv: list[str], cwd: Path | None = None) -> tuple[int, str, str]:
    """`switchover ARGV` in this process (one import for every run); exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(cwd or Path.cwd()):
        code = invoke(argv)
    return code, out.getvalue(), err.getvalue()


def translate(launch: dict[str, Any], target: str) -> dict[str, Any] | str:
    """The translation's JSON, or the error line when switchover refused or crashed."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [
            "plan",
            "translate",
            f"@{Path(tmp) / 'launch.txt'}",
            "--from",
            f"{launch['engine']}@{launch['version']}",
            "--to",
            target,
            "--json",
        ]
        (Path(tmp) / "launch.txt").write_text(launch_text(launch))
        for i, (name, text) in enumerate((launch.get("files") or {}).items()):
            path = Path(tmp) / f"file{i}" / Path(name).name
            path.parent.mkdir()
            path.write_text(text)
            argv += ["--file", f"{name}={path}"]
        return _json_out(*run_cli(argv, Path(tmp)))


def _json_out(code: int, out: str, err: str) -> dict[str, Any] | str:
    if code not in (0, 1) or not out.strip():
        return f"exit {code}: {err.strip()[-300:]}"
    try:
        return dict(json.loads(out))
    except ValueError:
        return f"exit {code}: output is not JSON: {out[:200]}"


def run_alerts(path: Path, source: str, target: str) -> dict[str, Any] | str:
    with tempfile.TemporaryDirectory() as tmp:
        return _json_out(
            *run_cli(
                [
                    "alerts",
                    "translate",
                    str(path),
                    "--from",
                    source,
                    "--to",
                    target,
                    "--json",
                    "-o",
                    str(Path(tmp) / "out.yaml"),
                ]
            )
        )


def _score_launch(
    launch: dict[str, Any], expected: dict[str, Any], targets: list[tuple[str, str]], tally: Tally
) -> None:
    tally.launches += 1
    tally.versions.add(str(launch["version"]))
    for target, version in targets:
        spec = f"{target}@{version}"
        tally.runs += 1
        out = translate(launch, spec)
        if isinstance(out, str):
            tally.add([Failure("failed_runs", launch["id"], spec, "plan translate", "a translation", out)])
            continue
        view = release_view(target, version)
        fails = check_inputs(launch, spec, out) + check_rendered(launch["id"], spec, out, view)
        for intent, want in expectations(expected, launch, target).items():
            if (fail := check_expectation(launch, target, intent, want, out)) is not None:
                fail.target = spec
                fails.append(fail)
        tally.add(fails)


def _score_rules(path: Path, targets: list[tuple[str, str]], tally: Tally) -> None:
    source, era = rule_file_era(path)
    tally.rule_files += 1
    for target, target_version in targets:
        if (target, target_version) == (source, era):
            continue  # written at the release translated to: nothing to translate
        tally.runs += 1
        report = run_alerts(path, f"{source}@{era}" if era else source, f"{target}@{target_version}")
        if isinstance(report, str):
            tally.add([Failure("failed_runs", path.name, target, "alerts translate", "a report", report)])
            continue
        tally.add(dead_series(path, target, target_version, report, release_view(target, target_version)))


def score(
    launches: list[dict[str, Any]],
    expected: dict[str, Any],
    only_engine: str | None = None,
    only_launch: str | None = None,
    rule_files: list[Path] | None = None,
) -> dict[str, Tally]:
    """Every launch to every target (each engine's newest release read) and every rule file likewise."""
    tallies = {e: Tally(e) for e in ENGINES}
    targets = [(name, str(expected["targets"][name]["version"])) for name in ENGINES]
    for launch in launches:
        if (only_engine and launch["engine"] != only_engine) or (only_launch and launch["id"] != only_launch):
            continue
        _score_launch(launch, expected, targets, tallies[launch["engine"]])
    for path in (rule_files if rule_files is not None else alert_files(DATA / "heldout")) if not only_launch else []:
        source, _ = rule_file_era(path)
        if not only_engine or source == only_engine:
            _score_rules(path, targets, tallies[source])
    return tallies


def render(tallies: dict[str, Tally], json_out: bool, set_name: str = "heldout") -> str:
    rows = [t for t in tallies.values() if t.launches or t.rule_files]
    if json_out:
        return json.dumps(
            {
                "set": set_name,
                "engines": [
                    {**{k: v for k, v in asdict(t).items() if k != "versions"}, "versions": sorted(t.versions)}
                    for t in rows
                ],
            },
            indent=2,
        )
    head = f"{'engine':9} {'launches':>8} {'versions':>8} {'rules':>5} {'runs':>5}  " + "  ".join(
        f"{c.replace('_', ' '):>14}" for c in COUNTERS
    )
    title = {
        "heldout": "the second set (held out until its first measurement; its failures were read after it)",
        "dev": "the development set (its failures were read while fixing)",
    }
    lines = [
        f"translation accuracy on {title.get(set_name, set_name)} (bench/data/translate_accuracy/{set_name})",
        head,
        "-" * len(head),
    ]
    for t in rows:
        lines.append(
            f"{t.engine:9} {t.launches:>8} {len(t.versions):>8} {t.rule_files:>5} {t.runs:>5}  "
            + "  ".join(f"{t.counts[c]:>14}" for c in COUNTERS)
        )
    for t in rows:
        for f in t.failures:
            lines.append(f"[{f.counter}] {f.launch} -> {f.target}: {f.what}: expected {f.expected}; got {f.got}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--set",
        choices=("all", *SETS),
        default="all",
        dest="set_name",
        help="which set to score: all (default: both, one table each), dev, or heldout",
    )
    parser.add_argument("--json", action="store_true", help="the tallies and every failure as JSON")
    parser.add_argument("--engine", choices=ENGINES, help="only launches and rule files of this source engine")
    parser.add_argument("--launch", help="only this launch id")
    args = parser.parse_args(argv)
    names = list(SETS) if args.set_name == "all" else [args.set_name]
    failed = False
    outputs = []
    for name in names:
        data = DATA / name
        launches, expected = load(data)
        if args.launch and args.launch not in {x["id"] for x in launches}:
            if len(names) == 1:
                parser.error(f"--launch: no launch {args.launch!r} in {name}/launches.yaml")
            continue
        tallies = score(launches, expected, args.engine, args.launch, alert_files(data))
        outputs.append(render(tallies, args.json, name))
        failed = failed or any(any(t.counts.values()) for t in tallies.values())
    if args.json:
        print("[" + ",\n".join(outputs) + "]" if len(outputs) > 1 else (outputs[0] if outputs else "[]"))
    else:
        print("\n\n".join(outputs))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
