"""Building a baseline from profiles, and comparing traces with one."""
from __future__ import annotations

import time
from typing import Any

from kernlint._version import __version__
from kernlint.baseline.compare import BaselineComparison, compare
from kernlint.baseline.environment import environment_of, environment_warnings, run_metadata_of
from kernlint.baseline.model import SCHEMA_VERSION, Baseline, ProgramProfile, Thresholds
from kernlint.baseline.profile import profile_traces
from kernlint.trace.table import EventTable


def trace_environment(table: EventTable, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The timing environment of one trace: from `metadata` (a capture's), the trace's embedded run
    metadata, or the `.run.json` beside it; else what the trace itself says."""
    meta = metadata or run_metadata_of(table)
    return environment_of(meta, table)


def build_baseline(programs: dict[str, ProgramProfile], environment: dict[str, Any] | None = None,
                   refresh_command: str = "") -> Baseline:
    return Baseline(schema_version=SCHEMA_VERSION, kernlint_version=__version__,
                    created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    programs={name: p.for_baseline_file() for name, p in sorted(programs.items())},
                    environment=environment or {},
                    refresh_command=refresh_command)


def compare_with_baseline(baseline: Baseline, tables: list[EventTable], *, baseline_path: str = "",
                          limits: Thresholds | None = None, strict_env: bool = False,
                          programs: dict[str, ProgramProfile] | None = None,
                          environments: list[dict[str, Any]] | None = None,
                          strict_timing: bool = False) -> BaselineComparison:
    """The traces (repeated runs, one program per rank) against the baseline. `programs` and
    `environments` override what is derived from the tables (an audit names programs by workload)."""
    programs = programs if programs is not None else profile_traces(tables, baseline.programs)
    envs = environments if environments is not None else [trace_environment(t) for t in tables]
    warnings = environment_warnings(baseline.environment, envs)
    return compare(baseline, programs, baseline_path=baseline_path, limits=limits, environment_warnings=warnings,
                   strict_env=strict_env, strict_timing=strict_timing)
