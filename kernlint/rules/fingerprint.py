"""A finding's fingerprint: what identifies it across recordings of the same code, for the suppressions file
(kernlint.rules.suppressions), SARIF's `partialFingerprints` and the JSON `fingerprint`.

A trace names things that change with every recording: the step counter (`ProfilerStep#12`; the next cycle
of a scheduled profiler counts on), process and thread ids, ranks, the number of a CUDA-graph replay, heap
addresses inside Python's names (`<built-in method item of Tensor object at 0x7f3b...>`), and the absolute
path of the machine that recorded it. The fingerprint (scheme FINGERPRINT_SCHEME) is

    rule | scope | event | top op | anchor | source

with, in the scope, event, top op and anchor:
- the names table's recording counters (kernlint.trace.names.RECORDING_COUNTERS): `ProfilerStep#N`,
  `PyTorch Profiler (N)`;
- `thread PID:TID` for a thread (the profiled window's scope names its thread);
- `ranks *` for the ranks of a cross-rank scope (`ranks 0, 1`);
- `graph replay N` for the number of a replay;
- `0x*` for a hexadecimal number of 6 digits or more (an address; a short constant such as a template
  argument `0x10` stays);
- a Python frame's path (`frame /tmp/x/model.py(12): forward`) reduced to its file name;

and the source (`file.py:LINE`, at its function's `def` line where it was refined to a statement) reduced to
its file name and line. Module classes and instances
(`Linear_0`, `model.layers.3.mlp`), template arguments, shapes, dtypes and line numbers stay: they are the
code. Times, trace paths and ranks are not in it.

Why the file name only: a recorded path is relative to the `sys.path` entry its module was imported from
(`regressed/x.py`) or absolute on the recording machine (`/workspace/vllm/vllm/...`), and the report maps
it to the checkout (kernlint.rules.sources) only after suppressions were applied; the file name is the one
part that every one of those forms shares, so the suppressions file, SARIF and JSON carry the same key
whatever the machine, the folder or the checkout. The scope, the event and the line tell files of one name
apart.

Scheme 1 (`kernlintFingerprint/v1`, suppressions files of version 1) was `rule|scope|event|top op|anchor`
verbatim: `legacy_fingerprint` still computes it, so an old suppressions file keeps matching.
"""
from __future__ import annotations

import re
from functools import lru_cache

from kernlint.trace.names import RECORDING_COUNTERS, frame_parts

FINGERPRINT_SCHEME = 2
# A hexadecimal number long enough to be an address (user-space addresses have 6 digits and more).
_ADDRESS = re.compile(r"(?<![A-Za-z0-9_])0[xX][0-9a-fA-F]{6,}(?![0-9a-fA-F])")
# The thread in a scope label (kernlint.trace.scopes.ScopeIndex.profiled_windows: `..., thread PID:TID)`).
_THREAD = re.compile(r"(?<![A-Za-z0-9_])thread [^\s,()]*:[^\s,()]*")
# A cross-rank scope (kernlint.rules.checks.rank_divergence: `ranks 0, 1`).
_RANKS = re.compile(r"^ranks \d+(?:, \d+)*")
# A CUDA-graph replay (kernlint.rules.checks.forbid_before_anchor: `graph replay 3 of capture_16_FULL`).
_REPLAY = re.compile(r"(?<![A-Za-z0-9_])graph replay \d+")
_FRAME_KIND = "frame "


@lru_cache(maxsize=1)
def _counters() -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(p), r) for p, r in RECORDING_COUNTERS)


def file_name(path: str) -> str:
    """The last component of a recorded path, with either separator."""
    return re.split(r"[/\\]", path)[-1]


def _frame(name: str) -> str:
    """`/abs/path/model.py(12): forward` -> `model.py(12): forward`; any other name as it is."""
    path, line, function = frame_parts(name)
    if path is None or line is None:
        return name
    return f"{file_name(path)}({line}): {function}"


@lru_cache(maxsize=65536)
def normalized_name(name: str | None) -> str:
    """An event, op or anchor name without what a recording numbers (see the module docstring)."""
    if not name:
        return ""
    text = name
    for pattern, replacement in _counters():
        text = pattern.sub(replacement, text)
    text = _ADDRESS.sub("0x*", text)
    text = _THREAD.sub("thread PID:TID", text)
    text = _REPLAY.sub("graph replay N", text)
    return _frame(text)


@lru_cache(maxsize=65536)
def normalized_scope(scope: str | None) -> str:
    """A scope label (`annotation ProfilerStep#3`, `frame /x/m.py(12): f`, `ranks 0, 1`, `the profiled window
    (..., thread 12:34)`) without what a recording numbers."""
    if not scope:
        return ""
    text = _RANKS.sub("ranks *", scope)
    if text.startswith(_FRAME_KIND):
        return _FRAME_KIND + normalized_name(text[len(_FRAME_KIND):])
    return normalized_name(text)


def normalized_source(source: str | None) -> str:
    """`path/to/file.py:LINE` -> `file.py:LINE` (a source without a line: its file name)."""
    if not source:
        return ""
    file, _, line = source.rpartition(":")
    if file and line.isdigit():
        return f"{file_name(file)}:{line}"
    return file_name(source)


def fingerprint(finding) -> str:
    """The finding's fingerprint, scheme FINGERPRINT_SCHEME: equal for the same finding in two recordings of
    the same code (other processes, steps, profiling cycles, machines)."""
    return "|".join([finding.rule, normalized_scope(finding.scope), normalized_name(finding.event),
                     normalized_name(finding.top_op), normalized_name(finding.anchor),
                     normalized_source(_function_source(finding))])


def _function_source(finding) -> str | None:
    """The finding's source at its function's `def` line: a source refined to the statement line
    (kernlint.rules.statements) keeps the fingerprint it had before, whether or not its file was found."""
    details = getattr(finding, "details", None)
    line = details.get("def_line") if isinstance(details, dict) else None
    if isinstance(line, int) and not isinstance(line, bool) and finding.source and ":" in finding.source:
        return f"{finding.source.rpartition(':')[0]}:{line}"
    return finding.source


def legacy_fingerprint(finding) -> str:
    """Scheme 1: the texts as recorded (what suppressions files of version 1 hold)."""
    return "|".join([finding.rule, finding.scope or "", finding.event or "", finding.top_op or "",
                     finding.anchor or ""])


def fingerprint_of(finding, scheme: int = FINGERPRINT_SCHEME) -> str:
    """The finding's fingerprint in `scheme` (1 or 2)."""
    return legacy_fingerprint(finding) if scheme == 1 else fingerprint(finding)
