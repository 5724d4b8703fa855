"""What a folder search passes over: the entries `--exclude` globs match, and the entries git ignores.

`--exclude GLOB` (config `exclude`): a glob (fnmatch: `*` also crosses `/`) matched against an entry's name, its
path below the folder given on the command line, and its path as given; a folder it matches is not searched.
A file named on the command line is checked whatever the globs say (ruff's default).

.gitignore: when a folder given on the command line is inside a git checkout, what git ignores there
(.gitignore files, .git/info/exclude, the global excludes file; `git ls-files --others --ignored
--exclude-standard --directory`, run once per folder: git's own rules, no parser here) is not searched: a
`.venv/` or a `traces/` that .gitignore names. A folder that git ignores as a whole and that is named on the
command line is searched (it was asked for). Without git, or outside a checkout, nothing is filtered;
`gitignore_status` says which (`kernlint check -v`).
"""
from __future__ import annotations

import fnmatch
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

GIT_TIMEOUT_S = 60


@dataclass
class FolderFilter:
    """What a search of one folder given on the command line passes over."""

    folder: Path
    exclude: Sequence[str] = ()
    ignored: frozenset[str] = field(default_factory=frozenset)   # normalized paths git ignores
    status: str = ""

    def skips(self, path: Path) -> bool:
        key = os.path.normpath(str(path))
        if key in self.ignored:
            return True
        if not self.exclude:
            return False
        rel = os.path.relpath(key, os.path.normpath(str(self.folder))).replace(os.sep, "/")
        names = (path.name, rel, path.as_posix())
        return any(fnmatch.fnmatchcase(name, pattern.rstrip("/")) for pattern in self.exclude for name in names)


def git_ignored(folder: Path) -> tuple[frozenset[str], str]:
    """(the normalized paths below `folder` that git ignores, a sentence saying what applies). git runs only
    where a `.git` (a folder, or a worktree's file) is in `folder` or above it."""
    if not _in_checkout(folder):
        return frozenset(), f"{folder} is not in a git checkout: no .gitignore applies"
    try:
        done = subprocess.run(["git", "-C", str(folder), "ls-files", "--others", "--ignored", "--exclude-standard",
                               "--directory", "-z"], capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except FileNotFoundError:
        return frozenset(), f"git not found: .gitignore not applied to {folder}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return frozenset(), f"git failed ({exc}): .gitignore not applied to {folder}"
    if done.returncode != 0:
        said = os.fsdecode(done.stderr).strip().splitlines()
        if not said or "not a git repository" in said[0]:
            return frozenset(), f"{folder} is not in a git checkout: no .gitignore applies"
        return frozenset(), f"git failed ({said[0]}): .gitignore not applied to {folder}"
    entries = [e for e in os.fsdecode(done.stdout).split("\0") if e]
    if any(os.path.normpath(e) == "." for e in entries):
        return frozenset(), f"{folder} is ignored by git as a whole; searched, as it was named"
    ignored = frozenset(os.path.normpath(os.path.join(str(folder), e)) for e in entries)
    return ignored, f".gitignore applied to {folder}: {len(ignored)} entr{'y' if len(ignored) == 1 else 'ies'} " \
                    "that git ignores not searched"


def _in_checkout(folder: Path) -> bool:
    try:
        here = folder.resolve()
    except (OSError, RuntimeError):
        return False
    return any((p / ".git").exists() for p in (here, *here.parents))


def folder_filter(folder: Path, exclude: Sequence[str] = (), gitignore: bool = True) -> FolderFilter:
    ignored, status = git_ignored(folder) if gitignore else (frozenset(), "--no-respect-gitignore")
    return FolderFilter(folder, tuple(exclude), ignored, status)
