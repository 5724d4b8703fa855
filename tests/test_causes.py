"""One finding per cause (issue 35, item 3): the findings of one rule at one source line and event kind, across
layers, repeats, steps and ranks, are one cause shown once with its instances in every format; findings of
other rules on the same events share a group; the exit code is decided on the findings, as before."""
from __future__ import annotations

import io
import json
import math
import re
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner
from rich.console import Console

from conftest import FIXTURES, REPO
from kernlint.cli import main
from kernlint.pipeline import CheckRequest, Execution, Inputs, run_check
from kernlint.report import renderer
from kernlint.rules.loader import load_rules
from kernlint.rules.result import CheckResult, Finding, RuleOutcome, TraceReport

GRAPHS = FIXTURES / "traces" / "gpu-graphs"
# The new_ones placeholder of 8 FP8 linears, run eagerly and replayed from a CUDA graph, in two recordings:
# 64 KL001 findings, every one at the same line.
PLACEHOLDER = [GRAPHS / "graph-new-ones-in-window.pt.trace.json.gz",
               GRAPHS / "graph-new-ones-two-stream.pt.trace.json.gz"]
LINE = "fixtures/regressed/fp8_linear_new_ones.py:18"   # the `return x.new_ones(1)` of the def at 17
AUDIT = FIXTURES / "traces" / "gpu-audit"
DUMMY_INIT_OLD = FIXTURES / "traces" / "gpu" / "dummy_init_old.pt.trace.json.gz"
NO_STACKS_STEPS = FIXTURES / "traces" / "gpu-decode" / "decode-pageable-upload-steps.pt.trace.json.gz"


@pytest.fixture(autouse=True)
def _at_repository_root(monkeypatch):
    monkeypatch.chdir(REPO)


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def placeholder() -> CheckResult:
    """The 64 findings of KL001, checked once (with the events, for the HTML report). The graph decoder's
    RMSNorm is a chain of kernels (KL902's findings): a cause of its own, left out here."""
    from kernlint.rules.sources import source_map, with_mapped_sources
    from kernlint.rules.statements import SourceStatements, with_statement_lines

    rules = [r for r in load_rules() if r.id == "KL001"]
    result = run_check(CheckRequest(rules=rules, inputs=Inputs(paths=[p.relative_to(REPO) for p in PLACEHOLDER]),
                                    execution=Execution(keep_tables=True)))
    # as the CLI does: the recorded file in the checkout, at the statement that issued the op
    return with_statement_lines(with_mapped_sources(result, source_map(REPO)), SourceStatements(REPO))


def text_of(renderable) -> str:
    if isinstance(renderable, str):
        return renderable
    console = Console(file=io.StringIO(), width=400, no_color=True)
    console.print(renderable)
    return console.file.getvalue()


def test_the_fixture_is_64_findings_at_one_line(placeholder):
    findings = placeholder.findings
    assert len(findings) == 64 and {(f.rule, f.source, f.event_kind) for f in findings} == {("KL001", LINE, "kernel")}
    assert len({f.scope for f in findings}) == 8 and placeholder.exit_code == 1


def test_github_gives_one_annotation_per_line_and_rule(placeholder):
    lines = renderer("github")(placeholder).splitlines()
    assert len(lines) <= 2   # GitHub shows 10 annotations a step; today's main gave 64
    (line,) = lines
    assert line.startswith("::error file=fixtures/regressed/fp8_linear_new_ones.py,line=18,title=KL001 ")
    assert "64 instances: 8 scopes (module Fp8BlockLinearNewOnes_0" in line and "2 traces" in line


def test_the_cli_exit_code_is_decided_on_the_findings():
    result = cli("check", *PLACEHOLDER, "--format", "github", "--isolated", "--select", "KL001")
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1


def test_sarif_has_one_result_per_cause_with_its_instances(placeholder):
    log = json.loads(renderer("sarif")(placeholder))
    (result,) = log["runs"][0]["results"]
    assert result["ruleId"] == "KL001" and result["locations"][0]["physicalLocation"]["region"]["startLine"] == 18
    props = result["properties"]
    assert props["instances"] == 64 and len(props["scopes"]) == 8 and len(props["traces"]) == 2
    assert "graph replay 1" in props["steps"]
    assert len(result["relatedLocations"]) == 64 and "64 instances" in result["message"]["text"]
    assert props["deviceTimeUsTotal"] == pytest.approx(math.fsum(f.device_us for f in placeholder.findings))


def test_json_lists_each_cause_with_its_instances(placeholder):
    data = json.loads(renderer("json")(placeholder))
    assert data["summary"]["findings"] == 64 and data["summary"]["causes"] == 1
    (cause,) = data["causes"]
    assert cause["key"] == {"rule": "KL001", "source": LINE, "event_kind": "kernel"}
    assert cause["count"] == 64 and len(cause["instances"]) == 64 and len(cause["scopes"]) == 8
    assert sorted(i["finding"] for i in cause["instances"]) == list(range(64))
    assert all(f["cause"] == 0 for f in data["findings"])
    worst = data["findings"][cause["representative"]]
    assert worst["device_us"] == max(f["device_us"] for f in data["findings"])
    assert {i["step"] for i in cause["instances"]} >= {None, "graph replay 1"}


def test_text_shows_one_block_with_the_instance_count(placeholder):
    text = text_of(renderer("text")(placeholder))
    assert len(re.findall(r"^  KL001 fill-before-block-quant", text, re.M)) == 1, text
    assert "(64 instances)" in text and "64 instances: 8 scopes" in text
    assert "Found 64 finding(s) in 2 trace(s) with" in text and ": 1 cause." in text
    concise = renderer("concise")(placeholder).splitlines()
    assert len(concise) == 2 and concise[0].startswith(f"{LINE}: KL001 [error] ") and "(64 instances)" in concise[0]


def test_html_has_one_card_with_its_instances_and_one_timeline(placeholder):
    page = renderer("html")(placeholder)
    assert page.count('class="kl-finding') == 1
    assert "64 instances: 8 scopes" in page and '<span class="pill">64 times</span>' in page
    assert page.count('class="kl-instance"') == 21            # the one shown and 20 more (MAX_INSTANCES)
    # the worst instance's timeline, drawn once: today's main drew one per layer of each trace
    assert re.findall(r'id="(tl-\d+-\d+)"', page) == ["tl-0-0"] and page.count("▼ offending") == 1


def test_junit_lists_each_cause_once_in_each_failure(placeholder):
    root = ET.fromstring(renderer("junit")(placeholder).encode("utf-8"))
    failures = [c.find("failure") for c in root.iter("testcase") if c.find("failure") is not None]
    assert len(failures) == 2   # one failed rule verdict in each trace
    for failure in failures:
        assert re.match(r"^32 finding\(s\) in 1 cause\(s\): ", failure.get("message"))
        assert failure.text.count(f"source: {LINE}") == 1 and "32 instances: 8 scopes" in failure.text
        assert failure.text.count("\n  - scope: ") == 32


def test_markdown_has_one_row_per_cause(placeholder):
    out = renderer("markdown")(placeholder)
    assert out.startswith("## kernlint: 64 finding(s) (1 cause) in 2 trace(s)")
    rows = [line for line in out.splitlines() if line.startswith("| KL001 | error |")]
    assert len(rows) == 1 and "64 instances" in rows[0]


def test_statistics_count_causes_and_findings():
    result = cli("check", "--statistics", *PLACEHOLDER, "--isolated", "--select", "KL001")
    lines = result.output.splitlines()
    assert re.match(r"^causes\s+findings\s+rule\s+name\s+device time\s+bytes\s+cost$", lines[0]), lines
    assert re.match(r"^\s*1\s+64\s+KL001\s+fill-before-block-quant\s", lines[1]), lines
    data = json.loads(cli("check", "--statistics", "--format", "json", *PLACEHOLDER, "--isolated", "--select",
                          "KL001").output)
    (row,) = data["statistics"]
    assert row["causes"] == 1 and row["count"] == 64 and data["causes"] == 1 and data["findings"] == 64


def test_the_three_kl002_blocks_of_dummy_init_old_are_one():
    result = cli("check", DUMMY_INIT_OLD.relative_to(REPO), "--isolated", "--select", "KL002")
    assert result.exit_code == 1
    assert result.output.count("KL002 fp8-temporary-in-dummy-init [error]") == 1, result.output
    assert "(3 instances)" in result.output and "cost in all: 768.0 KiB allocated" in result.output
    sarif = json.loads(cli("check", DUMMY_INIT_OLD.relative_to(REPO), "--format", "sarif", "--isolated", "--select",
                           "KL002").output)
    (kl002,) = sarif["runs"][0]["results"]
    assert kl002["properties"]["instances"] == 3


def test_kl001_and_kl801_on_one_fill_share_a_group_and_kl801_has_its_time(tmp_path):
    baseline = tmp_path / "baseline.json"
    assert cli("baseline", "record", AUDIT / "fp8-block-linear.pt.trace.json.gz", "-o", baseline,
               "--isolated").exit_code == 0
    candidate = AUDIT / "fp8-block-linear-new-ones.pt.trace.json.gz"
    result = cli("check", candidate, "--baseline", baseline, "--format", "json", "--isolated")
    data = json.loads(result.output)
    kl001 = [f for f in data["findings"] if f["rule"] == "KL001"]
    kl801 = [f for f in data["findings"] if f["rule"] == "KL801"]
    assert len(kl001) == len(kl801) == 9
    assert all(isinstance(f["ts"], float) and f["group"] for f in kl801)
    assert {f["group"] for f in kl801} == {f["group"] for f in kl001}
    by_group = {f["group"]: f for f in kl001}
    assert all(by_group[f["group"]]["ts"] == f["ts"] for f in kl801)   # the same fill kernel
    assert data["summary"]["causes"] == 2
    text = cli("check", candidate, "--baseline", baseline, "--isolated").output
    assert "+ same problem as KL001: KL801 launch-added" in text
    assert "18 finding(s) in 1 trace(s) with" in text and ": 2 causes, 1 problem to act on." in text


def test_without_stacks_a_cause_is_the_rule_the_scope_less_its_numbering_and_the_event():
    from kernlint.rules.causes import cause_key, causes_of

    rules = [r for r in load_rules() if not r.needs_baseline]
    result = run_check(CheckRequest(rules=rules, inputs=Inputs(paths=[NO_STACKS_STEPS.relative_to(REPO)])))
    assert len(result.findings) == 9 and all(f.source is None for f in result.findings)
    causes = causes_of(result)
    assert [(c.rule, c.count) for c in causes] == [("KL401", 3), ("KL501", 3), ("KL502", 3)]
    assert causes[0].key == ("KL401", "annotation ProfilerStep#N", "cudaStreamSynchronize",
                             "decode-pageable-upload-steps.pt.trace.json.gz")
    assert all(c.steps == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"] for c in causes)
    assert cause_key(result.findings[0])[1] == "annotation ProfilerStep#N"


def _finding(**changes) -> Finding:
    base = dict(rule="KL001", name="fill-before-block-quant", severity="error", message="a fill runs first",
                trace="run/rank0.json", scope="module Linear_0", event="fill", event_kind="kernel",
                event_category="fill", launch_op="aten::fill_", top_op="aten::new_ones", source="pkg/linear.py:17",
                anchor="scale_1x128_kernel", ts=1.0, device_us=1.0)
    return Finding(**{**base, **changes})


def test_the_key_and_the_worst_instance():
    from kernlint.rules.causes import group_causes, normalized_scope

    assert normalized_scope("the profiled window (no hot scope in the trace, thread 501:501)") == \
        "the profiled window (no hot scope in the trace, thread PID:TID)"
    assert normalized_scope("module model.layers.7.mlp") == normalized_scope("module model.layers.3.mlp")
    assert normalized_scope("graph replay 2 of capture 2") == normalized_scope("graph replay 1 of capture 1")
    findings = [
        _finding(scope="module Linear_0", rank=0),
        _finding(scope="module Linear_1", rank=1, severity="info", context="warm-up", device_us=9.0),
        _finding(scope="module Linear_1", rank=1, ts=2.0, device_us=3.0),
        _finding(event_kind="memcpy", ts=3.0),                        # another event kind at the line
        _finding(source=None, scope="module Linear_3", ts=4.0),       # no stacks: by scope and event
        _finding(source=None, scope="module Linear_4", ts=5.0),
        _finding(rule="KL002", ts=6.0),
    ]
    causes = group_causes(findings)
    assert [(c.key, c.count) for c in causes] == [
        (("KL001", "pkg/linear.py:17", "kernel"), 3), (("KL001", "pkg/linear.py:17", "memcpy"), 1),
        (("KL001", "module Linear_N", "fill", "rankN.json"), 2), (("KL002", "pkg/linear.py:17", "kernel"), 1)]
    first = causes[0]
    # the worst: an error before an info (whatever its device time), then the most device time
    assert first.representative.severity == "error" and first.representative.device_us == 3.0
    assert first.context is None and first.ranks == [0, 1] and first.device_us == 13.0
    assert first.scopes == ["module Linear_0", "module Linear_1"]


def test_grouping_never_hides_a_failing_finding():
    """The exit code and verdicts are the findings'; a cause is failing when any of its instances is."""
    from kernlint.rules.causes import group_causes
    from kernlint.rules.result import exit_status
    from kernlint.rules.severity import SEVERITY_ORDER

    findings = [_finding(severity="info", context="warm-up", device_us=50.0), _finding(ts=2.0)]
    report = TraceReport(trace="run/rank0.json", events=1, has_device_events=True, has_stacks=True, rank=None,
                         outcomes=[RuleOutcome("KL001", "fill-before-block-quant", "error", "failed",
                                               findings=findings)])
    (cause,) = group_causes(findings)
    assert cause.severity == "error" and cause.fails_at(SEVERITY_ORDER["warning"]) and cause.context is None
    assert exit_status([report]) == 1


def test_without_stacks_the_ranks_of_one_program_are_one_cause_and_other_programs_are_not():
    from kernlint.rules.causes import causes_of

    external = FIXTURES / "external"
    paths = [external / "kineto__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",
             external / "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
             external / "hta__trace_filter_2rank"]
    rules = [r for r in load_rules() if r.id == "KL501"]
    result = run_check(CheckRequest(rules=rules, inputs=Inputs(paths=paths)))
    causes = causes_of(result)
    # Every finding has no source line and the same scope and event name (`Memcpy HtoD` in `ProfilerStep#N`):
    # one cause per program, not one of 46 instances mixing a ResNet, an MLP and a recommender.
    assert {c.count for c in causes} == {12, 2, 32} and len(causes) == 3
    (ranks,) = [c for c in causes if c.count == 32]
    assert ranks.ranks == [0, 1] and len(ranks.traces) == 2
    assert {c.severity for c in causes if c.count == 32} == {"info"}   # negligible on both ranks
