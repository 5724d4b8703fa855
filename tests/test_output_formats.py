"""Output formats come from one registry (kernlint/report/*_format.py); the GitHub annotations and the
markdown summary carry file and line and cannot be broken by what a trace holds."""
from __future__ import annotations

import io
import json
import subprocess
import sys

from click.testing import CliRunner
from rich.console import Console

from conftest import FIXTURES
from kernlint.cli import main
from kernlint.report import format_names, renderer
from kernlint.rules.result import CheckResult, Finding, RuleOutcome, TraceReport

REGRESSED = FIXTURES / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _result(message="a fill runs before the quant", source="pkg/linear.py:17", scope="module Linear_0"):
    finding = Finding(rule="KL001", name="fill-before-block-quant", severity="error", message=message,
                      trace="run/rank0.json", scope=scope, event="fill", event_kind="kernel", event_category="fill",
                      launch_op="aten::fill_", top_op="aten::new_ones", source=source, anchor="scale_1x128_kernel",
                      ts=1.0, rank=1)
    outcome = RuleOutcome("KL001", "fill-before-block-quant", "error", "failed", findings=[finding])
    report = TraceReport(trace="run/rank0.json", events=10, has_device_events=True, has_stacks=True, rank=1,
                         outcomes=[outcome])
    from kernlint.rules.loader import load_rules

    rules = [r for r in load_rules() if r.id == "KL001"]
    return CheckResult(reports=[report], rules=rules, exit_code=1)


def test_the_cli_offers_every_registered_format():
    assert {"text", "json", "github", "markdown"} <= set(format_names())
    help_text = run("check", "--help").output
    assert "[" + "|".join(format_names()) + "]" in help_text.replace("\n", "").replace(" ", "")


def test_github_annotations_carry_file_line_and_title():
    out = renderer("github")(_result())
    assert out == ("::error file=pkg/linear.py,line=17,title=KL001 fill-before-block-quant::a fill runs before the "
                   "quant [module Linear_0; run/rank0.json, rank 1]\n")


def test_github_annotations_escape_what_a_trace_holds():
    out = renderer("github")(_result(message="50% done\n::error::forged", source="a,b:c.py:9",
                                     scope="module X\x1b[2J"))
    (line,) = out.splitlines()
    assert line.startswith("::error file=a%2Cb%3Ac.py,line=9,")
    assert "\n::error::forged" not in out and "%0A" not in line.split("::", 2)[1]
    assert "50%25 done" in line and "\x1b" not in line


def test_github_output_of_a_real_regressed_trace_points_at_the_line():
    result = run("check", REGRESSED, "--format", "github")
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith("::error file=fixtures/regressed/fp8_linear_new_ones.py,line=18,title=KL001 ")


def test_markdown_summary_escapes_table_and_markup_characters():
    out = renderer("markdown")(_result(message="a | b <script> *x*\x07"))
    assert "| KL001 | fill-before-block-quant | failed |" in out
    row = next(line for line in out.splitlines() if "script" in line)
    assert "a \\| b \\<script\\> \\*x\\*\\\\x07" in row and row.count(" | ") == 6  # 7 columns; \x07 shown, escaped


def test_a_format_that_does_not_render_audits_is_one_line():
    result = subprocess.run([sys.executable, "-m", "kernlint", "audit", "--replay", "--format", "github"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert "does not render replays" in result.stderr


def test_python_dash_m_kernlint():
    result = subprocess.run([sys.executable, "-m", "kernlint", "check", str(REGRESSED), "--format", "json"],
                            capture_output=True, text=True)
    assert result.returncode == 1 and json.loads(result.stdout)["summary"]["findings"] == 1


def test_a_megabyte_name_is_shortened_with_a_marker_in_every_format():
    """issue 22: a hostile trace's 1 MB name (a scope, a source, a message built from it) is shown cut, with
    how much was left out, in every format and in error lines."""
    from kernlint.errors import TraceError
    from kernlint.report import FORMATS

    huge = "x" * 1_000_000
    result = _result(message=f"a fill runs before the quant in {huge}", source=f"pkg/{huge}.py:17",
                     scope=f"module {huge}")
    for name, fmt in FORMATS.items():
        if "check" not in fmt.renders or fmt.needs_tables:
            continue
        out = renderer(name)(result)
        if isinstance(out, str):
            text = out
        else:   # the terminal's renderable
            console = Console(file=io.StringIO(), width=200, no_color=True)
            console.print(out)
            text = console.file.getvalue()
        assert len(text) < 100_000 and "more characters)" in text, (name, len(text))
    error = TraceError("t.json", f"bad name {huge}")
    assert len(str(error)) < 10_000 and str(error).endswith("more characters)")


def test_the_baseline_table_says_what_changed_from_the_rules_own_declaration():
    """Issue 39: the report's baseline table named KL801-KL807 itself; now each baseline check kind declares
    what its findings changed (CheckKind.baseline_change, from the rule's [check]), and no report module holds a
    rule id in its code."""
    import re

    from conftest import REPO
    from kernlint.rules.loader import load_rules

    rules = {r.id: r for r in load_rules()}
    said = {i: rules[i].kind.baseline_change(rules[i].spec.check) for i in rules if rules[i].kind.baseline_change}
    assert said == {"KL801": "added", "KL802": "added", "KL803": "scratch", "KL804": "slower", "KL805": "removed",
                    "KL806": "faster", "KL807": "scratch"}
    for path in (REPO / "kernlint" / "report").glob("*.py"):
        code = re.sub(r'""".*?"""', "", path.read_text(), flags=re.S)
        code = "\n".join(line.split("#")[0] for line in code.splitlines())
        assert not re.search(r"[\"']KL\d{3}[\"']", code), path.name
