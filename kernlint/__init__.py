"""kernlint: a profiling-driven regression detector for PyTorch GPU code.

The Python API (kernlint.api) is exported here and imported on first use, so that `import kernlint` (and
the CLI, and the pytest plugin that pytest loads in every session) stays light:

    kernlint.check(trace_or_profiler, rules=None, *, select=(), ignore=(), fail_on="warning") -> CheckReport
    kernlint.profiling(rules=None, *, device=None, ...)    # a context manager; see kernlint.api
    kernlint.RuleViolation                                  # AssertionError raised by assert_clean()
"""
from kernlint._version import __version__

_API = ("CheckReport", "ProfiledBlock", "RuleViolation", "check", "profiling", "resolve_rules")
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from kernlint import api

        return getattr(api, name)
    raise AttributeError(f"module 'kernlint' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
