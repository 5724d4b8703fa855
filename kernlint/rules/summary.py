"""What checking one trace leaves for the stages that look at several: a per-trace summary, no events.

Checking a run is a map over its traces and a reduce over what they leave. The map (one trace: load it, run
the per-trace rules, summarize it) can run in a worker process or on another machine; the reduce (group the
ranks of each run, run the cross-rank rules, compare with a baseline) reads only these summaries, so memory
in the process that reduces does not grow with the size of the traces. Both are plain data and pickle small:
a few scalars and lists per trace, and per cross-rank rule the part its check kind made of the trace
(`CheckKind.rank_part`, e.g. the rank's launch stream).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernlint.rules.result import TraceReport
from kernlint.trace.runs import RunIdentity


@dataclass
class TraceSummary:
    """One trace as the cross-rank and baseline stages need it."""

    path: str
    rank: int | None
    identity: RunIdentity                 # what run grouping reads (kernlint.trace.runs.group_runs)
    events: int
    has_device_events: bool
    has_stacks: bool
    outside_window: dict[str, int]        # window_edges(table).counts()
    unlinked: dict[str, int]              # window_edges(table).unlinked_counts()
    damage: list[str]                     # trace_damage(table).summary()
    # Per cross-rank rule id (made only for ranks of a multi-rank run): the damage its verdict rests on, and
    # its kind's part of the trace.
    rule_damage: dict[str, list[str]] = field(default_factory=dict)
    parts: dict[str, Any] = field(default_factory=dict)
    # With a baseline to compare with: the trace's part of its program's profile
    # (kernlint.baseline.profile.TraceRuns) and its timing environment.
    baseline_runs: Any = None
    environment: dict[str, Any] | None = None


@dataclass
class CheckedTrace:
    """What the map leaves for one trace: its report (cross-rank verdicts still to come) and its summary."""

    report: TraceReport
    summary: TraceSummary
    # What the trace holds of CUDA graphs (kernlint.trace.pairing.GraphRole), when the check was asked for it:
    # the pipeline pairs capture traces with replay traces from these, reading no trace again.
    graph_role: Any = None
