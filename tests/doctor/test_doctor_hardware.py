"""doctor covers the hardware symptoms of seed 004 §4: each maps to what to check and the switchover command that
measures it."""

from __future__ import annotations

import pytest

from switchover.doctor import SYMPTOMS, diagnose

HARDWARE = {"nccl-hang", "memory-creep", "slower-on-new-gpu", "double-residency"}


@pytest.mark.parametrize(
    ("query", "key", "cause_word", "command"),
    [
        ("NCCL hang", "nccl-hang", "driver", "hw fingerprint"),
        ("server stuck initializing NCCL with TP=2", "nccl-hang", "driver", "hw diff"),
        ("memory creep over hours", "memory-creep", "CUDA contexts", "bench --url"),
        ("GPU memory keeps growing until OOM after a day", "memory-creep", "CUDA contexts", "--duration"),
        ("slower on the new GPU", "slower-on-new-gpu", "attention backend", "hw startlog"),
        ("same model is slower on the new server", "slower-on-new-gpu", "Marlin", "hw startlog"),
        ("double residency on reload", "double-residency", "still resident", "plan canary"),
        ("memory doubled after hot reload of the model", "double-residency", "still resident", "--new-model"),
    ],
)
def test_hardware_symptoms_find_their_cause_and_measuring_command(
    query: str, key: str, cause_word: str, command: str
) -> None:
    best = diagnose(query)[0]
    assert best.symptom.key == key
    first = best.symptom.causes[0]
    assert cause_word in first.cause
    assert any(command in c for c in first.confirm)


def test_tp_over_pcie_and_hardware_diffs_are_named_for_the_interconnect_causes() -> None:
    by_key = {s.key: s for s in SYMPTOMS}
    confirms = [
        c for cause in by_key["nccl-hang"].causes[1:] + by_key["slower-on-new-gpu"].causes[1:2] for c in cause.confirm
    ]
    assert any("plan parallel" in c and "--fingerprint" in c for c in confirms)
    assert any("hw diff" in c for c in by_key["slower-on-new-gpu"].causes[1].confirm)


def test_hardware_symptoms_cite_what_a_user_can_open_and_existing_ones_keep_their_matches() -> None:
    for s in SYMPTOMS:
        if s.key in HARDWARE:
            assert all("https://" in c.source or "docs/" in c.source for c in s.causes), s.key
    assert {s.key for s in SYMPTOMS} >= HARDWARE
    assert diagnose("p99 went up but traffic is the same")[0].symptom.key == "p99-up-qps-flat"
    assert diagnose("out of memory")[0].symptom.key == "concurrency-low-or-oom"
