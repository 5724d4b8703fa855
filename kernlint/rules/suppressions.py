"""Suppressions, the ways ruff and ESLint users know, applied to checked reports before the exit status:

- a bulk file like ESLint's (`kernlint-suppressions.json`): fingerprints with counts, written by
  `check --suppress-all` / `--suppress-rule ID`; a later run reports a fingerprint only beyond its count;
  `--prune-suppressions` drops what no longer occurs. The fingerprints (kernlint.rules.fingerprint) hold no
  step number, pid, rank or absolute path: the file written from one recording silences the same findings
  in the next. A file of version 1 (fingerprints as recorded) is still read and matched by those; kernlint
  rewrites it as version 2 when it writes the file. The file is input (issue 38): only a regular file of at
  most MAX_SUPPRESSIONS_BYTES is read, decoded by msgspec against its schema (counts 1 to 2**53), and anything
  else (not JSON, another shape, nesting too deep, a number out of range) is one ConfigError naming the file;
- `[per-source-ignores]` in the config, like ruff's `per-file-ignores`: a glob of the finding's source path ->
  rule ids (or ALL);
- an inline `# kernlint: ignore[KL401]` comment (several ids comma-separated; none: every rule) on the source
  line a finding names (its function's `def` line, as recorded) or on the statement of that function that
  issued the op (kernlint.rules.statements: the line the report names), read from the working tree when the
  file is there; text after it is the reason.

A suppressed finding leaves its rule's verdict: a rule whose every failing finding is suppressed passes. What
was suppressed, and how, is returned with the reports, so every output can say so.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import msgspec

from kernlint.errors import ConfigError, shorten
from kernlint.fileio import read_user_file
from kernlint.rules.fingerprint import FINGERPRINT_SCHEME, fingerprint_of
from kernlint.rules.result import STATUS_FAILED, STATUS_PASSED, Finding, RuleOutcome, TraceReport
from kernlint.rules.severity import SEVERITY_ORDER
from kernlint.rules.sources import file_and_line
from kernlint.rules.statements import SourceStatements

SUPPRESSIONS_FILE = "kernlint-suppressions.json"
SUPPRESSIONS_VERSION = 2
# The versions read: 1 holds fingerprints of scheme 1 (the texts as recorded), 2 names its scheme.
_READ_VERSIONS = (1, 2)
# `# kernlint: ignore` or `# kernlint: ignore[KL401, KL502]`, then an optional reason.
_INLINE = re.compile(r"#\s*kernlint:\s*ignore(?:\[(?P<ids>[^\]]*)\])?(?P<reason>.*)$", re.IGNORECASE)
HOW = ("file", "per-source", "inline")
# The largest suppressions file read (docs/configuration.md): a real one holds ~150 bytes an entry, so 16 MiB
# is over 100,000 suppressed findings; a larger file is refused before it is read.
MAX_SUPPRESSIONS_BYTES = 16 << 20
_Count = Annotated[int, msgspec.Meta(ge=1, le=1 << 53)]
_Small = Annotated[int, msgspec.Meta(ge=0, le=1 << 20)]


class _Entry(msgspec.Struct):
    rule: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    count: _Count


class _FileSchema(msgspec.Struct, rename={"fingerprint_scheme": "fingerprint-scheme"}):
    version: _Small
    suppressions: dict[str, _Entry]
    fingerprint_scheme: _Small | None = None


class _Version(msgspec.Struct):
    version: object = None


def _read_bounded(path: Path) -> bytes:
    """The file's bytes: a regular file of at most MAX_SUPPRESSIONS_BYTES, else a ConfigError (a FIFO is
    never opened for reading, so never waited on; a huge file is never read)."""
    return read_user_file(path, MAX_SUPPRESSIONS_BYTES, ConfigError, "suppressions file")


@dataclass(frozen=True)
class Suppressed:
    finding: Finding
    how: str                  # one of HOW
    reason: str | None = None


@dataclass
class SuppressionFile:
    """The bulk suppressions: finding fingerprint -> (rule, how many occurrences are suppressed). `scheme`:
    the fingerprint scheme of the keys (1 in a file of version 1)."""

    path: Path
    entries: dict[str, dict] = field(default_factory=dict)
    scheme: int = FINGERPRINT_SCHEME

    def key(self, finding: Finding) -> str:
        """The finding's fingerprint as this file's keys are written."""
        return fingerprint_of(finding, self.scheme)

    def upgraded(self, findings: Iterable[Finding]) -> SuppressionFile:
        """This file with keys of the current scheme: an entry of an older scheme becomes the fingerprints of
        the findings it matches now (its count spread over them in order); one that matches none is dropped,
        as no fingerprint of it can be made."""
        if self.scheme == FINGERPRINT_SCHEME:
            return self
        budget = Counter({k: e["count"] for k, e in self.entries.items()})
        moved: Counter = Counter()
        rule_of: dict[str, str] = {}
        for f in findings:
            old = self.key(f)
            if budget.get(old, 0) > 0:
                budget[old] -= 1
                new = fingerprint_of(f)
                moved[new] += 1
                rule_of[new] = f.rule
        return SuppressionFile(self.path, {k: {"rule": rule_of[k], "count": n} for k, n in moved.items()})

    @classmethod
    def read(cls, path: Path) -> SuppressionFile:
        """The file at `path`, checked against its schema: a ConfigError naming the file otherwise."""
        data = _read_bounded(path)
        expected = (f"expected version {' or '.join(map(str, _READ_VERSIONS))} and a `suppressions` object of "
                    "{\"rule\": ID, \"count\": N > 0}")
        try:
            version = msgspec.json.decode(data, type=_Version).version
            if version not in _READ_VERSIONS or isinstance(version, bool):
                raise ConfigError(path, f"not a kernlint suppressions file ({expected})")
            decoded = msgspec.json.decode(data, type=_FileSchema)
        except msgspec.ValidationError as exc:
            raise ConfigError(path, f"not a kernlint suppressions file ({shorten(str(exc), 200)}; {expected})"
                              ) from None
        except msgspec.DecodeError as exc:
            raise ConfigError(path, f"not a kernlint suppressions file (not JSON: {shorten(str(exc), 200)})") from None
        except RecursionError:
            raise ConfigError(path, "not a kernlint suppressions file: its JSON nests too deeply to read") from None
        scheme = 1 if version == 1 else (FINGERPRINT_SCHEME if decoded.fingerprint_scheme is None
                                             else decoded.fingerprint_scheme)
        if scheme not in (1, FINGERPRINT_SCHEME) or (version == 2 and scheme == 1):
            raise ConfigError(path, f"fingerprint-scheme {scheme!r}: this kernlint reads scheme "
                                    f"{FINGERPRINT_SCHEME} (and version 1 files); written by another kernlint?")
        entries = {key: {"rule": e.rule, "count": e.count} for key, e in decoded.suppressions.items()}
        return cls(path, entries, scheme=scheme)

    def text(self) -> str:
        """The file as kernlint writes it: the current version and scheme (upgrade an older file first)."""
        if self.scheme != FINGERPRINT_SCHEME:
            raise ValueError("a suppressions file of an older fingerprint scheme is written upgraded()")
        ordered = dict(sorted(self.entries.items(), key=lambda kv: (kv[1]["rule"], kv[0])))
        return json.dumps({"version": SUPPRESSIONS_VERSION, "fingerprint-scheme": FINGERPRINT_SCHEME,
                           "suppressions": ordered}, indent=2) + "\n"


def bulk_entries(findings: Iterable[Finding], rules: Iterable[str] | None = None) -> dict[str, dict]:
    """Suppression entries for these findings (those of `rules` only, when given: ids, any case)."""
    wanted = {r.upper() for r in rules} if rules is not None else None
    counts = Counter(f.fingerprint for f in findings if wanted is None or f.rule.upper() in wanted)
    rule_of = {f.fingerprint: f.rule for f in findings}
    return {key: {"rule": rule_of[key], "count": n} for key, n in counts.items()}


def pruned(file: SuppressionFile, findings: Iterable[Finding]) -> SuppressionFile:
    """The entries that still occur, each down to how often it occurs now (keys of the current scheme)."""
    findings = list(findings)
    file = file.upgraded(findings)
    now = Counter(f.fingerprint for f in findings)
    kept = {k: {**e, "count": min(e["count"], now[k])} for k, e in file.entries.items() if now.get(k)}
    return SuppressionFile(file.path, kept)


class _InlineComments:
    """`# kernlint: ignore[...]` on source lines, read once per file from the working tree: only files inside
    `root` (kernlint.rules.statements.read_source_file: regular files under a size bound), and, given
    `resolve` (a source map's recorded path -> root-relative path), only the files it maps into the root. A
    trace names any path it likes: its own "suppression" in /tmp/x/secret.py is never read."""

    def __init__(self, root: Path, resolve: Callable[[str], str | None] | None = None,
                 statements: SourceStatements | None = None):
        self.root = root
        self._resolve = resolve
        self._lines: dict[str, list[str] | None] = {}
        # The check's files, read and parsed once for the comments and the statement refinement alike.
        self._statements = statements if statements is not None else SourceStatements(root)

    def of(self, finding: Finding) -> tuple[set[str] | None, str] | None:
        """The comment on the finding's source line, else on the statement of its function that issued the op
        (kernlint.rules.statements: what the report names once the source is refined)."""
        found = self.at(finding.source)
        if found is not None or not finding.source:
            return found
        located = file_and_line(finding.source)
        if located is None:
            return None
        file, def_line = located
        mapped = file if self._resolve is None else self._resolve(file)
        if mapped is None:
            return None
        line = self._statements.line_of(f"{mapped}:{def_line}", (finding.top_op, finding.launch_op),
                                        finding.function)
        return None if line is None else self.at(f"{file}:{line}")

    def at(self, source: str | None) -> tuple[set[str] | None, str] | None:
        """(the ids the comment names, None for every rule; its reason) on the line `source` (file:line)."""
        located = file_and_line(source)
        if located is None:
            return None
        file, n = located
        lines = self._read(file)
        if lines is None or not 1 <= n <= len(lines):
            return None
        m = _INLINE.search(lines[n - 1])
        if not m:
            return None
        ids = m.group("ids")
        named = None if ids is None else {i.strip().upper() for i in ids.split(",") if i.strip()}
        return named, m.group("reason").strip(" :-—") or ""

    def _read(self, file: str) -> list[str] | None:
        if file not in self._lines:
            mapped = file if self._resolve is None else self._resolve(file)
            self._lines[file] = None if mapped is None else self._statements.text_lines(mapped)
        return self._lines[file]


def check_per_source_ignores(ignores: Mapping[str, Sequence[str]], rules: Sequence, source: str | None,
                             line_of: Callable[[str], int | None]) -> None:
    """A ConfigError (with the glob's line in `source`) for a rule id or name in [per-source-ignores] that names
    no loaded rule."""
    known = {r.id for r in rules} | {r.name for r in rules}
    for glob, ids in ignores.items():
        for rule_id in ids:
            if rule_id.upper() != "ALL" and rule_id.upper() not in known and rule_id.lower() not in known:
                raise ConfigError(source, f"[per-source-ignores] {glob}: no rule {rule_id!r} (known: "
                                          f"{', '.join(sorted(r.id for r in rules))})", line_of(glob))


def _per_source(ignores: Mapping[str, Sequence[str]], finding: Finding) -> str | None:
    """The glob of `ignores` that silences this finding's rule at its source, if any."""
    if not finding.source:
        return None
    path = finding.source.rpartition(":")[0] or finding.source
    for glob, ids in ignores.items():
        if fnmatch.fnmatchcase(path, glob) or fnmatch.fnmatchcase(path, f"*/{glob}"):
            if any(i.upper() == "ALL" or i.upper() == finding.rule.upper() or i.lower() == finding.name
                   for i in ids):
                return glob
    return None


def _verdict(outcome: RuleOutcome, kept: list[Finding], floors: Mapping[str, int]) -> RuleOutcome:
    if outcome.status != STATUS_FAILED:
        return dataclasses.replace(outcome, findings=kept)
    floor = floors.get(outcome.rule, SEVERITY_ORDER.get(outcome.severity, 0))
    failing = any(SEVERITY_ORDER[f.severity] >= floor for f in kept)
    return dataclasses.replace(outcome, findings=kept, status=STATUS_FAILED if failing else STATUS_PASSED)


def apply_suppressions(reports: Sequence[TraceReport], rules: Sequence, *, file: SuppressionFile | None = None,
                       per_source: Mapping[str, Sequence[str]] | None = None, root: Path | None = None,
                       inline: bool = True, resolve: Callable[[str], str | None] | None = None,
                       statements: SourceStatements | None = None) -> tuple[list[TraceReport], list[Suppressed]]:
    """The reports with suppressed findings taken out (verdicts recomputed), and what was suppressed. Inline
    comments are read from the files under `root` (default: the working directory) that `resolve` (a source
    map's `path`) maps there, or, without one, that the findings name inside it."""
    floors = {}
    for r in rules:
        floor = SEVERITY_ORDER[r.severity]
        scope = getattr(r.spec, "scope", None)
        if scope is not None and scope.window:
            floor = min(floor, SEVERITY_ORDER[scope.window_severity])
        floors[r.id] = floor
    budget = Counter({k: e["count"] for k, e in (file.entries.items() if file else ())})
    key = file.key if file else fingerprint_of
    comments = _InlineComments(root or Path.cwd(), resolve, statements) if inline else None
    suppressed: list[Suppressed] = []
    out = []
    for report in reports:
        outcomes = []
        for o in report.outcomes:
            kept = []
            for f in o.findings:
                hit = _suppression_of(f, budget, key, per_source or {}, comments)
                if hit is None:
                    kept.append(f)
                else:
                    suppressed.append(Suppressed(f, *hit))
            outcomes.append(_verdict(o, kept, floors) if len(kept) != len(o.findings) else o)
        out.append(dataclasses.replace(report, outcomes=outcomes))
    return out, suppressed


def _suppression_of(f: Finding, budget: Counter, key: Callable[[Finding], str], per_source, comments
                    ) -> tuple[str, str | None] | None:
    if comments is not None:
        found = comments.of(f)
        if found is not None:
            named, reason = found
            if named is None or f.rule.upper() in named or f.name.upper() in named:
                return "inline", reason or None
    glob = _per_source(per_source, f)
    if glob is not None:
        return "per-source", f"[per-source-ignores] {glob}"
    fingerprint = key(f) if budget else ""
    if budget.get(fingerprint, 0) > 0:
        budget[fingerprint] -= 1
        return "file", None
    return None


def suppression_counts(suppressed: Iterable[Suppressed]) -> dict[str, int]:
    """How many findings each kind of suppression took out (kinds with none left out)."""
    counts = Counter(s.how for s in suppressed)
    return {how: counts[how] for how in HOW if counts[how]}
