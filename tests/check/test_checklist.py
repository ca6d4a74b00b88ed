"""The checklist data: every item has a rule, a stable meaningful id explained in docs/checklist.md, and sources a
user can open (an engine's source at a release, docs, or the project's own doc); old ids still read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from switchover.check.judging import Judgement, item, load_checklist
from switchover.check.rules import RULES
from switchover.evidence.check import LEGACY_IDS, CheckItem

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "checklist.md").read_text(encoding="utf-8")
# an engine's source at a release tag (vX.Y.Z, llama.cpp bNNNN), or a web page of docs
AT_RELEASE = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/blob/(v\d+\.\d+\.\d+|b\d+)/\S+$")


def test_every_checklist_item_has_a_rule_and_sources() -> None:
    items = load_checklist()
    assert [i.id for i in items] == list(RULES)
    for i in items:
        assert re.fullmatch(r"(engine|model|rollout)\.[a-z_]+", i.id), i.id
        assert i.rule and i.parts and i.sources, i.id


def test_each_source_is_a_release_url_docs_page_or_a_project_doc_that_exists() -> None:
    for i in load_checklist():
        for c in i.sources:
            if c.url.startswith("https://github.com/"):
                assert AT_RELEASE.match(c.url), (i.id, c.url)
            elif c.url.startswith("https://"):
                continue  # a docs page (Kubernetes)
            else:
                assert re.fullmatch(r"docs/[\w-]+\.md(#[\w.-]+)?", c.url), (i.id, c.url)
                assert (ROOT / c.url.split("#")[0]).is_file(), c.url


def test_docs_checklist_explains_every_item_under_its_id_with_its_sources() -> None:
    items = load_checklist()
    anchors = re.findall(r'<a id="([\w.]+)"></a>', DOC)
    assert anchors == [i.id for i in items]
    sections = re.split(r'<a id="[\w.]+"></a>', DOC)[1:]
    for i, text in zip(items, sections, strict=True):
        for word in ("What it checks", "Why it matters", "How it is measured"):
            assert word in text, (i.id, word)
        for c in i.sources:
            assert c.url in text, (i.id, c.url)


def test_the_engine_and_model_areas_are_complete() -> None:
    ids = {i.id for i in load_checklist()}
    engine = ("scheduling", "kv_cache", "batching", "kernels", "defaults", "observability")
    assert {f"engine.{a}" for a in engine} <= ids
    assert {f"model.{a}" for a in ("weights", "tokenizer", "chat_template", "sampling_defaults")} <= ids
    assert {"rollout.grace", "rollout.client_timeout", "rollout.rollback"} <= ids


def test_every_old_id_maps_to_an_item_of_today() -> None:
    # items added after the rename (rollout.warmup_tail, engine.binding_cap, engine.oom_rate) have no old id
    assert set(LEGACY_IDS.values()) <= {i.id for i in load_checklist()}


@pytest.mark.parametrize("old", sorted(LEGACY_IDS))
def test_an_item_saved_under_its_old_id_reads_as_todays_with_its_doc(old: str) -> None:
    saved = {
        "id": old,
        "area": "engine",
        "title": "t",
        "title_zh": "请求调度",
        "source": "seed 000 §1 table, row 1",
        "quote": "请求调度｜排队顺序",
        "verdict": "go",
        "rule": "r",
        "reason": "ok",
    }
    i = CheckItem.model_validate(saved)
    assert i.id == LEGACY_IDS[old] and i.doc == f"docs/checklist.md#{LEGACY_IDS[old]}"
    assert "请求" not in i.model_dump_json() and "seed" not in i.model_dump_json()


def test_a_waiver_written_with_an_old_id_still_waives_the_item() -> None:
    entry = next(e for e in load_checklist() if e.id == "rollout.rollback")
    assert item(entry, Judgement(), {"s000.rollback": "no drill in CI"}).waived == "no drill in CI"
    assert item(entry, Judgement(), {"rollout.rollback": "no drill in CI"}).waived == "no drill in CI"
    assert item(entry, Judgement(), {}).waived is None
