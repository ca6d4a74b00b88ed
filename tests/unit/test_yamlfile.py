"""The user-YAML loader refuses what PyYAML's safe loader does not: recursion, alias bombs, deep nesting,
non-scalar keys and oversized documents, each with a line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchover import yamlfile
from switchover.errors import BadInput

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefg", "bcdefgh", strict=True)
)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("old: &a [*a]\n", ("line 1, column 6", "recursive alias")),
        ("a: &x {b: *x}\n", ("line 1", "recursive alias")),
        ("? [a, b]\n: 1\n", ("line 1, column 3", "key must be a plain value, got a list")),
        ("old: {? {a: 1} : 2}\n", ("line 1, column 9", "got a mapping")),
        (BOMB, ("line 1", "expand to more than")),
        ("[" * 5000 + "]" * 5000, ("line 1, column 65", "nested more than 64")),
        ("a: 1\n---\nb: 2\n", ("2 YAML documents",)),
        ("a: [1, 2\n", ("not valid YAML", "line 2")),
        ("a: !!int abc\n", ("line 1, column 4", "cannot read value")),
    ],
)
def test_refusals_name_line_and_column(text: str, words: tuple[str, ...]) -> None:
    with pytest.raises(BadInput) as exc:
        yamlfile.load_document(text, "f.yaml")
    for w in words:
        assert w in exc.value.message, exc.value.message


def test_shared_aliases_that_stay_small_load_and_positions_are_kept() -> None:
    doc = yamlfile.load_document("base: &b {x: 1}\nold: *b\nnew:\n  y: [1, 2]\n", "f.yaml")
    assert doc.data == {"base": {"x": 1}, "old": {"x": 1}, "new": {"y": [1, 2]}}
    assert doc.line_of(("new", "y", 1)) == 4 and doc.line_of(("new", "missing")) == 3


def test_oversized_binary_directories_and_missing_files_are_bad_input(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("# x\n" * 300_000)
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00" * 10)
    for path, word in (
        (big, "larger than"),
        (tmp_path / "bin.yaml", "not UTF-8"),
        (tmp_path, "is a directory"),
        (tmp_path / "nope.yaml", "no such file"),
    ):
        with pytest.raises(BadInput, match=word):
            yamlfile.load_file(path)


def test_checked_nodes_refuses_a_cycle_before_a_scanner_walks_it() -> None:
    with pytest.raises(BadInput, match="recursive alias"):
        list(yamlfile.checked_nodes("spec: &s {containers: [*s]}\n", "deploy.yaml"))
    assert len(list(yamlfile.checked_nodes("a: 1\n---\nb: 2\n", "d.yaml"))) == 2
