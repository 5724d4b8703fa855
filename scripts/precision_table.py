"""The precision table of docs/precision.md: kernlint's findings on the real traces in fixtures/external,
per rule, with how many fixtures/precision/external-judgments.toml judges worth acting on.

    python scripts/precision_table.py            # print the table
    python scripts/precision_table.py --write    # and put it into docs/precision.md between its markers
"""
from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXTERNAL = REPO / "fixtures" / "external"
JUDGMENTS = REPO / "fixtures" / "precision" / "external-judgments.toml"
DOC = REPO / "docs" / "precision.md"
BEGIN, END = "<!-- precision-table:begin -->", "<!-- precision-table:end -->"
VERDICTS = ("true", "noise", "wrong")


def judgments() -> list[dict]:
    return tomllib.loads(JUDGMENTS.read_text())["judged"]


def match(findings, entries) -> tuple[dict[int, list], list]:
    """{entry index: findings it matches}, and the findings matching no entry or several."""
    hits: dict[int, list] = {i: [] for i in range(len(entries))}
    unmatched = []
    for f in findings:
        where = [i for i, e in enumerate(entries) if e["rule"] == f.rule and e["trace"] in f.trace
                 and re.search(e["message"], f.message)]
        if len(where) == 1:
            hits[where[0]].append(f)
        else:
            unmatched.append((f, where))
    return hits, unmatched


def table(findings, entries) -> str:
    """Per rule: the findings at warning or error (what fails a gate) and how many of them are worth acting on;
    the findings at info (negligible by cost, or in context) and how many of those a judge calls true."""
    hits, _ = match(findings, entries)
    gate: dict[str, Counter] = {}
    info: dict[str, Counter] = {}
    for i, e in enumerate(entries):
        for f in hits[i]:
            (info if f.severity == "info" else gate).setdefault(e["rule"], Counter())[e["judged"]] += 1
    groups = {(f.trace, f.group) for f in findings if f.group and f.severity != "info"}
    problems = len(groups) + sum(1 for f in findings if not f.group and f.severity != "info")
    lines = ["| rule | at warning/error | true (act on it) | noise | wrong | precision | at info | true at info |",
             "|---|---|---|---|---|---|---|---|"]
    total, total_info = Counter(), Counter()
    for rule in sorted(set(gate) | set(info)):
        c, d = gate.get(rule, Counter()), info.get(rule, Counter())
        n, m = sum(c.values()), sum(d.values())
        total.update(c)
        total_info.update(d)
        precision = f"{100 * c['true'] / n:.0f}%" if n else "-"
        lines.append(f"| {rule} | {n} | {c['true']} | {c['noise']} | {c['wrong']} | {precision} | {m} | {d['true']} |")
    n, m = sum(total.values()), sum(total_info.values())
    lines.append(f"| all | {n} | {total['true']} | {total['noise']} | {total['wrong']} | "
                 f"{100 * total['true'] / n:.0f}% | {m} | {total_info['true']} |")
    lines.append("")
    traces = len({f.trace for f in findings})
    lines.append(f"{n + m} findings on {traces} of the traces, {n} at warning or error; {problems} problems to act on "
                 "once findings on one event are grouped and findings at info are set aside.")
    return "\n".join(lines)


def current_findings():
    from kernlint.api import check

    return check(str(EXTERNAL)).findings


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    findings, entries = current_findings(), judgments()
    _, unmatched = match(findings, entries)
    for f, where in unmatched:
        print(f"unjudged ({len(where)} entries match): {f.rule} {f.trace}: {f.message}", file=sys.stderr)
    text = table(findings, entries)
    print(text)
    if args.write:
        doc = DOC.read_text()
        start, stop = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        DOC.write_text(doc[:start] + "\n" + text + "\n" + doc[stop:])
    return 1 if unmatched else 0


if __name__ == "__main__":
    sys.exit(main())
