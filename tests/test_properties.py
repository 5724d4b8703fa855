"""Property-based tests (hypothesis) on the loader and the engine, bounded in time for CI:

- random event streams never crash them: a trace loads and checks, or it is one TraceError;
- the verdict does not change with the order of events;
- a damaged regressed trace is never "passed": with a field made unusable or a launch, kernel or runtime
  event removed, KL001 still fails, or says it could not fully check, or that its anchor is absent.

Run longer with `KERNLINT_FUZZ_EXAMPLES=20000 pytest tests/test_properties.py` (bench/fuzz notes).
"""
from __future__ import annotations

import copy
import functools
import gzip
import json
import os
import random
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from kernlint.errors import TraceError
from kernlint.rules.engine import check_traces
from kernlint.rules.loader import load_rules
from kernlint.trace import nesting
from kernlint.trace.load import discover_traces, load_trace

EXAMPLES = int(os.environ.get("KERNLINT_FUZZ_EXAMPLES", "60"))
PROFILE = settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("CI") == "true",
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
RULES = load_rules()
KL001 = [r for r in RULES if r.id == "KL001"]
_NEST = nesting.nest_host_events
REGRESSED = json.loads(gzip.decompress((FIXTURES / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz")
                                       .read_bytes()))

junk = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**80, max_value=2**80),
                 st.floats(allow_nan=False), st.text(max_size=8), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
names = st.sampled_from(["scale_1x128_kernel", "aten::fill_", "cudaLaunchKernel", "cuLaunchKernelEx",
                         "nn.Module: Linear_0", "x.py(3): f", "[memory]", "ProfilerStep#1", "execute_model",
                         "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()",
                         "Memcpy DtoH (Device -> Pageable)", "cudaStreamSynchronize", "aten::item"])
cats = st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "cuda_driver", "user_annotation", "python_function",
                        "gpu_memcpy", "gpu_memset", "cpu_instant_event", "ac2g", "Trace", "weird"])
small = st.one_of(st.integers(min_value=-5, max_value=300), st.floats(min_value=-5, max_value=300), junk)
args = st.fixed_dictionaries({}, optional={"correlation": small, "External id": small, "Bytes": small,
                                           "Addr": small, "Device Type": small, "Device Id": small,
                                           "device": small, "stream": small, "Input type": junk,
                                           "Concrete Inputs": junk})
event = st.fixed_dictionaries({"ph": st.sampled_from(["X", "i", "M", "s", "f", "B"])},
                              optional={"cat": st.one_of(cats, junk), "name": st.one_of(names, junk),
                                        "pid": st.one_of(st.integers(0, 3), junk),
                                        "tid": st.one_of(st.integers(0, 3), junk),
                                        "ts": small, "dur": small, "args": st.one_of(args, junk)})
top = st.fixed_dictionaries({"traceEvents": st.lists(event, max_size=40)},
                            optional={"distributedInfo": st.one_of(junk, st.fixed_dictionaries(
                                {"rank": small, "world_size": small})), "deviceProperties": junk,
                                "baseTimeNanoseconds": small, "profile_memory": junk, "with_stack": junk})


def _write(tmp_path, data, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@PROFILE
@given(data=top)
def test_random_event_streams_never_crash_the_loader_or_the_engine(tmp_path_factory, data):
    path = _write(tmp_path_factory.mktemp("fuzz"), data)
    try:
        table = load_trace(path)
    except TraceError:
        return
    for report in check_traces([table], RULES):
        for outcome in report.outcomes:
            assert outcome.status in ("failed", "passed", "not-applicable", "incomplete")


def _verdicts(path):
    reports = check_traces([load_trace(path)], RULES)
    return sorted((o.rule, o.status, tuple(sorted((f.event, f.scope, f.source or "", f.anchor or "")
                                                  for f in o.findings)))
                  for r in reports for o in r.outcomes)


@PROFILE
@given(seed=st.integers(0, 2**32 - 1))
def test_the_verdict_does_not_change_with_the_order_of_events(tmp_path_factory, seed):
    folder = tmp_path_factory.mktemp("order")
    baseline = _verdicts(_write(folder, REGRESSED, "a.json"))
    shuffled = copy.deepcopy(REGRESSED)
    random.Random(seed).shuffle(shuffled["traceEvents"])
    assert _verdicts(_write(folder, shuffled, "b.json")) == baseline


_ESSENTIAL = ("kernel", "cuda_runtime", "cuda_driver", "cpu_op", "python_function")


@st.composite
def damage(draw):
    """One damaging change to the regressed trace: an essential field made unusable, or a launch, a kernel
    or a runtime event removed, or every correlation id made equal."""
    data = copy.deepcopy(REGRESSED)
    events = data["traceEvents"]
    relevant = [i for i, e in enumerate(events) if e.get("cat") in _ESSENTIAL]
    how = draw(st.sampled_from(["field", "remove", "same-correlation", "duplicate", "equal-ts", "repeated-key"]))
    if how == "duplicate":   # one essential event (the anchor, the fill, a launch...) or every kernel, twice
        if draw(st.booleans()):
            events += [dict(e) for e in events if e.get("cat") == "kernel"]
        else:
            events.append(copy.deepcopy(events[draw(st.sampled_from(relevant))]))
        return data
    if how == "equal-ts":   # every ts, or all but a few, one value
        keep = draw(st.sets(st.sampled_from(relevant), max_size=3))
        value = draw(st.sampled_from([0, 1_000_000, 1.5]))
        for i, e in enumerate(events):
            if "ts" in e and i not in keep:
                e["ts"] = value
        return data
    if how == "repeated-key":   # a key of one event (or of its args) written twice, the second value another
        i = draw(st.sampled_from(relevant))
        inner = draw(st.booleans()) and isinstance(events[i].get("args"), dict) and "correlation" in events[i]["args"]
        key = "correlation" if inner else draw(st.sampled_from(["ts", "dur", "name", "cat", "pid", "tid"]))
        other = draw(st.sampled_from([0, 12_345, "aten::mm", 9e9]))
        return RepeatedKey(data, i, key, other, inner)
    if how == "same-correlation":
        for e in events:
            if isinstance(e.get("args"), dict) and "correlation" in e["args"]:
                e["args"]["correlation"] = 7
        return data
    i = draw(st.sampled_from(relevant))
    if how == "remove":
        if events[i].get("cat") not in ("kernel", "cuda_runtime", "cuda_driver"):
            i = draw(st.sampled_from([j for j in relevant if events[j]["cat"] in ("kernel", "cuda_runtime",
                                                                                   "cuda_driver")]))
        del events[i]
        return data
    field = draw(st.sampled_from(["ts", "dur", "pid", "tid", "cat", "name", "correlation"]))
    unusable = [st.none(), st.floats(min_value=0.1, max_value=0.9), st.lists(st.integers(), min_size=1, max_size=2),
                st.integers(max_value=-1)]
    if field not in ("cat", "name"):  # another string there is a valid, different trace, not a damaged one
        unusable.append(st.text(min_size=1, max_size=4).filter(lambda s: not s.strip().isdigit()))
    value = draw(st.one_of(*unusable))
    if field == "correlation":
        if not isinstance(events[i].get("args"), dict) or "correlation" not in events[i]["args"]:
            return data
        events[i]["args"]["correlation"] = value
    else:
        events[i][field] = value
    return data


class RepeatedKey:
    """A trace whose event `index` holds `key` twice (in its args for `inner`): JSON that dicts cannot hold,
    written as text."""

    def __init__(self, data: dict, index: int, key: str, other, inner: bool):
        self.data, self.index, self.key, self.other, self.inner = data, index, key, other, inner

    def __getitem__(self, name):
        return self.data[name]

    def text(self) -> str:
        events = self.data["traceEvents"]
        target = events[self.index]
        extra = f", {json.dumps(self.key)}: {json.dumps(self.other)}"
        if self.inner:
            args = json.dumps(target["args"])
            body = json.dumps({k: v for k, v in target.items() if k != "args"})
            one = body[:-1] + ', "args": ' + args[:-1] + extra + "}}"
        else:
            one = json.dumps(target)[:-1] + extra + "}"
        parts = [one if i == self.index else json.dumps(e) for i, e in enumerate(events)]
        rest = json.dumps({k: v for k, v in self.data.items() if k != "traceEvents"})
        return '{"traceEvents": [' + ", ".join(parts) + "], " + rest[1:]


@PROFILE
@given(damaged=damage(), shuffle=st.randoms(use_true_random=False))
def test_a_damaged_regressed_trace_is_never_passed(tmp_path_factory, damaged, shuffle):
    if isinstance(damaged, RepeatedKey):
        path = tmp_path_factory.mktemp("damaged") / "t.json"
        path.write_text(damaged.text())
    else:
        if shuffle.random() < 0.3:   # the order of events in the file says nothing: reordered, still caught
            shuffle.shuffle(damaged["traceEvents"])
        path = _write(tmp_path_factory.mktemp("damaged"), damaged)
    try:
        table = load_trace(path)
    except TraceError:
        return
    (report,) = check_traces([table], KL001)
    (outcome,) = report.outcomes
    assert outcome.status != "passed", (outcome, report.damage, _changes(damaged))
    if outcome.status == "not-applicable":
        assert outcome.subject_absent, (outcome, _changes(damaged))


def _changes(damaged) -> list:
    """What the damage changed in the regressed trace, for the failure message."""
    if isinstance(damaged, RepeatedKey):
        return [("repeated key", damaged.data["traceEvents"][damaged.index], damaged.key, damaged.other)]
    before, after = REGRESSED["traceEvents"], damaged["traceEvents"]
    if len(before) != len(after):
        gone = [e for e in before if e not in after]
        return [("removed", e) for e in gone]
    return [(a, b) for a, b in zip(before, after) if a != b]


host_event = st.fixed_dictionaries({
    "ph": st.just("X"),
    "cat": st.sampled_from(["cpu_op", "user_annotation", "python_function", "cuda_runtime", "cpu_instant_event"]),
    "name": st.sampled_from(["aten::mm", "aten::fill_", "fwd", "nn.Module: Linear_0", "model.py(3): forward",
                             "torch/nn/modules/module.py(1): _call_impl", "cudaLaunchKernel", "[memory]"]),
    "pid": st.just(1), "tid": st.integers(1, 2),
    "ts": st.integers(0, 30).map(float), "dur": st.sampled_from([0.0, 0.5, 1.0, 3.0, 7.0, 20.0, 1e-9]),
})


@PROFILE
@given(events=st.lists(host_event, min_size=1, max_size=60))
def test_nesting_by_counting_matches_the_stack_walk(tmp_path_factory, events):
    """Intervals drawn on a small grid (nested, disjoint, partly overlapping, equal, zero-length): the
    counting path (or its fallback where a kind does not nest properly) gives what the walk gives."""
    path = _write(tmp_path_factory.mktemp("nest"), {"traceEvents": events})
    frames = []
    try:
        for vectorized in (True, False):
            nesting.nest_host_events = functools.partial(_NEST, vectorized=vectorized)
            frames.append(load_trace(path).frame)
    finally:
        nesting.nest_host_events = _NEST
    columns = ["op", "parent_op", "top_op", "annotation", "module", "frame", "user_frame", "library_frame"]
    assert frames[0][columns].equals(frames[1][columns])


@st.composite
def rank_identities(draw):
    """Traces that claim ranks of a run: ranks, world sizes, hosts, pids, time windows and step sets that
    often agree (one run) and sometimes do not (a repeated rank, a shared pid, a late window, a backend)."""
    from kernlint.trace.runs import RunIdentity

    n = draw(st.integers(2, 7))
    world = draw(st.sampled_from([n, n + 1, None]))
    timed = draw(st.booleans())
    out = []
    for i in range(n):
        start = draw(st.sampled_from([0, 0, 5, 3_000_000_000])) if timed else None
        out.append(RunIdentity(
            path=f"r{i}.json", rank=draw(st.sampled_from([i, i, i, 0])),
            world_size=draw(st.sampled_from([world] * 5 + [2])),
            backend=draw(st.sampled_from(["nccl", "nccl", None, "gloo"])),
            pg_count=draw(st.sampled_from([1, 1, None, 2])),
            gpu_models=("H200",), host=draw(st.sampled_from(["a", "a", "b", None])),
            pids=(draw(st.sampled_from([100 + i, 100 + i, 100])),), start_ns=start,
            end_ns=None if start is None else start + draw(st.sampled_from([10, 1_000_000_000])),
            time_basis="epoch-us" if timed else None, steps=draw(st.sampled_from([(1, 2), (1, 2), (3,), ()]))))
    return out


@PROFILE
@given(rank_identities())
def test_the_one_run_shortcut_groups_as_the_pairwise_search_does(idents):
    """group_runs' O(N) path for one plain run gives what comparing every pair gives."""
    import dataclasses

    from kernlint.trace import runs

    def shape(grouping):
        return ([(g.ranks, [i.path for i in g.identities], g.evidence, g.notes) for g in grouping.groups],
                [dataclasses.astuple(u) for u in grouping.unmatched])

    fast = shape(runs.group_runs(idents))
    real = runs._one_obvious_run
    try:
        runs._one_obvious_run = lambda *a: None
        pairwise = shape(runs.group_runs(idents))
    finally:
        runs._one_obvious_run = real
    assert fast == pairwise


# -- what lies around the event list (issue 38: items 1, 3 and 6) -------------------------------------------
CLEAN = json.loads(gzip.decompress((FIXTURES / "traces" / "gpu" / "placeholder_new_empty.pt.trace.json.gz")
                                   .read_bytes()))


@st.composite
def escaped_events_key(draw) -> str:
    """"traceEvents" with some of its letters written as \\u00XX escapes (hex digits in either case)."""
    out = []
    for c in "traceEvents":
        if draw(st.booleans()):
            code = f"{ord(c):04x}"
            out.append("\\u" + (code.upper() if draw(st.booleans()) else code))
        else:
            out.append(c)
    escaped = "".join(out)
    return escaped if escaped != "traceEvents" else "trace\\u0045vents"


@dataclass(frozen=True)
class AroundTheEvents:
    """Something around a regressed trace's event list (kept small: the text is built from it): a second
    event list under an escaped key (before or after it, the other list clean or empty, with or without the
    literal string "traceEvents" elsewhere), a long first key, or a string of escaped quotes (closed, as JSON
    must be) before the events; `pad` bytes of it."""

    how: str
    pad: int
    escaped_key: str = ""
    regressed_first: bool = True
    other_clean: bool = True
    literal_elsewhere: bool = False

    @property
    def refused(self) -> bool:
        return self.how == "escaped-key"

    def text(self) -> str:
        regressed = json.dumps(REGRESSED["traceEvents"])
        if self.how == "escaped-key":
            other = json.dumps(CLEAN["traceEvents"]) if self.other_clean else "[]"
            first, second = (regressed, other) if self.regressed_first else (other, regressed)
            note = ', "note": "traceEvents"' if self.literal_elsewhere else ""
            return (f'{{"traceEvents": {first}, "otherData": {{"pad": "{"p" * self.pad}"{note}}}, '
                    f'"{self.escaped_key}": {second}}}')
        if self.how == "long-first-key":
            return f'{{"otherData": {{"pad": "{"o" * self.pad}"}}, "traceEvents": {regressed}}}'
        quotes = '\\"' * (self.pad // 2)
        return f'{{"otherData": {{"note": "{quotes}"}}, "traceEvents": {regressed}}}'


around_the_events = st.builds(AroundTheEvents, how=st.sampled_from(["escaped-key", "long-first-key", "escaped-quotes"]),
                              pad=st.integers(0, 200_000), escaped_key=escaped_events_key(),
                              regressed_first=st.booleans(), other_clean=st.booleans(),
                              literal_elsewhere=st.booleans())


@PROFILE
@given(case=around_the_events, stream_from=st.sampled_from([None, 4096]),
       search_up_to=st.sampled_from([None, 4096]))
def test_what_lies_around_the_events_never_passes_a_regressed_trace(tmp_path_factory, case, stream_from,
                                                                       search_up_to):
    """Read whole and streamed (stream_from: past 4 KB instead of 4 MB), with any key searched for repeats or
    only traceEvents (search_up_to): the trace is refused, or found in its folder and its fill caught."""
    from kernlint.trace import event_stream, load

    folder = tmp_path_factory.mktemp("around")
    path = folder / "t.json"
    path.write_text(case.text())
    with pytest.MonkeyPatch.context() as mp:
        if stream_from is not None:
            mp.setattr(event_stream, "STREAM_FROM_BYTES", stream_from)
        if search_up_to is not None:
            mp.setattr(load, "REPEATED_KEY_SEARCH_BYTES", search_up_to)
        assert discover_traces([folder]).files == [path]
        if case.refused:
            with pytest.raises(TraceError, match="'traceEvents' more than once"):
                load_trace(path)
            return
        (report,) = check_traces([load_trace(path)], KL001)
    (outcome,) = report.outcomes
    assert outcome.status == "failed", outcome
