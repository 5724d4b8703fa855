"""One finding per cause: the findings of one rule at one source line and event kind, across layers, repeats,
steps, graph replays and ranks, are one cause with its instances.

A `new_ones` placeholder in a linear layer's forward, run over 8 layers and 8 steps, is 64 findings and one
line to change: every format shows it once, with its 64 instances (their scopes, steps, ranks and traces)
listed inside. A cause is presentation over the same findings: the exit code and the rule verdicts are
decided on the findings (kernlint.rules.result.exit_status), and a cause fails wherever one of its instances
does, so grouping never hides a failing finding.

The identity of a cause is `cause_key`, the one place it is defined.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath

from kernlint.rules.fingerprint import normalized_name
from kernlint.rules.fingerprint import normalized_scope as recording_free_scope
from kernlint.rules.result import Cost, Finding, finding_sort_key, is_missing, sorted_findings
from kernlint.rules.severity import SEVERITY_ORDER

# Per-instance numbering in a scope label that a fingerprint keeps (it is the code there) and a cause drops,
# for a finding that has no source line (a trace recorded without stacks): the layer, capture and repeat
# numbers (`Fp8BlockLinear_7`, `layers.7`, `capture 2`, `#3`). What a recording numbers (steps, threads,
# ranks, replay numbers, addresses) kernlint.rules.fingerprint.normalized_scope drops first.
_NUMBERING = (
    (re.compile(r"#\d+"), "#N"),                                                  # ProfilerStep#3, block#2
    (re.compile(r"\b(replay|capture|step|rank|layer) \d+"), r"\1 N"),             # graph replay N of capture 1
    (re.compile(r"(?<=[A-Za-z])_\d+\b"), "_N"),                                    # module Fp8BlockLinear_7
    (re.compile(r"(?<=[A-Za-z_])\.\d+(?=\.|\b)"), ".N"),                           # module layers.7.mlp
)
_STEP_IN_SCOPE = re.compile(r"ProfilerStep#\d+")
_REPLAY_IN_SCOPE = re.compile(r"\bgraph replay (\d+)")


def normalized_scope(scope: str | None) -> str:
    """A scope label without its per-instance numbering: `annotation ProfilerStep#3` -> `annotation
    ProfilerStep#N`, `module Linear_7` -> `module Linear_N`, `... thread 501:501)` -> `... thread PID:TID)`,
    `graph replay 2 of capture 2` -> `graph replay N of capture N`."""
    text = recording_free_scope(scope)
    for pattern, replacement in _NUMBERING:
        text = pattern.sub(replacement, text)
    return text


def cause_key(f: Finding) -> tuple[str, ...]:
    """What makes findings one cause. With a source line: (rule, source file:line, event kind). Without one
    (no stacks in the trace): (rule, the scope without its per-instance numbering, the event name without
    what a recording numbers: an address in `<built-in method item of Tensor object at 0x7f...>`, the
    program: the trace's file name with its numbers dropped, so that the ranks and recordings of one program
    are one cause while unrelated programs that share a `ProfilerStep#N` and a `Memcpy HtoD` are not)."""
    if f.source and not is_missing(f.source):
        return (str(f.rule), str(f.source), "" if is_missing(f.event_kind) else str(f.event_kind or ""))
    return (str(f.rule), normalized_scope(None if is_missing(f.scope) else f.scope),
            normalized_name(None if is_missing(f.event) else str(f.event)), program_of(f.trace))


_DIGITS = re.compile(r"\d+")


def program_of(trace: str | None) -> str:
    """A trace's program, as far as its path says: its file name, numbers dropped (`rank-0`, a timestamp)."""
    return _DIGITS.sub("N", PurePath(str(trace or "")).name)


def instance_step(f: Finding) -> str | None:
    """Where in the run an instance ran: its profiler step and graph replay (`ProfilerStep#3`, `graph replay
    2`, both joined by ` / `), from the finding's details or, failing those, its scope; None when unknown."""
    details = f.details if isinstance(f.details, dict) else {}
    scope = f.scope if isinstance(f.scope, str) else ""
    parts = []
    step = details.get("step")
    if isinstance(step, str) and step:
        parts.append(step)
    elif (found := _STEP_IN_SCOPE.search(scope)) is not None:
        parts.append(found.group(0))
    replay = details.get("graph_replay")
    if isinstance(replay, int) and not isinstance(replay, bool) and replay > 0:
        parts.append(f"graph replay {replay}")
    elif (found := _REPLAY_IN_SCOPE.search(scope)) is not None:
        parts.append(f"graph replay {found.group(1)}")
    return " / ".join(parts) or None


def _natural(text: str) -> list:
    """`graph replay 10` after `graph replay 9`."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text)]


def number(value) -> float | None:
    """A finite float of a number-like value; None for a missing, non-numeric or infinite one."""
    if value is None or isinstance(value, bool) or is_missing(value):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _us(f: Finding) -> float | None:
    """The finding's measured cost in µs (Finding.cost), else its device time."""
    us = number(f.cost.us) if f.cost is not None else None
    return us if us is not None else number(f.device_us)


def _worst_first(f: Finding) -> tuple:
    """Highest severity, then the costliest, then the earliest, then the report order."""
    cost, ts = _us(f), number(f.ts)
    return (-SEVERITY_ORDER.get(f.severity, -1), -(cost if cost is not None else -math.inf),
            ts if ts is not None else math.inf, finding_sort_key(f))


def _distinct(values: Iterable) -> list:
    return list(dict.fromkeys(v for v in values if v is not None and not is_missing(v) and v != ""))


def _total(values: Iterable) -> float | None:
    present = [v for v in (number(x) for x in values) if v is not None]
    return math.fsum(present) if present else None


@dataclass(frozen=True)
class Cause:
    """Findings of one rule at one place (cause_key): every one of them, its instances, in report order (the
    same words in several blocks are as many instances), and the representative a format shows first: the
    worst instance."""

    key: tuple[str, ...]
    findings: tuple[Finding, ...]
    representative: Finding

    @property
    def count(self) -> int:
        return len(self.findings)

    @property
    def rule(self) -> str:
        return self.representative.rule

    @property
    def name(self) -> str:
        return self.representative.name

    @property
    def severity(self) -> str:
        """The worst severity of its instances (the representative's)."""
        return self.representative.severity

    @property
    def source(self) -> str | None:
        return self.representative.source

    @property
    def scopes(self) -> list[str]:
        """The distinct scopes of its instances, in report order."""
        return _distinct(f.scope for f in self.findings)

    @property
    def steps(self) -> list[str]:
        """The distinct steps and graph replays its instances ran in (instance_step), in number order."""
        return sorted(_distinct(instance_step(f) for f in self.findings), key=_natural)

    @property
    def ranks(self) -> list[int]:
        return sorted(_distinct(f.rank for f in self.findings))

    @property
    def traces(self) -> list[str]:
        return _distinct(f.trace for f in self.findings)

    @property
    def device_us(self) -> float | None:
        """The summed device time of every instance; None when none had one."""
        return _total(f.device_us for f in self.findings)

    @property
    def cost(self) -> Cost | None:
        """The measured costs (kernlint.rules.cost) of its instances summed: µs on their basis ("mixed" where
        they differ); the share of the summed time is of as many steps as the instances ran in, so it is the
        mean share per instance where every instance has one. None when no instance measured a time."""
        costs = [f.cost for f in self.findings if f.cost is not None and number(f.cost.us) is not None]
        if not costs:
            return None
        bases = _distinct(c.basis for c in costs)
        shares = [number(c.share) for c in costs]
        ofs = _distinct(c.of for c in costs)
        share = (math.fsum(shares) / len(shares) if len(costs) == len(self.findings) and None not in shares
                 and len(ofs) == 1 else None)
        return Cost(us=math.fsum(number(c.us) for c in costs), share=share,
                    basis=bases[0] if len(bases) == 1 else "mixed",
                    of=f"{ofs[0]}, per instance" if share is not None else None,
                    reason=None if share is not None else "the instances' shares are not of one kind of step")

    @property
    def bytes(self) -> int | None:
        total = _total(f.bytes for f in self.findings)
        return None if total is None else int(total)

    @property
    def context(self) -> str | None:
        """Why it is not what to act on first: only when every instance has such a context."""
        if any(not f.context for f in self.findings):
            return None
        return self.representative.context

    @property
    def groups(self) -> set[str]:
        """The event groups of its instances: a cause of another rule sharing one is the same problem."""
        return {f.group for f in self.findings if f.group}

    def fails_at(self, threshold: int) -> bool:
        """Whether an instance is at or above the severity rank `threshold` (SEVERITY_ORDER)."""
        return any(SEVERITY_ORDER.get(f.severity, -1) >= threshold for f in self.findings)


def costliest_first(causes: Iterable[Cause]) -> list[Cause]:
    """Causes by severity (what fails the gate first), then by what they cost (all instances summed), the
    costliest first; causes of equal cost keep their order."""
    def key(cause: Cause) -> tuple:
        cost = cause.cost
        us = number(cost.us) if cost is not None else None
        return (-SEVERITY_ORDER.get(cause.severity, -1), -(us if us is not None else -math.inf))
    return sorted(causes, key=key)


def group_causes(findings: Iterable[Finding]) -> list[Cause]:
    """The findings as causes, the costliest first (costliest_first), else in the order of their first
    instance (findings in report order)."""
    by_key: dict[tuple, list[Finding]] = {}
    for f in sorted_findings(findings):
        by_key.setdefault(cause_key(f), []).append(f)
    return costliest_first(Cause(key, tuple(found), min(found, key=_worst_first)) for key, found in by_key.items())


def causes_of(result) -> list[Cause]:
    """A CheckResult's findings (every report's) as causes."""
    return group_causes(f for r in result.reports for f in r.findings)


def by_line(causes: Iterable[Cause]) -> list[Cause]:
    """The causes of one rule at one source line merged, whatever their event kinds: what one annotation at
    a file:line shows (GitHub). Causes without a source line stay as they are."""
    merged: dict[tuple, list[Cause]] = {}
    for cause in causes:
        merged.setdefault((cause.rule, cause.source) if cause.source else cause.key, []).append(cause)
    out = []
    for same in merged.values():
        if len(same) == 1:
            out.append(same[0])
            continue
        found = sorted_findings(f for c in same for f in c.findings)
        out.append(Cause(same[0].key, tuple(found), min(found, key=_worst_first)))
    return costliest_first(out)


def _named(values: list, limit: int) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def describe_instances(cause: Cause, limit: int = 3) -> str:
    """Where a cause's instances are, in words: `64 instances: 8 scopes (module A_0, module A_1, module A_2
    and 5 more); 2 steps (graph replay 1, graph replay 2); ranks 0, 1; 2 traces`. Plain text: a renderer
    makes it inert (kernlint.report.safe)."""
    scopes, steps, ranks, traces = cause.scopes, cause.steps, cause.ranks, cause.traces
    parts = []
    if len(scopes) > 1:
        parts.append(f"{len(scopes)} scopes ({_named(scopes, limit)})")
    elif scopes:
        parts.append(f"scope {scopes[0]}")
    if steps:
        parts.append(f"{len(steps)} step{'s' if len(steps) > 1 else ''} ({_named(steps, limit)})")
    if ranks:
        parts.append(f"rank{'s' if len(ranks) > 1 else ''} {_named(ranks, 8)}")
    if len(traces) > 1:
        parts.append(f"{len(traces)} traces")
    head = f"{cause.count} instance{'s' if cause.count != 1 else ''}"
    return f"{head}: {'; '.join(parts)}" if parts else head


def linked(causes: list[Cause]) -> list[tuple[Cause, Cause | None]]:
    """The causes to act on (those whose instances are not all in context), each with the cause it is the same
    problem as (another rule's cause sharing an event group, printed before it) or None; the members of one
    problem kept together, after its first, otherwise in the order given."""
    acted = [c for c in causes if not c.context]
    parent = list(range(len(acted)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, cause in enumerate(acted):
        for group in sorted(cause.groups):
            a, b = root(owner.setdefault(group, i)), root(i)
            if a != b:
                parent[max(a, b)] = min(a, b)
    members: dict[int, list[int]] = {}
    for i in range(len(acted)):
        members.setdefault(root(i), []).append(i)
    out, placed = [], set()
    for i in range(len(acted)):
        if i in placed:
            continue
        problem = members[root(i)]
        first = acted[problem[0]]
        for j in problem:
            placed.add(j)
            out.append((acted[j], None if j == problem[0] or acted[j].rule == first.rule else first))
    return out


def problem_count(causes: list[Cause]) -> int:
    """Causes to act on, the causes of several rules on the same events counted once."""
    return sum(1 for _, first in linked(causes) if first is None)
