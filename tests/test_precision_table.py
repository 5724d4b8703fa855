"""docs/precision.md stays true: every finding on the real traces in fixtures/external is judged in
fixtures/precision/external-judgments.toml, each judgment's count is what kernlint finds, and the table is
the one the judgments give."""
from __future__ import annotations

from conftest import REPO
from kernlint.checkout import import_path

precision_table = import_path(REPO / "scripts" / "precision_table.py", "precision_table")


def test_every_finding_on_the_real_traces_is_judged_once_and_the_table_is_current():
    findings, entries = precision_table.current_findings(), precision_table.judgments()
    assert {e["judged"] for e in entries} <= set(precision_table.VERDICTS)
    hits, unmatched = precision_table.match(findings, entries)
    assert not unmatched, [(f.rule, f.trace, f.message, len(where)) for f, where in unmatched]
    wrong_counts = [(e["rule"], e["message"], e["count"], len(hits[i])) for i, e in enumerate(entries)
                    if len(hits[i]) != e["count"]]
    assert not wrong_counts, wrong_counts
    doc = precision_table.DOC.read_text()
    start = doc.index(precision_table.BEGIN) + len(precision_table.BEGIN)
    assert doc[start:doc.index(precision_table.END)].strip() == precision_table.table(findings, entries).strip()
