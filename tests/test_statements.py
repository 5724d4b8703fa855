"""Precise source lines (issue 37, item 5; kernlint.rules.statements): a finding's source is refined from its
function's `def` line (what the profiler records) to the one statement of that function that issued the op,
where the file is in the checkout; otherwise the `def` line stays, and the finding says which."""
from __future__ import annotations

import json
import os

from conftest import REPO, kernlint_in
from kernlint.rules.result import Finding, RuleOutcome, TraceReport
from kernlint.rules.statements import SourceStatements, statement_line
from kernlint.rules.suppressions import apply_suppressions
from kernlint.trace.names import python_call_names

GPU = REPO / "fixtures" / "traces" / "gpu"
REGRESSED = "fixtures/traces/gpu/block_regressed.pt.trace.json.gz"   # KL001 at the def of _placeholder_scale (17)
NEW_ONES = GPU / "placeholder_new_ones.pt.trace.json.gz"             # one KL001, same function

PROGRAM = '''\
import torch


class Layer(torch.nn.Module):
    def forward(self, x):          # line 5
        y = x * 2
        # the placeholder
        scale = y.new_ones(1)      # line 8
        return y * scale

    def twice(self, x):            # line 11
        a = x.new_ones(1)
        b = torch.new_ones(x, 1)
        return a + b

    @torch.no_grad()               # line 16: a decorated function's frame starts at its decorator
    def value(self, x):
        def inner(t):
            return t.item()        # another frame: not this function's statement
        return x.sum().item(       # line 20: a statement over two lines is named by its first
        )

    def cast(self, x):             # line 23
        if x.dtype != torch.float32:
            x = x.to(torch.float32)
        return x
'''


def finding(source: str | None, top_op: str | None = "aten::new_ones", launch_op: str | None = "aten::fill_",
            function: str | None = None) -> Finding:
    return Finding(rule="KL001", name="fill-before-block-quant", severity="error", message="m", trace="t.json",
                   scope="module Layer_0", event="vectorized_elementwise_kernel[FillFunctor<float>]",
                   event_kind="kernel", event_category="fill", launch_op=launch_op, top_op=top_op, source=source,
                   anchor=None, ts=0.0, function=function)


def program(tmp_path):
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "model.py").write_text(PROGRAM)
    return SourceStatements(tmp_path)


def test_the_op_names_come_from_the_names_table():
    assert python_call_names("aten::new_ones") == ("new_ones",)
    assert python_call_names("aten::add.Tensor") == ("add",)
    assert "to" in python_call_names("aten::_to_copy") and "to" in python_call_names("aten::to")
    assert "item" in python_call_names("aten::_local_scalar_dense")
    assert python_call_names("ProfilerStep#1") == () and python_call_names(None) == ()


def test_the_statement_line_replaces_the_def_line(tmp_path):
    statements = program(tmp_path)
    before = finding("pkg/model.py:5", function="forward")
    after = statements.refined(before)
    assert after.source == "pkg/model.py:8"
    assert after.details == {"source_line": "statement", "def_line": 5}
    assert after.fingerprint == before.fingerprint   # the same key whether or not the file was found
    # aliases from the names table; the launching op only where the outer op has no Python name
    assert statements.refined(finding("pkg/model.py:23", top_op="aten::to", launch_op="aten::copy_")).source \
        == "pkg/model.py:25"
    assert statements.refined(finding("pkg/model.py:23", top_op="autograd::engine::evaluate_function: X",
                                      launch_op="aten::_to_copy")).source == "pkg/model.py:25"
    assert statements.refined(finding("pkg/model.py:5", top_op="aten::zeros")).source == "pkg/model.py:5"
    assert statements.refined(finding("pkg/model.py:16", top_op="aten::item", launch_op=None)).source \
        == "pkg/model.py:20"


def test_an_ambiguous_function_keeps_the_def_line_and_says_so(tmp_path):
    statements = program(tmp_path)
    kept = statements.refined(finding("pkg/model.py:11", function="twice"))
    assert kept.source == "pkg/model.py:11" and kept.details == {"source_line": "function"}
    # no call of the op in the function, or no function at the line: the def line too
    assert statements.refined(finding("pkg/model.py:23")).source == "pkg/model.py:23"
    assert statements.refined(finding("pkg/model.py:6")).details == {"source_line": "function"}


def test_a_missing_unreadable_or_outside_file_keeps_the_def_line(tmp_path):
    statements = program(tmp_path)
    missing = statements.refined(finding("pkg/gone.py:5"))
    assert missing.source == "pkg/gone.py:5" and missing.details == {"source_line": "function"}
    outside = tmp_path.parent / f"{tmp_path.name}-outside.py"
    outside.write_text(PROGRAM)
    try:
        assert statements.line_of(f"{outside}:5", ["aten::new_ones"]) is None               # absolute, outside
        assert statements.line_of(f"../{outside.name}:5", ["aten::new_ones"]) is None       # relative, outside
        os.symlink(outside, tmp_path / "pkg" / "link.py")
        assert statements.line_of("pkg/link.py:5", ["aten::new_ones"]) is None              # a link out of it
    finally:
        outside.unlink()
    assert statements.line_of(f"{tmp_path / 'pkg' / 'model.py'}:5", ["aten::new_ones"]) == 8   # absolute, inside
    assert SourceStatements(tmp_path, max_bytes=100).line_of("pkg/model.py:5", ["aten::new_ones"]) is None
    (tmp_path / "pkg" / "broken.py").write_text("def f(:\n")
    assert statements.line_of("pkg/broken.py:1", ["aten::new_ones"]) is None
    assert statements.line_of("pkg", ["aten::new_ones"]) is None and statements.line_of(None, []) is None


def test_a_file_is_parsed_once(tmp_path, monkeypatch):
    statements = program(tmp_path)
    import ast

    calls = []
    real = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *a, **k: calls.append(1) or real(*a, **k))
    for line in (5, 11, 16, 23, 5):
        statements.line_of(f"pkg/model.py:{line}", ["aten::new_ones"])
    assert len(calls) == 1


def test_nested_functions_are_other_frames():
    import ast

    tree = ast.parse(PROGRAM)
    assert statement_line(tree, 18, ["aten::item"]) == 19      # inner's own statement
    assert statement_line(tree, 16, ["aten::item"]) == 20      # value: inner's call is not counted


def test_an_inline_comment_on_the_statement_or_the_def_line_suppresses(tmp_path):
    lines = PROGRAM.splitlines()
    (tmp_path / "pkg").mkdir()
    path = tmp_path / "pkg" / "model.py"

    def suppressed(text: str) -> int:
        path.write_text(text)
        f = finding("pkg/model.py:5", function="forward")
        outcome = RuleOutcome(rule="KL001", name=f.name, severity="error", status="failed", findings=[f])
        report = TraceReport(trace="t.json", events=1, has_device_events=True, has_stacks=True, rank=None,
                             outcomes=[outcome])
        return len(apply_suppressions([report], [], root=tmp_path)[1])

    assert suppressed(PROGRAM) == 0
    on_statement = [*lines[:7], lines[7] + "  # kernlint: ignore[KL001] until the fused kernel", *lines[8:]]
    assert suppressed("\n".join(on_statement) + "\n") == 1
    on_def = [*lines[:4], "    def forward(self, x):  # kernlint: ignore[KL001]", *lines[5:]]
    assert suppressed("\n".join(on_def) + "\n") == 1
    other_rule = [*lines[:7], lines[7] + "  # kernlint: ignore[KL002]", *lines[8:]]
    assert suppressed("\n".join(other_rule) + "\n") == 0


def test_check_from_the_repository_root_names_the_new_ones_statement(tmp_path):
    # The subject is KL001's new_ones statement: the trace's RMSNorm, a chain of kernels, is also (rightly) flagged
    # by KL902 unfused-norm at another file's line, so the checks select KL001 alone.
    text = kernlint_in(REPO, "check", REGRESSED, "--isolated", "--select", "KL001")
    assert text.returncode == 1 and "source: fixtures/regressed/fp8_linear_new_ones.py:18 (_placeholder_scale)" \
        in text.stdout, text.stdout + text.stderr
    assert (REPO / "fixtures/regressed/fp8_linear_new_ones.py").read_text().splitlines()[17].strip() \
        == "return x.new_ones(1)"
    out = tmp_path / "out.json"
    kernlint_in(REPO, "check", REGRESSED, "--isolated", "--select", "KL001", "--format", "json", "-o", out)
    findings = json.loads(out.read_text())["findings"]
    assert {(f["source"], f["details"]["source_line"], f["details"]["def_line"]) for f in findings} == {
        ("fixtures/regressed/fp8_linear_new_ones.py:18", "statement", 17)}
    sarif = tmp_path / "out.sarif"
    kernlint_in(REPO, "check", REGRESSED, "--isolated", "--select", "KL001", "--format", "sarif", "-o",
                sarif)
    regions = {r["locations"][0]["physicalLocation"]["region"]["startLine"]
               for r in json.loads(sarif.read_text())["runs"][0]["results"]}
    assert regions == {18}


def test_cli_inline_comment_on_the_statement_line(tmp_path):
    source = tmp_path / "regressed" / "fp8_linear_new_ones.py"
    source.parent.mkdir()
    lines = ["# stand-in"] * 20
    lines[15] = "class Fp8BlockLinearNewOnes:"
    lines[16] = "    def _placeholder_scale(self, x):"
    lines[17] = "        return x.new_ones(1)"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.json"
    assert kernlint_in(tmp_path, "check", NEW_ONES, "--format", "json", "-o", out).returncode == 1
    (f,) = json.loads(out.read_text())["findings"]
    assert f["source"] == "regressed/fp8_linear_new_ones.py:18" and f["details"]["source_line"] == "statement"
    lines[17] += "  # kernlint: ignore[KL001] kept until the fused kernel lands"
    source.write_text("\n".join(lines) + "\n")
    kernlint_in(tmp_path, "check", NEW_ONES, "--format", "json", "-o", out)
    data = json.loads(out.read_text())
    assert data["findings"] == [] and data["suppressed"]["by"] == {"inline": 1}
    assert data["suppressed"]["findings"][0]["reason"] == "kept until the fused kernel lands"


def test_a_check_reads_and_parses_each_source_file_once(tmp_path, monkeypatch):
    """The inline-comment reader and the statement refinement share one SourceStatements per check
    (kernlint.pipeline.SourceHandling.statements): the file named by the findings is read once and parsed
    once, with an inline ignore on it and the kept finding refined to its statement."""
    import ast

    from kernlint.pipeline import CheckRequest, Inputs, SourceHandling, run_check
    from kernlint.rules import statements as statements_module
    from kernlint.rules.loader import load_rules
    from test_pipeline import _regressed_trace

    source = tmp_path / "repo" / "src" / "fp8_linear_new_ones.py"
    source.parent.mkdir(parents=True)
    source.write_text("\n" * 16 + "def _placeholder_scale(x):\n    return x.new_ones(1)\n")
    trace = _regressed_trace(tmp_path, "/build/site/regressed/fp8_linear_new_ones.py")
    reads, parses = [], []
    real_read, real_parse = statements_module.read_source_file, ast.parse
    monkeypatch.setattr(statements_module, "read_source_file", lambda *a, **k: reads.append(a[1]) or real_read(*a, **k))
    monkeypatch.setattr(statements_module.ast, "parse", lambda *a, **k: parses.append(k.get("filename")) or
                        real_parse(*a, **k))
    handling = SourceHandling(root=tmp_path / "repo", path_map=[("/build/site/regressed/", "src/")])
    result = run_check(CheckRequest(rules=[r for r in load_rules() if r.id == "KL001"], inputs=Inputs(paths=[trace]),
                                    sources=handling))
    assert [f.source for f in result.findings] == ["src/fp8_linear_new_ones.py:18"]   # the statement
    assert reads == ["src/fp8_linear_new_ones.py"] and parses == ["src/fp8_linear_new_ones.py"]
