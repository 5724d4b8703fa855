"""docs/rules/KLnnn.md: each shipped rule's page (what `kernlint explain ID` prints), which SARIF's helpUri
links to. `--write` regenerates them; without it, exit 1 naming the pages that are not current (a test runs
that).

    python scripts/rule_docs.py [--write]
"""
from __future__ import annotations

import sys
from pathlib import Path

from kernlint.rules.docs import RULE_PAGES, rule_markdown
from kernlint.rules.loader import load_rules

ROOT = Path(__file__).resolve().parents[1]


def pages() -> dict[Path, str]:
    return {ROOT / RULE_PAGES / f"{rule.id}.md": rule_markdown(rule) for rule in load_rules()}


def main(argv: list[str]) -> int:
    wanted = pages()
    folder = ROOT / RULE_PAGES
    if "--write" in argv:
        folder.mkdir(parents=True, exist_ok=True)
        for path in folder.glob("KL*.md"):
            if path not in wanted:
                path.unlink()
        for path, text in wanted.items():
            path.write_text(text, encoding="utf-8")
        return 0
    stale = [p for p, text in wanted.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    stale += [p for p in folder.glob("KL*.md") if p not in wanted]
    for path in stale:
        print(f"{path.relative_to(ROOT)}: not current (python scripts/rule_docs.py --write)")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
