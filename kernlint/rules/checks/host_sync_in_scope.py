"""forbid-sync-in-scope: no host synchronization inside any instance of the named scope, one finding per sync.

A sync shows as a chain of events: `.item()` is `aten::item` -> `aten::_local_scalar_dense` (-> a DtoH
`cudaMemcpyAsync` and a `cudaStreamSynchronize` on a GPU); `if t:` adds `aten::is_nonzero` on top; boolean-mask
indexing is `aten::index` -> `aten::nonzero`; `.cpu()` is `aten::to` -> `_to_copy` -> `copy_` -> a pageable
DtoH `cudaMemcpyAsync` and a `cudaStreamSynchronize`. forbid-in-scope counts either the outermost op only
(and misses the `nonzero` inside `aten::index`) or every matching op (and counts `.item()` twice or thrice).
This kind counts the outermost *matching* event of each chain, and runtime calls that no matching op encloses
once per enclosing op (a `.cpu()` is one sync, not its copy call and its synchronize). A sync op counts only
when the trace does not show it to read a CPU value (kernlint.trace.syncs): `.item()` of a CPU tensor is not
a sync. Events under the profiler's own frames (its stop synchronizes the
device) and what torch's compiler and graph-capture machinery issues itself (the synchronizes of inductor's
cudagraph-tree warm-up and recording, torch.cuda.graph's on entry: ScopeIndex.in_machinery) are never counted.
"""
from __future__ import annotations

from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, named_scopes, register, under_frames
from kernlint.rules.fields import DeviceCategories, EventKinds, OpCategories, Patterns
from kernlint.rules.filters import kind_filter, needs_a_filter, present_anywhere, scope_rows
from kernlint.rules.noise import CONTEXT_SEVERITY, sync_contexts
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.graphs import capture_spans
from kernlint.trace.rows import EventFilter, outermost
from kernlint.trace.scopes import WINDOW
from kernlint.trace.syncs import unconfirmed_sync_ops


class ForbidSyncInScope(CheckSpec, tag="forbid-sync-in-scope"):
    kinds: EventKinds = []
    names: Patterns = []
    device_categories: DeviceCategories = []
    op_categories: OpCategories = []
    # Python frames (regexes) under which an event does not count: a library's own deliberate sync. (torch's
    # compiler and graph-capture machinery, torch.cuda.graph's synchronize on entry included, is set-up for
    # every rule: ScopeIndex.in_machinery.)
    exclude_frames: Patterns = []
    # Where the scope's thread records stream captures (BeginCapture .. EndCapture), only syncs inside one
    # count: the rest of a capture function (warm-up runs, input preparation) is capture set-up. A scope on a
    # thread that records none (the region run eagerly) is judged whole.
    stream_capture_only: bool = False
    # Syncs that are right but not what to act on first (a harness's edge synchronize, the final readback,
    # first-instance autotuning, data loading: kernlint.rules.noise) are info, with their context.
    rank_noise: bool = False


def sync_rows(index, scope, event_filter: EventFilter) -> list[int]:
    """The syncs of one scope instance, one row per sync, in issue order. A sync op the trace shows not to
    be a device sync (kernlint.trace.syncs: `.item()` of a CPU tensor) is not one."""
    rows = scope_rows(index, scope, event_filter, nested=True)
    unconfirmed = unconfirmed_sync_ops(index)
    rows = [r for r in rows if not unconfirmed[r]]
    rows = outermost(index, rows)
    out, owners = [], set()
    for r in rows:
        if index.kind[r] == "runtime":
            # The outermost op around the call inside this scope instance: one sync per such op.
            owner, p = -1, int(index.parent_op[r])
            while p >= 0 and scope.ts <= index.ts[p] < scope.end and p != scope.row:
                owner, p = p, int(index.parent_op[p])
            if owner >= 0:
                if owner in owners:
                    continue
                owners.add(owner)
        out.append(r)
    return out


def _last_launch(index, scope) -> float:
    """When the scope's thread last issued device work (-inf when it issued none)."""
    launched = index.device_events_between(scope.thread, scope.ts, scope.end)
    return float(index.launch_ts[launched].max()) if len(launched) else float("-inf")


def run(rule, table, index):
    scopes = named_scopes(index, rule)
    if not scopes:
        return not_applicable(rule, "no annotation, module, frame or op matches the rule's [scope]", absent=True)
    flt = EventFilter.of(rule.spec.check)
    excluded, cache = rule.spec.check.exclude_frames, {}
    if not present_anywhere(index, kind_filter(flt).mask(index) & ~unconfirmed_sync_ops(index),
                            lambda r: bool(excluded) and under_frames(index, r, excluded, cache)):
        return not_applicable(rule, "no host sync anywhere in the trace: nothing of the rule's kind to judge")
    captures = capture_spans(table) if rule.spec.check.stream_capture_only else {}
    kept: dict[int, list[int]] = {}
    left_out = 0
    for i, scope in enumerate(scopes):
        last_launch = _last_launch(index, scope) if scope.kind == WINDOW else None
        spans = [(b, e) for b, e in captures.get(scope.thread, ()) if e > scope.ts and b < scope.end]
        for r in sync_rows(index, scope, flt):
            if excluded and under_frames(index, r, excluded, cache):
                continue
            if spans and not any(b <= index.ts[r] <= e for b, e in spans):
                left_out += 1   # capture set-up around the capture, not inside it
                continue
            if last_launch is not None and index.kind[r] == "runtime" and index.parent_op[r] < 0 \
                    and index.ts[r] > last_launch:
                continue   # a bare synchronize after the last launch: the program draining the device at exit
            kept.setdefault(i, []).append(r)
    contexts = sync_contexts(index, scopes, kept, rule.spec.scope.steps) if rule.spec.check.rank_noise else {}
    findings = []
    for i, rows in kept.items():
        scope = scopes[i]
        for r in rows:
            event = str(index.short_name[r])
            op = int(index.parent_op[r]) if index.kind[r] == "runtime" else -1
            inside = f" (in {index.short_name[op]})" if op >= 0 else ""
            context = contexts.get(r)
            findings.append(make_finding(rule, index, r, scope, f"{event}{inside} in {scope.label}"
                                         + (f" ({context})" if context else ""), None,
                                         severity=CONTEXT_SEVERITY if context else None, context=context))
    note = (f"{left_out} sync(s) in the scope but outside its stream captures (capture set-up) not counted"
            if left_out else None)
    return decided(rule, findings, "kernel" if table.has_device_events else "op", len(scopes), note)


register(CheckKind(
    type="forbid-sync-in-scope", spec=ForbidSyncInScope, run=run, needs_scope=True, validate=needs_a_filter,
    summary="No matching event (a host sync) inside any instance of the named scope; one finding per sync chain."))
