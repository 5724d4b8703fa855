"""Which program a trace is a run of: the name under which `baseline record` keeps it and `check --baseline`
looks for it. It must be the same when the same code is recorded again (on main, then in a pull request: other
times, pids, hosts, step numbers) and differ between programs, so that a folder of several programs is never
one program whose runs disagree.

In order, the first that says something:
1. the run metadata (`.run.json` beside the trace, or embedded): the workload `kernlint run` recorded, or the
   target it was asked for;
2. the trace's path as the user keeps it: the file name, then the folders between it and the folder that was
   given on the command line, with what changes at every recording stripped (times, dates, pids, the
   `<host>_<pid>` worker name and `.<ms>` of torch's tensorboard_trace_handler, numbered steps, ranks, processes
   and runs such as `step_12`, `rank-3`, `p01`, `run2`; hex ids);
3. the trace's content: its outermost units (ranges, modules, functions) below the step.
A trace with a rank (distributedInfo, or the metadata's) is that program's `rank r`. With none of the three,
the program is `trace`.
"""
from __future__ import annotations

import re
from pathlib import Path

# A name boundary: not a letter or digit (underscores, dots and dashes separate words in file names).
_B, _E = r"(?<![A-Za-z0-9])", r"(?![A-Za-z0-9])"
_SUFFIX = re.compile(r"(\.pt\.trace|\.trace|\.json|\.gz|\.pftrace|\.sqlite)+$", re.IGNORECASE)
# torch.profiler.tensorboard_trace_handler writes `<worker>.<ms since the epoch>.pt.trace.json[.gz]`, whose
# default worker is `<hostname>_<pid>`.
_TB_FILE = re.compile(r"^(?P<worker>.+)\.\d{10,}$")
_HOST_PID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*_\d+$")
_CHANGING = [
    re.compile(_B + r"\d{8}T\d{4,6}(?:\.\d+)?Z?(?:-[0-9a-f]{4,})?" + _E),          # kernlint's run folders
    re.compile(_B + r"\d{4}-\d{2}-\d{2}(?:[T_ -]\d{2}[:.-]?\d{2}(?:[:.-]?\d{2}(?:\.\d+)?)?)?Z?" + _E),   # dates
    # counters of what repeats (steps, processes, runs, ranks, devices): the same program each time
    re.compile(_B + r"(?:step|iter|iteration|pid|tid|rank|worker|proc|process|node|gpu|device|cycle|p|run|rep|"
                    r"repeat|trial|sample|attempt)[_-]?\d+" + _E, re.IGNORECASE),
    re.compile(_B + r"(?=[0-9a-f]*\d)[0-9a-f]{8,}" + _E),                          # hex ids, container hosts
    re.compile(_B + r"\d{4,}" + _E),                                              # pids, epoch times
]
_SEPARATORS = re.compile(r"[._-]{2,}")
_RANK_PROGRAM = re.compile(r"(?:^|/)rank (\d+)$")
_CONTENT_UNITS = 3


def stable_name(text: str, host: str | None = None) -> str:
    """`text` (a file name without its folder, or one folder's name) less what changes at every recording."""
    name = _SUFFIX.sub("", text)
    tb = _TB_FILE.match(name)
    if tb:
        worker = tb.group("worker")
        name = "" if _HOST_PID.match(worker) else worker
    if host:
        name = re.sub(_B + re.escape(host) + r"_\d+" + _E, "", name)
    for pattern in _CHANGING:
        name = pattern.sub("", name)
    return _SEPARATORS.sub(lambda m: m.group(0)[0], name).strip("._- ")


def path_name(path: str | Path, root: str | Path | None = None, host: str | None = None) -> str:
    """The stable name of a trace file: its path below `root` (the folder it was found in, as given), each
    part stripped (stable_name) and the empty ones left out; for a file given by itself (no root), its name,
    else the nearest of its three parent folders whose name says something. An entry that is one process of a
    file recording several (`export.sqlite#pid-144`: kernlint.trace.sources) is named by its file: the pid
    changes with every recording, the rank tells the processes apart."""
    from kernlint.trace.sources import split_entry

    path = split_entry(path)[0]
    if root is not None:
        try:
            parts = path.relative_to(root).parts
        except ValueError:
            parts = (path.name,)
        kept = [p for p in (stable_name(part, host) for part in parts) if p]
        return "/".join(kept)
    for part in [path.name, *(p.name for p in list(path.parents)[:3])]:
        name = stable_name(part, host)
        if name:
            return name
    return ""


def metadata_name(metadata: dict | None) -> str:
    """The workload (or target) the run metadata names, if any."""
    if not isinstance(metadata, dict):
        return ""
    for key in ("workload", "target"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def content_name(units: list[str]) -> str:
    """A name from what the trace ran: its outermost units in order of first appearance."""
    if not units:
        return ""
    shown = ", ".join(units[:_CONTENT_UNITS])
    more = len(units) - _CONTENT_UNITS
    return f"trace of {shown}" + (f" and {more} more" if more > 0 else "")


def program_identity(*, metadata: str, path: str, content: str, rank: int | None, world: int | None) -> str:
    """The program's name from its three sources, in order (module docstring), with the rank."""
    base = metadata or path or content
    if rank is None or (metadata and rank == 0 and world in (None, 1)):
        return base or "trace"
    return f"{base}/rank {rank}" if base else f"rank {rank}"


def rank_of(program: str) -> int | None:
    """The rank a program name ends in (`rank 3`, `W/rank 3`), else None."""
    m = _RANK_PROGRAM.search(program)
    return int(m.group(1)) if m else None
