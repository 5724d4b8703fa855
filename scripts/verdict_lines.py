#!/usr/bin/env python3
"""One line per trace of a `kernlint check --format json` report: the rules that failed (with their finding
counts and severities) and those left incomplete. For recording sessions and case files."""
from __future__ import annotations

import collections
import json
import sys


def main(path: str) -> int:
    report = json.load(open(path))
    severities = collections.defaultdict(set)
    for f in report["findings"]:
        severities[(f["trace"], f["rule"])].add(f["severity"])
    for trace in sorted(report["traces"], key=lambda t: t["path"]):
        failed = [f"{r['rule']}({r['findings']} {'/'.join(sorted(severities[(trace['path'], r['rule'])]))})"
                  for r in trace["rules"] if r["status"] == "failed"]
        incomplete = [r["rule"] for r in trace["rules"] if r["status"] == "incomplete"]
        name = trace["path"].rsplit("/", 1)[-1].replace(".pt.trace.json.gz", "")
        print(f"{name}: failed {' '.join(failed) or 'none'}" + (f"; incomplete {incomplete}" if incomplete else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
