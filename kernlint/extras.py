"""The optional parts of kernlint (extras) and the check, made before any import, that one is installed.

The core install checks traces, renders reports and records baselines from traces. Capturing needs torch:
`pip install 'kernlint[capture]'`. A command that captures calls `require_capture` first, so that a missing
torch is one line naming the extra (exit 2), never an ImportError from deep inside. The Python API's
DataFrame of a trace (`EventTable.frame`) needs pandas: `pip install 'kernlint[pandas]'` (`require_pandas`).
"""
from __future__ import annotations

import importlib.util

from kernlint.errors import MissingExtraError

CAPTURE_EXTRA = "capture"
CAPTURE_MODULES = ("torch",)   # what the capture extra brings that the core install lacks
PANDAS_EXTRA = "pandas"


def require_capture(what: str) -> None:
    """Raise MissingExtraError unless the capture extra's modules are importable. `what` names the command
    or call that needs them (`kernlint audit`, `kernlint.profiling()`)."""
    missing = [m for m in CAPTURE_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(None, f"{what} needs {' and '.join(missing)}, which is not installed: "
                                      f"pip install 'kernlint[{CAPTURE_EXTRA}]' (install your own torch build "
                                      "first and pip keeps it)")


def require_pandas(what: str) -> None:
    """Raise MissingExtraError unless pandas is importable. `what` names the call that needs it
    (`EventTable.frame`)."""
    if importlib.util.find_spec("pandas") is None:
        raise MissingExtraError(None, f"{what} needs pandas, which is not installed: "
                                      f"pip install 'kernlint[{PANDAS_EXTRA}]'")
