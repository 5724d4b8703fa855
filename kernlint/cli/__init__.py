"""The command line. The only layer that prints.

Exit codes:
  0  no finding at or above --fail-on (default: warning), and everything was fully checked; or --exit-zero
  1  findings at or above --fail-on
  2  usage error, unreadable or malformed trace, bad rule file, bad option value, a malformed
     kernlint-suppressions.json, a plugin (another package's entry point) that failed to load, raised or
     broke its contract (the line names its entry point and module): one line on stderr
  3  internal error (a bug in kernlint; rerun with --debug for the traceback)
  4  no finding at or above --fail-on, but something could not be fully checked: a rule verdict is
     incomplete (damaged events in a trace) or a folder held entries that could not be read (no
     permission, dangling link, FIFO, bad gzip); the report says what. --allow-incomplete makes it 0.

Every error a user can cause, click's usage errors included, is exactly one line on stderr:
`kernlint: error: <what is wrong>`. Warnings (an unknown key in a config file) are `kernlint: warning: ...`
lines on stderr, so they never mix with a report on stdout.

Option defaults come from the config file (kernlint.toml or pyproject.toml's [tool.kernlint], found from the
working directory upward; --config FILE, --isolated): see `ConfiguredCommand` (options.py) and docs/configuration.md.
The options of the check commands are shared decorators (`check_options` and its parts, in options.py), and
reach the command body as one `CheckOptions`, so that an option added to them reaches every check command.

A module per command (check.py: `check` and `report`; rules.py: `rules` and `explain`; run.py; audit.py;
history.py; baseline.py), each registering its commands on the group (`app.main`) when imported here;
`@guarded` (app.py) turns a command's errors into its one line and exit code. A new command is one module
and its line in COMMAND_MODULES.
"""
from __future__ import annotations

import importlib

from kernlint.cli.app import main

# The modules that register the commands on `main`, in the order `kernlint --help` lists them.
COMMAND_MODULES = ("check", "rules", "run", "audit", "history", "baseline")
for _module in COMMAND_MODULES:
    importlib.import_module(f"kernlint.cli.{_module}")

__all__ = ["COMMAND_MODULES", "main"]
