"""Durable state (atomic state file, append-only audit log) and the line-level gateway edit."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from switchover.config.rollout import RolloutSettings
from switchover.errors import BadInput
from switchover.rollout import stages as sm
from switchover.rollout.driver import apply_to_gateway, set_gateway_fields
from switchover.rollout.store import RolloutStore, actor


def test_state_round_trips_and_audit_lines_append(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "r")
    assert store.load() is None and store.audit() == []
    s = sm.initial_state(RolloutSettings().stages)
    s, tr = sm.advance(s, now=1.0, who="a@h", why="first")
    store.save(s)
    store.append(tr)
    s, tr2 = sm.advance(s, now=2.0, who="b@h", why="second")
    store.save(s)
    store.append(tr2)
    assert store.load() == s
    assert [t.why for t in store.audit()] == ["first", "second"]
    assert len(store.audit_path.read_text().splitlines()) == 2
    assert not list(store.folder.glob(".*.tmp"))  # the temporary file was renamed away


def test_a_corrupt_state_file_is_a_clear_error(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path)
    store.state_path.write_text('{"index": "x"}')
    with pytest.raises(BadInput, match="not a rollout state file"):
        store.load()
    for index in (5, -2):  # a stage that is not there is refused when read, not an IndexError later
        store.state_path.write_text(f'{{"stages": [{{"name": "5%", "weight": 5}}], "index": {index}}}')
        with pytest.raises(BadInput, match="not a rollout state file"):
            store.load()
    # holding with no window at all (edited by hand) is refused when read, not a crash when judged
    store.state_path.write_text(
        '{"stages": [{"name": "100%", "weight": 100}], "index": 0, "status": "holding", '
        '"holding": {"started_at": 1, "windows": {}}}'
    )
    with pytest.raises(BadInput, match="not a rollout state file"):
        store.load()
    store.state_path.write_text(
        '{"stages": [{"name": "100%", "weight": 100}], "index": 0, "status": "holding", '
        '"holding": {"started_at": 1, "windows": {"crash": {"ends_at": NaN}}}}'
    )
    with pytest.raises(BadInput, match="not a rollout state file"):
        store.load()


def test_actor_is_user_at_host_or_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWITCHOVER_ACTOR", raising=False)
    assert "@" in actor()
    monkeypatch.setenv("SWITCHOVER_ACTOR", "ci-job-7")
    assert actor() == "ci-job-7"


DOC = """\
# top comment
old: {url: http://a, engine: vllm}
gateway:
  # weight is the percent of tenants on new
  weight: 5   # keep this comment
  shadow:
    percent: 10
    weight: 99   # nested key of the same name must not be touched
  run_dir: gw
rollout:
  stages: [shadow, 5]
"""


def test_line_edit_changes_only_weight_and_keeps_comments() -> None:
    out = set_gateway_fields(DOC, {"weight": 20})
    assert "  weight: 20   # keep this comment\n" in out
    assert "    weight: 99   # nested key" in out
    assert out.replace("weight: 20", "weight: 5") == DOC
    assert yaml.safe_load(out)["gateway"]["shadow"]["weight"] == 99


def test_missing_keys_are_inserted_under_gateway() -> None:
    out = set_gateway_fields(DOC, {"rollback": True})
    data = yaml.safe_load(out)
    assert data["gateway"]["rollback"] is True and data["gateway"]["weight"] == 5
    assert out.count("\n") == DOC.count("\n") + 1


def test_crlf_files_keep_their_line_endings() -> None:
    doc = "gateway:\r\n  weight: 0\r\n"
    assert set_gateway_fields(doc, {"weight": 50, "rollback": False}) == (
        "gateway:\r\n  rollback: false\r\n  weight: 50\r\n"
    )


@pytest.mark.parametrize(
    ("doc", "message"), [("old: {}\n", "no `gateway:` section"), ("gateway: {weight: 5}\n", "inline")]
)
def test_files_the_line_edit_cannot_handle_are_refused(doc: str, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        set_gateway_fields(doc, {"weight": 1})


def test_apply_to_gateway_rewrites_the_file_and_validates_weight(tmp_path: Path) -> None:
    p = tmp_path / "switchover.yaml"
    p.write_text(DOC)
    apply_to_gateway(p, weight=50, rollback=True)
    gw = yaml.safe_load(p.read_text())["gateway"]
    assert gw["weight"] == 50 and gw["rollback"] is True
    assert "# keep this comment" in p.read_text()
    with pytest.raises(BadInput, match=r"0\.\.100"):
        apply_to_gateway(p, weight=101, rollback=False)


def test_a_time_no_calendar_holds_is_printed_not_an_overflow() -> None:
    from switchover.cli.rollout_render import when as _when

    assert _when(None) == "-" and _when(0.0) == "-" and _when(86400.0) == "1970-01-02 00:00:00 UTC"
    assert _when(1e308) == "1e+308 s after the epoch"


def test_state_files_behind_a_device_are_refused_not_read_without_end(tmp_path: Path) -> None:
    """state.json, audit.jsonl and the folder's JSON models are read with a bound: /dev/zero is one clear error."""
    store = RolloutStore(tmp_path)
    assert store.load() is None and store.audit() == [] and store.read_model("baseline.json", RolloutSettings) is None
    for name in ("state.json", "audit.jsonl", "baseline.json"):
        (tmp_path / name).symlink_to("/dev/zero")
    with pytest.raises(BadInput, match="larger than"):
        store.load()
    with pytest.raises(BadInput, match="larger than"):
        store.audit()
    with pytest.raises(BadInput, match="larger than"):
        store.read_model("baseline.json", RolloutSettings)
