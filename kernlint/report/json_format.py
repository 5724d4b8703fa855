"""`--format json`: a documented, stable schema (schema_version 1).

```
{
  "schema_version": 1,
  "tool": {"name": "kernlint", "version": "0.1.0"},
  "exit_code": 1,
  "summary": {"traces": 1, "findings": 1, "errors": 1, "warnings": 0, "infos": 0,
              "causes": 1,            # the findings as causes (below)
              "incomplete": 0,        # (trace, rule) verdicts that could not be fully checked
              "unreadable": 0},       # entries met in a folder that could not be read
  "findings": [{
      "rule": "KL001", "name": "fill-before-block-quant", "severity": "error",
      "message": "...", "trace": "path", "rank": null,
      "scope": "module Fp8BlockLinear_0",
      "event": "vectorized_elementwise_kernel[FillFunctor<BFloat16>]", "event_kind": "kernel",
      "event_category": "fill", "launch_op": "aten::fill_", "top_op": "aten::new_ones",
      "source": "linear.py:88" | null, "function": "forward" | null, "anchor": "scale_1x128_kernel" | null,
      "ts": 123.4,
      "device_us": 0.8 | null, "bytes": null,   # device time of the offending launches; bytes they allocated
      "cost": {"us": 34.7 | null,     # what it costs, measured from the trace (kernlint.rules.cost), on
               "category": "norm" | null,   # its events' category in the trace's "time" breakdown
               "basis": "host blocked + device idle",   # "copy + host blocked", "device time", "host time",
                                      # "per run" (a baseline change), "allocation" (us null: see bytes)
               "share": 0.013 | null,  # us over what "of" names: "the step" (ProfilerStep#N), "the graph
               "of": "the step" | null,   # replay", "the scope" (the rule's instance), "the profiled window"
               "reason": null | "..."},   # why share (or us) is null
      "details": {"step": "ProfilerStep#3", "graph_replay": 2, ...} | null,   # where in the run, evidence
             # and, where the CLI refined the source (kernlint.rules.statements): "source_line": "statement"
             # (the statement that issued the op; "def_line": the function's) or "function" (its def line)
      "cause": 0,                     # its cause: an index into "causes"
      "fingerprint": "KL001|..."}],    # kernlint.rules.fingerprint: the same in another recording of the code
  "causes": [{                        # one per rule, source line and event kind (kernlint.rules.causes)
      "rule": "KL001", "name": "...", "severity": "error",   # the worst instance's severity
      "key": {"rule": "KL001", "source": "linear.py:88", "event_kind": "kernel"},
             # or, without a source line: {"rule": ..., "scope": "module Linear_N", "event": ...}
      "message": "...", "source": "linear.py:88" | null, "event": "...", "event_kind": "kernel",
      "count": 64, "scopes": ["module Linear_0", ...], "steps": ["ProfilerStep#1", "graph replay 2", ...],
      "ranks": [0, 1], "traces": ["..."], "device_us": 51.1 | null, "bytes": null,   # summed over instances
      "cost": {"us": 190.3, "basis": "...", "share": 0.028 | null, ...} | null,   # the instances' costs summed;
                                      # share: their mean share (each of its own step)
      "context": null, "representative": 12,   # the worst instance: an index into "findings"
      "instances": [{"finding": 0, "trace": "...", "rank": null, "scope": "...", "step": "..." | null,
                     "ts": 123.4, "device_us": 0.8, "bytes": null, "cost": {...} | null}, ...]}],
  "rules_passed": ["KL002"],
  "rules_incomplete": ["KL004"],           # ids not failed anywhere but not fully checked somewhere
  "rules_not_applicable": ["KL003"],        # ids that applied to none of the traces
  "skipped": [{"path": "...", "reason": "not a kineto trace (...)",   # met in a folder, not checked;
               "unreadable": false}],     # true: it could not be read (permission, dangling link, FIFO, bad gzip)
  "ignored_files": 0,                 # files in searched folders with other suffixes than .json / .json.gz
  "notes": ["Trace: ... (captured in 1.2 s); run metadata: ..."],   # `kernlint run`: where the trace went
  "traces": [{"path": "...", "subject": "trace|run group|baseline", "events": 1234, "has_device_events": true,
              "has_stacks": true, "rank": null,
              "ranks": null,          # [0, 1, ...] for a run group (one run, one profiling cycle): its rules
                                      # are the cross-rank ones; "path" is then the group's label
              "notes": ["126 of 128 ranks missing: ..."],   # run grouping, profiling-window edges
              "outside_window": {"device events launched before the window opened": 64},
              "damage": ["3 events without a timestamp"],   # what in the trace could not be used
              "graphs": {"replays": 3, "kernels": 204, "attributed_kernels": 204, ...,   # or null
                         "per_replay": [{"replay": 1, "kernels": 68, "attributed_kernels": 68, "share": 1.0,
                                         "method": "exact|aligned|node-id|pytorch-evidence|kernel-order",
                                         "capture": "capture 1" | null, "edits": 0}, ...]},
              "warnings": ["trace: not timed: ..."],   # what must be seen even when nothing failed (baselines)
              "time": {"basis": "ProfilerStep|graph replay|profiled window",   # where the device time goes
                       "steps": 3, "devices": 1,            # (kernlint.trace.time_breakdown); null without
                       "wall_us": 12300.0,                  # device events. Means per step: the device wall
                       "busy_us": 11300.0,                  # time, the union of device intervals in it,
                       "kernel_us": 11300.0,                # the summed device-event time (> busy: streams overlap)
                       "idle": {"category": "idle", "us_per_step": 1000.0, "share": 0.08},
                       "categories": [{"category": "gemm", "us_per_step": 5043.0, "share": 0.41}, ...],
                                      # gemm, attention, norm, elementwise, reduce, embedding, copy/layout,
                                      # host transfer, communication, memset/fill, other; shares of wall_us
                       "top": [{"name": "nvjet_sm90_...", "category": "gemm", "us_per_step": 243.0,
                                "share": 0.02, "launches_per_step": 64.0}, ...],
                       "launch_delay": {"launches_per_step": 57.0, "mean_us": 8.3, "median_us": 7.6,
                                        "max_us": 23.6} | null,   # launch call start -> its kernel's start
                       "comm_us": 0.0, "comm_overlap_us": 0.0,    # per step: communication (union), of it
                       "comm_overlap_share": 0.0 | null,         # the part other device work overlapped
                       "per_step": [{"step": 0, "label": "ProfilerStep#3", "start_us": ..., "wall_us": ...,
                                     "busy_us": ..., "idle_us": ..., "kernel_us": ...,
                                     "categories": {"gemm": 5043.0, ...}, "launches": 57,
                                     "launch_delay_mean_us": 8.3, "launch_delay_max_us": 23.6,
                                     "comm_us": 0.0, "comm_overlap_us": 0.0}, ...]} | null,   # 64 at most
              "rules": [{"rule": "KL001", "status": "failed|passed|incomplete|not-applicable",
                         "level": "kernel|op|null",
                         "instances": 2, "reason": null, "note": null, "findings": 1}]}]
}
```
`findings` are sorted by (trace, rank, rule, ts, scope, event, message), so the order of the events in a trace
never changes the output. No value is ever NaN or infinite: a missing number is null. `ts` is the launch
time in the trace's own microseconds. `source` is the innermost user Python frame that
issued the event (torch's Python tracer records the line where that function starts) and `function` its
name; both are null for traces recorded without with_stack. Fields are only ever added, never renamed.
"""
from __future__ import annotations

import dataclasses
import json

from kernlint._version import __version__
from kernlint.report import RenderContext, Renderer
from kernlint.report.safe import json_safe
from kernlint.rules.causes import causes_of
from kernlint.rules.result import CheckResult, clean_finding, sorted_findings

SCHEMA_VERSION = 1


def _dumps(data, *, safe: bool = False) -> str:
    """JSON text that every parser accepts: NaN, infinities and pandas NA are null, never `NaN`. `safe`: `data`
    is json_safe's output already (to_dict's), which a second pass would only copy."""
    return json.dumps(data if safe else json_safe(data), indent=2, allow_nan=False, default=str) + "\n"


def _finding(f) -> dict:
    f = clean_finding(f)
    item = dataclasses.asdict(f)
    item["fingerprint"] = f.fingerprint
    return item


def _cost(cost) -> dict | None:
    return None if cost is None else dataclasses.asdict(cost)


def _suppressed(result: CheckResult) -> dict:
    from kernlint.rules.suppressions import suppression_counts

    items = getattr(result, "suppressed", [])
    return {"count": len(items), "by": suppression_counts(items),
            "findings": [{**_finding(s.finding), "how": s.how, "reason": s.reason} for s in items]}


def _causes(causes, position: dict[int, int]) -> list[dict]:
    from kernlint.rules.causes import instance_step

    out = []
    for cause in causes:
        r = clean_finding(cause.representative)
        rule, where, what, *program = cause.key
        key = ({"rule": rule, "source": where, "event_kind": what} if r.source else
               {"rule": rule, "scope": where, "event": what, "program": program[0]})
        instances = []
        for f in cause.findings:
            c = clean_finding(f)
            instances.append({"finding": position[id(f)], "trace": c.trace, "rank": c.rank, "scope": c.scope,
                              "step": instance_step(c), "ts": c.ts, "device_us": c.device_us, "bytes": c.bytes,
                              "cost": _cost(c.cost)})
        out.append({"rule": r.rule, "name": r.name, "severity": r.severity, "key": key, "message": r.message,
                    "source": r.source, "event": r.event, "event_kind": r.event_kind, "count": cause.count,
                    "scopes": cause.scopes, "steps": cause.steps, "ranks": cause.ranks, "traces": cause.traces,
                    "device_us": cause.device_us, "bytes": cause.bytes, "cost": _cost(cause.cost),
                    "context": cause.context,
                    "representative": position[id(cause.representative)], "instances": instances})
    return out


def to_dict(result: CheckResult) -> dict:
    ordered = result.findings
    causes = causes_of(result)
    position = {id(f): i for i, f in enumerate(ordered)}
    cause_of = {id(f): n for n, cause in enumerate(causes) for f in cause.findings}
    findings = [{**_finding(f), "cause": cause_of[id(f)]} for f in ordered]
    counts = {s: sum(1 for f in ordered if f.severity == s) for s in ("error", "warning", "info")}
    rule_ids = [r.id for r in result.rules]
    unreadable = set(result.unreadable)
    return json_safe({
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "kernlint", "version": __version__},
        "exit_code": result.exit_code,
        "summary": {"traces": result.traces_checked, "findings": len(findings), "errors": counts["error"],
                    "warnings": counts["warning"], "infos": counts["info"], "causes": len(causes),
                    "incomplete": len(result.incomplete), "unreadable": len(result.unreadable)},
        "findings": findings,
        "causes": _causes(causes, position),
        "rules_passed": [r for r in rule_ids if result.rule_status(r) == "passed"],
        "rules_incomplete": [r for r in rule_ids if result.rule_status(r) == "incomplete"],
        "rules_not_applicable": [r for r in rule_ids if result.rule_status(r) == "not-applicable"],
        "skipped": [{"path": p, "reason": why, "unreadable": (p, why) in unreadable} for p, why in result.skipped],
        "ignored_files": result.ignored_files,
        "notes": list(result.notes),
        "suppressed": _suppressed(result),
        # Inline ignore comments that suppressed nothing, in the source files the check read (a field added with
        # --report-unused-ignores' data: always present, empty when none or when no source file was read).
        "unused_ignores": [{"file": u.file, "line": u.line, "form": u.form, "ids": list(u.ids) if u.ids else None,
                            "directive": u.directive} for u in getattr(result, "unused_ignores", None) or []],
        "traces": [
            {"path": rep.trace, "subject": rep.subject, "events": rep.events,
             "has_device_events": rep.has_device_events, "has_stacks": rep.has_stacks, "rank": rep.rank,
             "ranks": rep.ranks, "notes": rep.notes,
             "outside_window": rep.outside_window, "damage": list(getattr(rep, "damage", None) or []),
             "warnings": list(rep.warnings), "graphs": getattr(rep, "graphs", None),
             "time": getattr(rep, "time", None),
             "rules": [{"rule": o.rule, "status": o.status, "level": o.level, "instances": o.instances,
                        "reason": o.reason, "note": o.note,
                        "findings": len(o.findings)} for o in rep.outcomes]}
            for rep in result.reports
        ],
    })


def render(result: CheckResult, ctx: RenderContext | None = None) -> str:
    return _dumps(to_dict(result), safe=True)


def render_audit(run, ctx: RenderContext | None = None) -> str:
    verdicts = []
    for v in run.verdicts:
        verdicts.append({
            "workload": v.workload.name, "regressed": v.workload.regressed, "device": v.device, "ranks": v.ranks,
            "expected": dict(v.workload.expect),
            "verdicts": {o.rule: o.status for o in v.report.outcomes} if v.report else {},
            "as_expected": v.ok, "problems": v.problems, "seconds": v.seconds,
            "traces": [str(t) for t in v.traces] if run.out_dir else [],
            "findings": [_finding(f) for f in sorted_findings(v.report.findings if v.report else [])],
        })
    data = {"schema_version": SCHEMA_VERSION, "device": run.device, "seconds": run.seconds,
            "all_as_expected": run.all_as_expected, "metadata": run.metadata, "workloads": verdicts,
            "not_run": [{"workload": name, "reason": why} for name, why in getattr(run, "not_run", [])]}
    if run.baseline_report is not None:
        report = run.baseline_report
        data["baseline"] = {"trace": report.trace, "failed": run.baseline_failed, "warnings": report.warnings,
                            "verdicts": {o.rule: o.status for o in report.outcomes},
                            "findings": [_finding(f) for f in sorted_findings(report.findings)]}
    return _dumps(data)


def render_replay(result, ctx: RenderContext | None = None) -> str:
    return _dumps({"all_as_expected": result.all_as_expected, "cases": [
        {"rule": r.case.rule, "case": r.case.spec.name, "expected": r.case.spec.expect,
         "verdict": r.outcome.status if r.outcome else None, "problems": r.problems,
         "findings": [_finding(f) for f in sorted_findings(r.outcome.findings)] if r.outcome else [],
         "suppressed": [{**_finding(s.finding), "how": s.how, "reason": s.reason} for s in r.suppressed]}
        for r in result.results]})


def render_statistics(result: CheckResult, ctx: RenderContext | None = None) -> str:
    """`--statistics --format json`: the per-rule counts (text's table) and what could not be checked."""
    import dataclasses

    from kernlint.report.text_format import rule_statistics

    data = {"schema_version": 1, "exit_code": result.exit_code,
            "statistics": [dataclasses.asdict(s) for s in rule_statistics(result)],
            "findings": len(result.findings), "causes": len(causes_of(result)),
            "rules_incomplete": sorted({o.rule for _, o in result.incomplete}),
            "unreadable": len(result.unreadable)}
    return json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n"


# What this format renders (kernlint.report.builtin_formats declares it).
RENDERER = Renderer(check=render, audit=render_audit, replay=render_replay, statistics=render_statistics)
