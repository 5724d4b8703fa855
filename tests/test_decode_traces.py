"""Decode steps the rules were not tuned on (scripts/decode_traces.py: its own model, its own names), clean and
with one injected regression each, in four recording styles. What must hold: each regression is caught by its
family (and only the families it really shows), every clean step gives no finding, and severity follows the
evidence (an error inside a step range, a warning when the trace shows no step).

GPU traces: fixtures/traces/gpu-decode (recorded on the H200). CPU traces: recorded here.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernlint.checkout import import_path
from kernlint.rules.engine import check_trace
from kernlint.rules.families import family_of
from kernlint.rules.loader import load_rules
from kernlint.trace.load import load_trace

ROOT = Path(__file__).resolve().parent.parent
GPU_DIR = ROOT / "fixtures" / "traces" / "gpu-decode"
RULES = [r for r in load_rules() if not r.needs_baseline]
decode_traces = import_path(ROOT / "scripts" / "decode_traces.py", "decode_traces")

# The families each variant shows on a GPU trace. A pageable upload is also a host sync (the copy waits), so
# it is R4 and R5. Exceptions by style below.
GPU_FAMILIES = {
    "clean": set(), "item-sync": {"R4"}, "tolist-sync": {"R4"}, "forced-sync": {"R4"},
    "pageable-upload": {"R4", "R5"}, "host-tensor-upload": {"R4", "R5"}, "round-trip": {"R3"},
}
# On the CPU: no device, so no upload, no DtoH copy and no synchronize; `.item()` and a boolean-mask read
# still show as the ops that would sync. `torch.tensor(list)` shows (KL502, R5).
CPU_FAMILIES = {
    "clean": set(), "item-sync": {"R4"}, "mask-sync": {"R4"}, "tolist-sync": set(),
    "pageable-upload": {"R5"}, "host-tensor-upload": set(), "round-trip": {"R3"},
}


def expected(families: dict, variant: str, style: str) -> set[str]:
    want = set(families[variant])
    if style == "plain":
        # No shapes: a cast's dtypes and a lifted tensor's size are unknown, so R3 and KL502 cannot decide.
        want.discard("R3")
        if variant == "pageable-upload" and families is CPU_FAMILIES:
            want.discard("R5")
    return want


def failed_families(outcomes) -> set[str]:
    return {family_of(RULES_BY_ID[o.rule].spec.tags).key for o in outcomes if o.status == "failed"}


RULES_BY_ID = {r.id: r for r in RULES}
GPU_TRACES = sorted(GPU_DIR.glob("decode-*.pt.trace.json.gz"))
NAME = re.compile(r"^decode-(?P<variant>.+)-(?P<style>steps|range|modules|plain)\.pt\.trace\.json\.gz$")


def test_every_variant_and_style_was_recorded_on_the_gpu():
    seen = {(m["variant"], m["style"]) for m in (NAME.match(p.name) for p in GPU_TRACES)}
    assert seen == {(v, s) for v in GPU_FAMILIES for s in decode_traces.STYLES}


@pytest.mark.parametrize("path", GPU_TRACES, ids=[p.name for p in GPU_TRACES])
def test_gpu_decode_step_is_caught_by_family_and_only_by_it(path):
    m = NAME.match(path.name)
    report = check_trace(load_trace(path), RULES)
    assert not [o for o in report.outcomes if o.status == "incomplete"], "a verdict rests on damaged events"
    assert failed_families(report.outcomes) == expected(GPU_FAMILIES, m["variant"], m["style"]), [
        (o.rule, [f.message for f in o.findings]) for o in report.outcomes if o.status == "failed"]
    _severity_follows_the_evidence(report, m["style"])


def _severity_follows_the_evidence(report, style: str):
    for o in report.outcomes:
        for f in o.findings:
            if f.rule not in ("KL401", "KL501"):
                continue
            if style in ("steps", "range"):       # inside ProfilerStep#N / decode_step: the rule's severity
                assert f.severity == "error" and not f.scope.startswith("the profiled window"), f
            else:                                 # no step in the trace; the sync is outside the model
                assert f.severity == "warning" and f.scope.startswith("the profiled window"), f


def test_the_large_clean_decode_traces_give_no_finding():
    large = sorted(GPU_DIR.glob("large-decode-clean-*.pt.trace.json.gz"))
    assert len(large) == 2
    for path in large:
        table = load_trace(path)
        assert len(table) > 20_000, "the guard needs a large trace"
        report = check_trace(table, RULES)
        assert [o.rule for o in report.outcomes if o.status in ("failed", "incomplete")] == [], path.name
        # They did judge it: passed, or not applicable because the clean trace holds nothing of the rule's
        # kind (no fill, no cast, no sync, no upload: issue 24, cause 9), never for want of a scope or
        # evidence. KL701 needs layers: the range style has stacks; the steps style only ProfilerStep#N.
        judged = {o.rule for o in report.outcomes if o.status == "passed"
                  or (o.status == "not-applicable" and "nothing of the rule's kind" in (o.reason or ""))}
        must = {"KL101", "KL202", "KL302", "KL401", "KL501"} | ({"KL701"} if "range" in path.name else set())
        assert must <= judged, (path.name, sorted(must - judged))
        assert ({"KL701"} if "range" in path.name else set()) <= {
            o.rule for o in report.outcomes if o.status == "passed"}


@pytest.fixture(scope="module")
def cpu_traces(tmp_path_factory):
    out = tmp_path_factory.mktemp("decode-cpu")
    traces = {}
    for variant in CPU_FAMILIES:
        for style in decode_traces.STYLES:
            traces[variant, style] = decode_traces.record(
                # one layer shows each family as four do (each test asserts it), in a third of the time; so does
                # a 1,024-token vocabulary (the families are in the blocks and the step, not in the head's size)
                variant, style, "cpu", out / f"decode-{variant}-{style}.pt.trace.json.gz", steps=2, layers=1,
                vocab=1024)
    return traces


@pytest.mark.parametrize("variant", sorted(CPU_FAMILIES))
def test_cpu_decode_step_is_caught_by_family_and_only_by_it(cpu_traces, variant):
    for style in decode_traces.STYLES:
        report = check_trace(load_trace(cpu_traces[variant, style]), RULES)
        assert failed_families(report.outcomes) == expected(CPU_FAMILIES, variant, style), (style, [
            (o.rule, [f.message for f in o.findings]) for o in report.outcomes if o.status == "failed"])
