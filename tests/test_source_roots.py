"""Issue 37, item 6c: a recorded path is mapped by its last components only to a git-tracked file, or to a
unique match under an explicit `--source-root`; a working directory that is no checkout (a site-packages)
is not searched, so a harness's `moca/library/profiling/profile.py` is not kernlint's `baseline/profile.py`."""
from __future__ import annotations

from kernlint.rules.sources import source_map

RECORDED = "/opt/moca/library/profiling/profile.py:34"


def _tree(tmp_path):
    root = tmp_path / "site-packages"
    (root / "kernlint" / "baseline").mkdir(parents=True)
    (root / "kernlint" / "baseline" / "profile.py").write_text("\n" * 40)
    return root


def test_a_working_directory_that_is_no_checkout_is_not_searched_by_suffix(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    monkeypatch.chdir(root)
    mapping = source_map()
    assert mapping.source(RECORDED) == RECORDED
    assert mapping.source("kernlint/baseline/profile.py:3") == "kernlint/baseline/profile.py:3"   # a file of it


def test_an_explicit_source_root_maps_a_unique_suffix(tmp_path):
    root = _tree(tmp_path)
    assert source_map(root).source(RECORDED) == "kernlint/baseline/profile.py:34"
