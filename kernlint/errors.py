"""Typed errors. Analysis code raises these; only the CLI turns them into one line and an exit code."""
from __future__ import annotations

from enum import IntEnum
from pathlib import Path

# The longest a problem, a name or a message is shown: a 1 MB value from a hostile file is never echoed whole
# (real kernel names, long C++ templates included, stay under 2,000 characters).
MAX_SHOWN_CHARS = 2000


def shorten(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """`text` cut to `limit` characters with a marker saying how much was left out."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


class ExitCode(IntEnum):
    """kernlint's exit codes, the one place they are defined (README "Exit codes"). A signal that stops kernlint
    while it runs processes of its own exits 128 + signo, as a shell would (kernlint.fileio.TerminatedError)."""

    CLEAN = 0        # no finding at or above --fail-on, everything checked
    FINDINGS = 1     # findings at or above --fail-on (an audit: a workload without its expected verdict)
    ERROR = 2        # a user error: one line on stderr naming the file and the problem
    INTERNAL = 3     # kernlint's own bug: one line, --debug for the traceback
    INCOMPLETE = 4   # nothing failed, but something could not be fully checked


class KernlintError(Exception):
    """Base of every error a user can cause. `str()` is the one line the CLI prints."""

    exit_code: int = ExitCode.ERROR

    def __init__(self, path: str | Path | None, problem: str, line: int | None = None):
        self.path = None if path is None else str(path)
        self.problem = shorten(problem, 2 * MAX_SHOWN_CHARS)
        self.line = line
        super().__init__(self.one_line())

    def one_line(self) -> str:
        if self.path is None:
            return self.problem
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.problem}"


class TraceError(KernlintError):
    """A trace file (or folder) that cannot be read as a torch.profiler Chrome trace."""


class RuleFileError(KernlintError):
    """A rule file that does not parse or does not follow the rule schema."""


class ConfigError(KernlintError):
    """A bad command-line value or option combination (selection, output path, baseline)."""


class MissingExtraError(KernlintError):
    """A command or API call that needs an optional dependency (an extra, e.g. torch for capturing) that is
    not installed. Its line names the extra to install."""


class WorkloadError(KernlintError):
    """A workload (built-in, regressed or the user's) that failed while it was built or profiled, or a rank
    process that failed or hung: no trace, so no verdict. The original exception is its __cause__."""


class BaselineError(KernlintError):
    """A baseline file that cannot be read, is not a kernlint baseline, or has another schema version."""


class PluginError(ConfigError):
    """Another package's plugin (an entry point of a kernlint registry: a check kind, format, parallel backend
    or workload) that failed or broke its contract. Its line names the plugin's entry point and module, so
    that the user knows what to update or uninstall; kernlint itself is not at fault (exit 2, not 3)."""
