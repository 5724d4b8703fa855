"""Recorded Python paths mapped to the files of the working tree, so that SARIF results, GitHub annotations and
editor links attach to the repository's files.

torch records a frame's file relative to the `sys.path` entry it was imported from (`regressed/x.py` where
the repository has `fixtures/regressed/x.py`), or as an absolute path of the machine that recorded it
(`/workspace/vllm/vllm/model_executor/...`). A recorded path becomes a path of the source root by:
1. the `[path-map]` prefixes (config) or `--path-map FROM=TO`, first match: traces recorded elsewhere;
2. the path itself, when it is a file under the root;
3. the longest suffix of its components that exactly one file of the root ends with: the root's git-tracked
   files, or, only under an explicit `--source-root` that is not a git checkout, its files (a working
   directory that is no checkout, a site-packages, is not searched: a harness's `profile.py` is not
   kernlint's own).
A path none of these resolve is left as recorded.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

_MAX_FILES = 200_000   # a root with more files is not walked further (tracked files are listed by git)


def file_and_line(source: str | None) -> tuple[str, int] | None:
    """(file, line) of a finding's `path/file.py:123`; the last colon splits, so paths with colons survive.
    None when the trace had no stacks or the source is not a file and a line."""
    if not source:
        return None
    file, _, line = source.rpartition(":")
    if not file or not line.isdigit() or int(line) < 1:
        return None
    return file, int(line)


def _repo_files(root: Path) -> tuple[list[str], bool]:
    """The root's files, relative and /-separated: git's tracked files (and True), else a bounded walk."""
    try:
        done = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--full-name", "."], capture_output=True,
                              timeout=20, check=False)
        prefix = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-prefix"], capture_output=True,
                                text=True, timeout=20, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        done = None
    if done is not None and done.returncode == 0:
        names = [n for n in done.stdout.decode("utf-8", "replace").split("\0") if n]
        return [n[len(prefix):] if prefix and n.startswith(prefix) else n for n in names], True
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "node_modules")]
        rel = Path(folder).relative_to(root)
        found += [(rel / f).as_posix() for f in files if f.endswith(".py")]
        if len(found) > _MAX_FILES:
            break
    return found, False


@dataclass
class SourceMap:
    root: Path
    prefixes: list[tuple[str, str]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    by_suffix: bool = True   # rule 3: git-tracked files, or an explicit root's
    _by_name: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _known: set[str] = field(default_factory=set, repr=False)
    _cache: dict[str, str | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._known = set(self.files)
        for f in self.files:
            self._by_name.setdefault(PurePosixPath(f).name, []).append(f)

    def path(self, recorded: str) -> str | None:
        """The root-relative path of a recorded file, or None."""
        if recorded in self._cache:
            return self._cache[recorded]
        found = self._resolve(recorded)
        self._cache[recorded] = found
        return found

    def _resolve(self, recorded: str) -> str | None:
        text = recorded.replace("\\", "/")
        for old, new in self.prefixes:
            if text.startswith(old):
                text = new + text[len(old):]
                break
        candidate = Path(text) if Path(text).is_absolute() else self.root / text
        try:
            rel = candidate.resolve().relative_to(self.root.resolve()).as_posix()
            if rel in self._known:
                return rel
        except (ValueError, OSError):
            pass
        parts = PurePosixPath(text).parts if self.by_suffix else ()
        matches = self._by_name.get(parts[-1], []) if parts else []
        for k in range(len(parts), 0, -1):   # the longest suffix one file ends with
            tail = "/".join(parts[-k:]).lstrip("/")
            hits = [m for m in matches if m == tail or m.endswith("/" + tail)]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                return None   # ambiguous at its most specific: not guessed
        return None

    def source(self, source: str | None) -> str | None:
        """`file.py:LINE` with the file mapped (kept as recorded where it does not resolve)."""
        located = file_and_line(source)
        if located is None:
            return source
        mapped = self.path(located[0])
        return f"{mapped}:{located[1]}" if mapped else source


def source_map(root: Path | None = None, path_map: Mapping[str, str] | Iterable[tuple[str, str]] = ()
               ) -> SourceMap:
    """The map for `root` (default: the git checkout around the working directory, else the directory)."""
    explicit = root is not None
    if root is None:
        try:
            top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                                 timeout=20, check=False)
            root = Path(top.stdout.strip()) if top.returncode == 0 and top.stdout.strip() else Path.cwd()
        except (OSError, subprocess.SubprocessError):
            root = Path.cwd()
    pairs = list(path_map.items()) if isinstance(path_map, Mapping) else list(path_map)
    files, tracked = _repo_files(Path(root))
    return SourceMap(root=Path(root), prefixes=pairs, files=files, by_suffix=tracked or explicit)


def with_mapped_sources(result, mapping: SourceMap):
    """The check result with every finding's source mapped (reports and suppressed findings alike)."""
    def mapped(f):
        new = mapping.source(f.source)
        return f if new == f.source else dataclasses.replace(f, source=new)

    reports = []
    for report in result.reports:
        outcomes = [dataclasses.replace(o, findings=[mapped(f) for f in o.findings]) for o in report.outcomes]
        reports.append(dataclasses.replace(report, outcomes=outcomes))
    return dataclasses.replace(result, reports=reports)
