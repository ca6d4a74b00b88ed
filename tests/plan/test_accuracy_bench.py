"""bench/plan_accuracy.py's own checks on its points (the figures it prints are only as good as the points)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "plan_accuracy.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_accuracy_under_test", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _point(util: float, kv: float) -> dict[str, object]:
    # llm-d's Llama-3.1-8B H100 row: 14.99 + 4.76 + 0.13 + 51.38 = 71.26 GiB = 0.9 x 79.18
    return {
        "id": "x",
        "engine": "vllm",
        "gpu": "H100-80G",
        "flags": {"memory_fraction": util},
        "logged": {"weights_gib": 14.99, "activation_gib": 4.76, "non_torch_gib": 0.13, "kv_gib": kv},
    }


def test_a_point_whose_logged_parts_add_up_to_its_flag_is_consistent(bench: ModuleType) -> None:
    assert bench.logged_fraction(_point(0.9, 51.38)) == pytest.approx(0.9, abs=0.001)
    assert bench.consistency_note(_point(0.9, 51.38)) is None


def test_a_point_whose_logged_parts_disagree_with_its_flag_is_flagged(bench: ModuleType) -> None:
    note = bench.consistency_note(_point(0.9, 51.38 + 0.05 * 79.18))
    assert note is not None and "0.950" in note and "memory_fraction 0.9" in note


def test_a_point_without_the_breakdown_is_not_judged(bench: ModuleType) -> None:
    point = _point(0.9, 51.38)
    del point["logged"]["activation_gib"]  # type: ignore[attr-defined]
    assert bench.logged_fraction(point) is None and bench.consistency_note(point) is None


def test_the_dense_figure_counts_only_dense_evaluation_points_of_claimed_versions(bench: ModuleType) -> None:
    def row(pid: str, cls: str, blind: float, version: str = "0.11.0", kind: str = "evaluation") -> object:
        return bench.Row(
            id=pid,
            set=kind,
            engine="vllm",
            version=version,
            cls=cls,
            unit="tokens",
            logged=100.0,
            logged_starts=True,
            blind=blind,
        )

    rows = [
        row("a", "dense-16bit", 101.0),
        row("b", "dense-quant", 90.0),
        row("c", "moe-quant", 150.0),
        row("d", "dense-16bit", 200.0, version="0.6.6"),
        row("e", "dense-16bit", 300.0, kind="calibration"),
    ]
    assert bench.dense_set(rows).endswith("blind median 5.5%, max 10.0% over 2 points")
    assert "no blind point" in bench.dense_set(rows[2:])


def test_a_point_without_the_flag_is_judged_against_its_versions_default_from_the_profile(bench: ModuleType) -> None:
    """No memory_fraction flag: the vLLM profile's default for the point's version (0.9 before 0.19, 0.92 in
    the 0.32/0.33 band), not a figure written in the bench."""
    old, new = _point(0.9, 51.38), _point(0.9, 51.38 + 0.02 * 79.18)
    for point, version in ((old, "0.11.0"), (new, "0.33.0")):
        del point["flags"]["memory_fraction"]  # type: ignore[attr-defined]
        point["version"] = version
        assert bench.consistency_note(point) is None, version
    old["version"] = "0.33.0"
    assert "memory_fraction 0.92" in (bench.consistency_note(old) or "")
