"""A number no float64 holds is bad input (issue 22: `0x` + 256 hex digits was an OverflowError, exit 70)."""

from __future__ import annotations

import pytest

from switchover.alerts.promql import parse
from switchover.errors import BadInput
from tests.alerts.command import run_alerts

HUGE_HEX = "0x" + "f" * 256


def test_a_hexadecimal_number_past_float64_is_bad_input_naming_it() -> None:
    with pytest.raises(BadInput, match=r"number 0xf{18}… \(258 characters\) in a rule's expr is too large"):
        parse(f"vllm:num_requests_waiting > {HUGE_HEX}")
    assert parse("a > 0xFFFFFFFFFFFFFFFF").thresholds == [(">", float(2**64 - 1))]


def test_alerts_translate_exits_2_on_it_with_one_line(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"groups:\n- name: g\n  rules:\n  - alert: A\n    expr: vllm:num_requests_waiting > {HUGE_HEX}\n")
    code, out, err = run_alerts(capsys, "translate", str(rules), "--from", "vllm@0.6.3", "--to", "sglang@0.5.5")
    assert code == 2 and "too large for a float64" in err and "Traceback" not in err + out
    assert "0xffff" in err
