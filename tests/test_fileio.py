"""Outputs are written whole or not at all."""
from __future__ import annotations

import pytest

from kernlint.fileio import write_text_atomically


def test_write_replaces_the_target_whole(tmp_path):
    target = tmp_path / "deep" / "report.json"
    write_text_atomically(target, "first")
    write_text_atomically(target, "second")
    assert target.read_text() == "second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomically(target, "bad \ud800 surrogate")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
