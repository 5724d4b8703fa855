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
- inline comments, like ruff's `# noqa` and ESLint's `eslint-disable-*`, read from the working tree (files
  under the source root only) when the file is there; each names rule ids or names, comma-separated, any case
  (none: every rule), and the text after it is the reason:
  - `# kernlint: ignore[KL401] reason` on the finding's line: the source line it names (its function's `def`
    line, as recorded) or the statement of that function that issued the op (kernlint.rules.statements: the
    line the report names);
  - `# kernlint: ignore-next-line[KL401] reason` on a line of its own: applies to the next line that is neither
    blank nor only a comment (as the same-line form there);
  - `# kernlint: ignore-file[KL401] reason` on a line of its own, anywhere in the file (ruff's file-level
    `# ruff: noqa`): every finding whose source is in that file.
  The first comment that names the finding's rule counts (the line's, then the next-line's, then the file's).
  The comments that suppressed nothing are returned (UnusedIgnore: `--report-unused-ignores`), of the files
  read only: those the findings' sources name; a file no finding names is never read, so never judged.

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
# `# kernlint: ignore`, `# kernlint: ignore[KL401, KL502]`, `# kernlint: ignore-next-line[...]`,
# `# kernlint: ignore-file[...]`, then an optional reason (`ignore-other` is none of them).
_INLINE = re.compile(r"#\s*kernlint:\s*ignore(?P<form>-next-line|-file)?(?![\w-])(?:\[(?P<ids>[^\]]*)\])?"
                     r"(?P<reason>.*)$", re.IGNORECASE)
INLINE_FORMS = ("line", "next-line", "file")
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


@dataclass(frozen=True)
class InlineIgnore:
    """One `# kernlint: ignore...` comment of a source file: `file` as it was read (the root's path where the
    source map resolved it), its 1-based `line`, its `form` (one of INLINE_FORMS), the rule ids or names it
    names (upper case; None: every rule), its reason, and `target`: the line it applies to (its own line for
    `ignore`, the next line of code for `ignore-next-line`, 0 where no line of code follows it, None for
    `ignore-file`: every line)."""

    file: str
    line: int
    form: str
    ids: tuple[str, ...] | None
    reason: str
    target: int | None

    def covers(self, finding: Finding) -> set[str] | None:
        """The ids of this comment that name the finding's rule ({"*"} for a bare comment), None when it does
        not apply to that rule."""
        if self.ids is None:
            return {"*"}
        named = {i for i in self.ids if i in (finding.rule.upper(), finding.name.upper())}
        return named or None


@dataclass(frozen=True)
class UnusedIgnore:
    """An inline ignore comment that suppressed no finding of this check: `ids`, those of its ids that named a
    checked rule and matched nothing (None: a bare comment, which names every rule)."""

    file: str
    line: int
    form: str
    ids: tuple[str, ...] | None

    @property
    def directive(self) -> str:
        """`ignore[KL001]`, `ignore-next-line`, `ignore-file[KL002,KL005]`: the unused part, as written."""
        name = "ignore" if self.form == "line" else f"ignore-{self.form}"
        return name if self.ids is None else f"{name}[{','.join(self.ids)}]"

    def one_line(self) -> str:
        """`path/file.py:12: unused ignore[KL001]`."""
        return f"{self.file}:{self.line}: unused {self.directive}"


def parse_inline_ignores(file: str, lines: Sequence[str]) -> list[InlineIgnore]:
    """The ignore comments of a file's lines. `ignore-next-line` and `ignore-file` count only on a line of
    their own (nothing but the comment); `ignore-next-line` applies to the next line that is neither blank nor
    only a comment (None: none follows)."""
    found = []
    for i, text in enumerate(lines):
        if "kernlint" not in text.lower():
            continue
        m = _INLINE.search(text)
        if not m:
            continue
        form = (m.group("form") or "").lower().lstrip("-") or "line"
        own_line = not text[:m.start()].strip()
        if form != "line" and not own_line:
            continue
        target: int | None = i + 1
        if form == "file":
            target = None
        elif form == "next-line":
            target = next((j + 1 for j in range(i + 1, len(lines))
                           if lines[j].strip() and not lines[j].lstrip().startswith("#")), 0)
        raw = m.group("ids")
        ids = None if raw is None else tuple(dict.fromkeys(x.strip().upper() for x in raw.split(",") if x.strip()))
        found.append(InlineIgnore(file, i + 1, form, ids, m.group("reason").strip(" :-\u2014") or "", target))
    return found


class _FileIgnores:
    """The ignore comments of one file read, by the line they apply to, and which of their ids were used."""

    def __init__(self, ignores: list[InlineIgnore]):
        self.ignores = ignores
        self.by_target: dict[int, list[InlineIgnore]] = {}
        for ignore in ignores:
            if ignore.target is not None:
                self.by_target.setdefault(ignore.target, []).append(ignore)
        self.whole_file = [i for i in ignores if i.target is None]
        self.used: dict[InlineIgnore, set[str]] = {}


class _InlineComments:
    """`# kernlint: ignore...` comments on source lines, read once per file from the working tree: only files
    inside `root` (kernlint.rules.statements.read_source_file: regular files under a size bound), and, given
    `resolve` (a source map's recorded path -> root-relative path), only the files it maps into the root. A
    trace names any path it likes: its own "suppression" in /tmp/x/secret.py is never read. Which comments
    suppressed something is kept, so those that suppressed nothing can be listed (`unused`)."""

    def __init__(self, root: Path, resolve: Callable[[str], str | None] | None = None,
                 statements: SourceStatements | None = None):
        self.root = root
        self._resolve = resolve
        self._mapped: dict[str, str | None] = {}
        self._files: dict[str, _FileIgnores | None] = {}
        # The check's files, read and parsed once for the comments and the statement refinement alike.
        self._statements = statements if statements is not None else SourceStatements(root)

    def suppressing(self, finding: Finding) -> InlineIgnore | None:
        """The comment that suppresses the finding, marked used: on its source line (its function's `def`, as
        recorded) or on the statement of its function that issued the op (kernlint.rules.statements: what the
        report names once the source is refined), written there or as `ignore-next-line` above it; else an
        `ignore-file` of its file. The first that names its rule (or every rule) counts."""
        located = file_and_line(finding.source)
        if located is None:
            return None
        file, def_line = located
        mapped = self._map(file)
        ignores = None if mapped is None else self._read(mapped)
        if ignores is None or not ignores.ignores:
            return None
        lines = [def_line]
        statement = None if not ignores.by_target else self._statements.line_of(
            f"{mapped}:{def_line}", (finding.top_op, finding.launch_op), finding.function)
        if statement is not None and statement != def_line:
            lines.append(statement)
        candidates = [i for n in lines for i in ignores.by_target.get(n, ()) if i.form == "line"]
        candidates += [i for n in lines for i in ignores.by_target.get(n, ()) if i.form == "next-line"]
        for ignore in [*candidates, *ignores.whole_file]:
            named = ignore.covers(finding)
            if named is not None:
                ignores.used.setdefault(ignore, set()).update(named)
                return ignore
        return None

    def unused(self, rules: Sequence) -> list[UnusedIgnore]:
        """The comments of the files read that suppressed nothing, in file and line order. Of a comment naming
        rules, only the ids of the check's `rules` (an id or a name) are judged: one naming a rule this check
        did not run may suppress it in another."""
        checked = {r.id.upper() for r in rules} | {r.name.upper() for r in rules}
        out = []
        for file in sorted(f for f, v in self._files.items() if v is not None):
            ignores = self._files[file]
            for ignore in ignores.ignores:
                used = ignores.used.get(ignore, set())
                if ignore.ids is None:
                    if not used:
                        out.append(UnusedIgnore(file, ignore.line, ignore.form, None))
                    continue
                left = tuple(i for i in ignore.ids if i not in used and i in checked)
                if left:
                    out.append(UnusedIgnore(file, ignore.line, ignore.form, left))
        return out

    def _map(self, file: str) -> str | None:
        if file not in self._mapped:
            self._mapped[file] = file if self._resolve is None else self._resolve(file)
        return self._mapped[file]

    def _read(self, mapped: str) -> _FileIgnores | None:
        if mapped not in self._files:
            lines = self._statements.text_lines(mapped)
            self._files[mapped] = None if lines is None else _FileIgnores(parse_inline_ignores(mapped, lines))
        return self._files[mapped]


def removed_unused_ignores(root: Path, unused: Iterable[UnusedIgnore]) -> list[str]:
    """Take the unused ignores out of their files (`--fix-unused-ignores`), each file rewritten atomically:
    a comment none of whose ids was used goes (its line too, where the comment was all of it), one with some
    used ids keeps those (`ignore[KL001,KL002]` -> `ignore[KL001]`); the code and the other lines stay byte for
    byte. A file is rewritten only when it is still a regular UTF-8 file inside `root` and each line still
    holds its comment (a file edited since the check is left alone). Returns the files rewritten."""
    from kernlint.fileio import write_text_atomically
    from kernlint.rules.statements import read_source_file

    by_file: dict[str, list[UnusedIgnore]] = {}
    for u in unused:
        by_file.setdefault(u.file, []).append(u)
    written = []
    for file, items in sorted(by_file.items()):
        data = read_source_file(root.resolve(), file)
        if data is None:
            continue
        try:
            lines = data.decode("utf-8").splitlines(keepends=True)
        except UnicodeDecodeError:
            continue
        changed = _without_unused(lines, items)
        if changed is None:
            continue
        path = Path(file) if Path(file).is_absolute() else root / file
        try:
            write_text_atomically(path.resolve(), "".join(changed))
        except OSError:
            continue   # not written: left out of what is returned
        written.append(file)
    return written


def _without_unused(lines: list[str], items: Sequence[UnusedIgnore]) -> list[str] | None:
    """The lines less the unused comments; None when a line no longer holds the comment it was read with."""
    out = list(lines)
    for u in items:
        if not 1 <= u.line <= len(out) or out[u.line - 1] is None:
            return None
        text = out[u.line - 1]
        body = text.rstrip("\r\n")
        ending = text[len(body):]
        m = _INLINE.search(body)
        form = None if m is None else ((m.group("form") or "").lower().lstrip("-") or "line")
        if m is None or form != u.form:
            return None
        raw = m.group("ids")
        drop = set() if u.ids is None else set(u.ids)
        kept = [] if raw is None else [x.strip() for x in raw.split(",") if x.strip() and x.strip().upper() not in drop]
        if kept:
            start, end = m.span("ids")
            out[u.line - 1] = body[:start] + ",".join(kept) + body[end:] + ending
            continue
        code = body[:m.start()].rstrip()
        out[u.line - 1] = None if not code else code + ending
    return [line for line in out if line is not None]


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


@dataclass
class Applied:
    """What apply_suppressions does: the reports less the suppressed findings (verdicts recomputed), what was
    suppressed, and the inline ignore comments of the files read that suppressed nothing (UnusedIgnore)."""

    reports: list[TraceReport]
    suppressed: list[Suppressed]
    unused_ignores: list[UnusedIgnore] = field(default_factory=list)


def apply_suppressions(reports: Sequence[TraceReport], rules: Sequence, *, file: SuppressionFile | None = None,
                       per_source: Mapping[str, Sequence[str]] | None = None, root: Path | None = None,
                       inline: bool = True, resolve: Callable[[str], str | None] | None = None,
                       statements: SourceStatements | None = None) -> tuple[list[TraceReport], list[Suppressed]]:
    """The reports with suppressed findings taken out (verdicts recomputed), and what was suppressed
    (suppressions_applied, less the unused ignores)."""
    applied = suppressions_applied(reports, rules, file=file, per_source=per_source, root=root, inline=inline,
                                   resolve=resolve, statements=statements)
    return applied.reports, applied.suppressed


def suppressions_applied(reports: Sequence[TraceReport], rules: Sequence, *, file: SuppressionFile | None = None,
                         per_source: Mapping[str, Sequence[str]] | None = None, root: Path | None = None,
                         inline: bool = True, resolve: Callable[[str], str | None] | None = None,
                         statements: SourceStatements | None = None) -> Applied:
    """The suppressions applied to the reports. Inline comments are read from the files under `root` (default:
    the working directory) that `resolve` (a source map's `path`) maps there, or, without one, that the
    findings name inside it: only the files of the findings' sources, so only their comments can be judged
    unused."""
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
    return Applied(out, suppressed, comments.unused(rules) if comments is not None else [])


def _suppression_of(f: Finding, budget: Counter, key: Callable[[Finding], str], per_source, comments
                    ) -> tuple[str, str | None] | None:
    if comments is not None:
        ignore = comments.suppressing(f)
        if ignore is not None:
            return "inline", ignore.reason or None
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
