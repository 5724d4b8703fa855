"""Suppressions (kernlint.rules.suppressions): the bulk file, [per-source-ignores], inline comments; and that
every output says what was suppressed. Traces: the H200 fixtures in fixtures/traces/gpu (19 findings: KL001 in
regressed/fp8_linear_new_ones.py and functional_*_regressed.py, KL002 in regressed/dummy_init_old.py; KL005 in both
dummy-init traces, recorded when the reference init randomized weight_scale; KL902 in the four block and functional
traces, whose RMSNorm was a chain of kernels)."""
from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from conftest import kernlint_in
from kernlint.errors import ConfigError
from kernlint.rules.suppressions import MAX_SUPPRESSIONS_BYTES, SuppressionFile

REPO = Path(__file__).resolve().parents[1]
GPU = REPO / "fixtures" / "traces" / "gpu"
NEW_ONES = GPU / "placeholder_new_ones.pt.trace.json.gz"   # one KL001 at regressed/fp8_linear_new_ones.py:17
CLEAN = GPU / "placeholder_new_empty.pt.trace.json.gz"
# The findings in GPU, by rule (see the module's docstring).
GPU_FINDINGS = {"KL001": 6, "KL002": 3, "KL005": 6, "KL902": 4}


def _check(cwd: Path, *args) -> subprocess.CompletedProcess:
    return kernlint_in(cwd, "check", *args)


def _json(cwd: Path, *args) -> dict:
    out = cwd / "out.json"
    _check(cwd, *args, "--format", "json", "-o", out)
    return json.loads(out.read_text())


def test_suppress_all_then_a_second_run_is_clean_and_says_how_many(tmp_path):
    first = _check(tmp_path, GPU, "--suppress-all")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "19 suppressed (19 file)" in first.stdout
    saved = json.loads((tmp_path / "kernlint-suppressions.json").read_text())
    assert saved["version"] == 2 and saved["fingerprint-scheme"] == 2
    assert sum(e["count"] for e in saved["suppressions"].values()) == 19
    again = _check(tmp_path, GPU)
    assert again.returncode == 0 and "no findings" in again.stdout and "19 suppressed (19 file)" in again.stdout
    data = _json(tmp_path, GPU)
    assert data["findings"] == [] and data["suppressed"]["count"] == 19 and data["suppressed"]["by"] == {"file": 19}
    assert {f["how"] for f in data["suppressed"]["findings"]} == {"file"}
    assert Counter(f["rule"] for f in data["suppressed"]["findings"]) == GPU_FINDINGS
    sarif = tmp_path / "out.sarif"
    _check(tmp_path, GPU, "--format", "sarif", "-o", sarif)
    results = json.loads(sarif.read_text())["runs"][0]["results"]
    assert len(results) == 19 and all(r["suppressions"] == [{"kind": "external", "status": "accepted"}]
                                     for r in results)
    assert "Suppressed 19 finding(s):" in _check(tmp_path, GPU, "-v").stdout


def test_a_finding_beyond_its_suppressed_count_is_reported(tmp_path):
    _check(tmp_path, GPU, "--suppress-all")
    path = tmp_path / "kernlint-suppressions.json"
    saved = json.loads(path.read_text())
    key = next(k for k, e in saved["suppressions"].items() if e["count"] == 2)
    saved["suppressions"][key]["count"] = 1
    path.write_text(json.dumps(saved))
    proc = _check(tmp_path, GPU)
    assert proc.returncode == 1 and "Found 1 finding(s)" in proc.stdout and "18 suppressed" in proc.stdout


def test_suppress_rule_and_prune(tmp_path):
    location = tmp_path / "nested" / "supp.json"
    location.parent.mkdir()
    proc = _check(tmp_path, GPU, "--suppress-rule", "KL002", "--suppressions-location", location)
    assert proc.returncode == 1   # the KL001 findings remain
    saved = json.loads(location.read_text())["suppressions"]
    assert {e["rule"] for e in saved.values()} == {"KL002"}
    assert not (tmp_path / "kernlint-suppressions.json").exists()
    # A run where those findings no longer occur prunes them.
    _check(tmp_path, CLEAN, "--suppressions-location", location, "--prune-suppressions")
    assert json.loads(location.read_text())["suppressions"] == {}


def test_per_source_ignores_silence_one_rule_for_one_source_only(tmp_path):
    (tmp_path / "kernlint.toml").write_text('[per-source-ignores]\n"regressed/fp8_linear_new_ones.py" = ["KL001"]\n')
    data = _json(tmp_path, GPU)
    assert data["suppressed"]["by"] == {"per-source": 3}   # placeholder_new_ones 1, block_regressed 2
    assert {f["source"] for f in data["suppressed"]["findings"]} == {"regressed/fp8_linear_new_ones.py:17"}
    left = {(f["rule"], f["source"].split(":")[0]) for f in data["findings"]}
    assert ("KL002", "regressed/dummy_init_old.py") in left                      # another rule: reported
    assert ("KL001", "functional_regressed.py") in left                          # another source: reported
    assert not any(src == "regressed/fp8_linear_new_ones.py" for _, src in left)
    (tmp_path / "kernlint.toml").write_text('[per-source-ignores]\n"*.py" = ["KL999"]\n')
    bad = _check(tmp_path, CLEAN)
    assert bad.returncode == 2 and "kernlint.toml:2: [per-source-ignores] *.py: no rule 'KL999'" in bad.stderr


def test_an_inline_comment_on_the_source_line_suppresses_with_its_reason(tmp_path):
    source = tmp_path / "regressed" / "fp8_linear_new_ones.py"
    source.parent.mkdir()
    lines = ["# stand-in"] * 20
    lines[16] = "    def _placeholder_scale(self, x):  # kernlint: ignore[KL001] kept until the fused kernel lands"
    source.write_text("\n".join(lines) + "\n")
    data = _json(tmp_path, NEW_ONES)
    assert data["findings"] == [] and data["suppressed"]["by"] == {"inline": 1} and data["unused_ignores"] == []
    assert data["suppressed"]["findings"][0]["reason"] == "kept until the fused kernel lands"
    sarif = tmp_path / "out.sarif"
    _check(tmp_path, NEW_ONES, "--format", "sarif", "-o", sarif)
    (result,) = json.loads(sarif.read_text())["runs"][0]["results"]
    assert result["suppressions"][0]["kind"] == "inSource"
    lines[16] = "    def _placeholder_scale(self, x):  # kernlint: ignore[KL002]"
    source.write_text("\n".join(lines) + "\n")
    assert _check(tmp_path, NEW_ONES).returncode == 1   # another rule's id: not suppressed


def test_a_broken_suppressions_file_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "kernlint-suppressions.json").write_text("{not json")
    proc = _check(tmp_path, CLEAN)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "kernlint-suppressions.json: not a kernlint suppressions file" in proc.stderr


def _scheme_1_key(f: dict) -> str:
    """What kernlint wrote into version 1 files: rule|scope|event|top op|anchor, as recorded."""
    return "|".join([f["rule"], f["scope"], f["event"], f["top_op"] or "", f["anchor"] or ""])


def test_a_version_1_file_still_silences_and_is_rewritten_as_version_2(tmp_path):
    findings = _json(tmp_path, GPU)["findings"]
    assert Counter(f["rule"] for f in findings) == GPU_FINDINGS
    old: dict[str, dict] = {}
    for f in findings:
        entry = old.setdefault(_scheme_1_key(f), {"rule": f["rule"], "count": 0})
        entry["count"] += 1
    path = tmp_path / "kernlint-suppressions.json"
    path.write_text(json.dumps({"version": 1, "suppressions": old}))
    proc = _check(tmp_path, GPU)
    assert proc.returncode == 0 and "19 suppressed (19 file)" in proc.stdout, proc.stdout + proc.stderr
    # Rewriting it (prune, suppress-all, suppress-rule) writes the current version, keyed by the new
    # fingerprints, with the counts it had.
    assert _check(tmp_path, GPU, "--prune-suppressions").returncode == 0
    saved = json.loads(path.read_text())
    assert saved["version"] == 2 and saved["fingerprint-scheme"] == 2
    assert set(saved["suppressions"]) == {f["fingerprint"] for f in findings}
    assert sum(e["count"] for e in saved["suppressions"].values()) == 19
    again = _check(tmp_path, GPU)
    assert again.returncode == 0 and "19 suppressed (19 file)" in again.stdout


def test_a_suppressions_file_of_an_unknown_fingerprint_scheme_is_exit_2(tmp_path):
    (tmp_path / "kernlint-suppressions.json").write_text(
        json.dumps({"version": 2, "fingerprint-scheme": 3, "suppressions": {}}))
    proc = _check(tmp_path, CLEAN)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "fingerprint-scheme 3" in proc.stderr


# -- issue 38: the file is input: bounded, decoded against its schema, one line naming it ---------------------

def test_a_malformed_suppressions_file_is_one_line_naming_it(tmp_path):
    path = tmp_path / "kernlint-suppressions.json"
    entry = '{"rule": "KL001", "count": %s}'
    bad = {
        "nests too deeply": '{"version": 2, "suppressions": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}",
        "Integer value out of range - at `$.suppressions[...].count`":
            '{"version": 2, "suppressions": {"k": ' + entry % ("1" + "0" * 5000) + "}}",
        "Number out of range": '{"version": 2, "suppressions": {"k": ' + entry % "1e400" + "}}",
        "Expected `int` >= 1": '{"version": 2, "suppressions": {"k": ' + entry % "0" + "}}",
        "Expected `object`, got `array` - at `$.suppressions`": '{"version": 2, "suppressions": []}',
        "expected version 1 or 2": '{"version": 1' + "0" * 5000 + ', "suppressions": {}}',
        "not JSON": '{"version": 2, "suppressions": {',
        "fingerprint-scheme 0": '{"version": 2, "fingerprint-scheme": 0, "suppressions": {}}',
    }
    for problem, text in bad.items():
        path.write_text(text)
        with pytest.raises(ConfigError) as info:
            SuppressionFile.read(path)
        line = info.value.one_line()
        assert line.startswith(f"{path}: ") and problem in line and "\n" not in line, (problem, line)
    with open(path, "wb") as fh:
        fh.truncate(MAX_SUPPRESSIONS_BYTES + 1)   # sparse: refused by its size, never read
    with pytest.raises(ConfigError, match="larger than 16 MiB"):
        SuppressionFile.read(path)
    path.unlink()
    os.mkfifo(path)   # never opened for reading: it would wait for a writer
    proc = _check(tmp_path, CLEAN)
    assert proc.returncode == 2 and proc.stderr == (f"kernlint: error: {path}: not a regular file (a FIFO): not a "
                                                    "suppressions file\n")


# -- issue 41, item 3: the inline forms, and the ignores that suppressed nothing --------------------------------

# A function whose new_ones statement a KL001 finding at its def line is refined to (tests/test_statements.py).
_LAYER = [
    "import torch",
    "",
    "",
    "class Layer(torch.nn.Module):",
    "    def forward(self, x):",
    "        y = x * 2",
    "        # the placeholder",
    "        scale = y.new_ones(1)",
    "        return y * scale",
]


def _applied(tmp_path, lines: list[str], rules=("KL001", "KL002")):
    """The suppressions applied to one KL001 finding recorded at `def forward`'s line, with `lines` as
    pkg/model.py and `rules` as the check's rules."""
    from kernlint.rules.loader import load_rules
    from kernlint.rules.result import RuleOutcome, TraceReport
    from kernlint.rules.suppressions import suppressions_applied
    from test_statements import finding

    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "model.py").write_text("\n".join(lines) + "\n")
    def_line = next(i + 1 for i, text in enumerate(lines) if "def forward" in text)
    f = finding(f"pkg/model.py:{def_line}", function="forward")
    outcome = RuleOutcome(rule="KL001", name=f.name, severity="error", status="failed", findings=[f])
    report = TraceReport(trace="t.json", events=1, has_device_events=True, has_stacks=True, rank=None,
                         outcomes=[outcome])
    checked = [r for r in load_rules() if r.id in rules]
    return suppressions_applied([report], checked, root=tmp_path)


def _with(line: int, text: str, lines=_LAYER) -> list[str]:
    """`lines` with `text` appended to line `line` (1-based), or inserted before it when `text` ends in \\n."""
    out = list(lines)
    if text.endswith("\n"):
        out.insert(line - 1, text[:-1])
    else:
        out[line - 1] += text
    return out


@pytest.mark.parametrize("lines, reason", [
    (_with(8, "  # kernlint: ignore[KL001] until the fused kernel"), "until the fused kernel"),     # statement
    (_with(5, "  # kernlint: ignore[KL001]: reviewed"), "reviewed"),                              # def line
    (_with(7, "        # kernlint: ignore-next-line[KL001] a placeholder\n"), "a placeholder"),   # next line,
    (_with(8, "\n", _with(7, "        # kernlint: ignore-next-line[KL001]\n")), None),   # past blank and comments
    (_with(5, "    # kernlint: ignore-next-line[KL001] on the def\n"), "on the def"),        # above the def
    (_with(1, "# kernlint: ignore-file[KL001] a vendored file\n"), "a vendored file"),       # the first line
    (_with(9, "# kernlint: ignore-file[kl001]\n"), None),                                    # anywhere, any case
    (_with(8, "  # kernlint: ignore[fill-before-block-quant] by name"), "by name"),           # the rule's name
    (_with(8, "  # KERNLINT: IGNORE[Fill-Before-Block-Quant, KL999]"), None),
    (_with(8, "  # kernlint: ignore  every rule"), "every rule"),                             # bare: every rule
    (_with(1, "# kernlint: ignore-file\n"), None),
])
def test_each_inline_form_suppresses(tmp_path, lines, reason):
    applied = _applied(tmp_path, lines)
    assert applied.reports[0].findings == [] and [s.how for s in applied.suppressed] == ["inline"]
    assert applied.suppressed[0].reason == reason
    assert applied.unused_ignores == []


@pytest.mark.parametrize("lines", [
    _LAYER,
    _with(8, "  # kernlint: ignore[KL002]"),                                     # another rule
    _with(7, "        # kernlint: ignore-next-line[KL002]\n"),
    _with(8, "  # kernlint: ignore-next-line[KL001]"),                           # not on a line of its own
    _with(8, "  # kernlint: ignore-file[KL001]"),
    _with(6, "        # kernlint: ignore-next-line[KL001]\n"),                   # the next line is another
    _with(8, "  # kernlint: ignore-nextline[KL001]"),                             # no form: not a bare ignore
    _with(8, "  # kernlint: ignored"),
    _with(1, "# kernlint: ignore-file[KL002]\n"),
])
def test_what_does_not_suppress(tmp_path, lines):
    applied = _applied(tmp_path, lines)
    assert applied.suppressed == [] and len(applied.reports[0].findings) == 1


def test_the_ignores_that_suppressed_nothing_are_listed_by_file_and_line(tmp_path):
    lines = _with(8, "  # kernlint: ignore[KL001, KL002, KL999] only KL001 here")   # KL999: no such rule, unjudged
    lines = _with(1, "# kernlint: ignore-file[KL001]\n", lines)                      # the statement's came first
    lines = _with(3, "# kernlint: ignore-next-line\n", lines)                        # bare, on a blank... class
    lines = [*lines, "x = 1  # kernlint: ignore", "# kernlint: ignore-next-line[KL002]"]   # nothing follows
    applied = _applied(tmp_path, lines)
    assert [s.reason for s in applied.suppressed] == ["only KL001 here"]
    assert [u.one_line() for u in applied.unused_ignores] == [
        "pkg/model.py:1: unused ignore-file[KL001]",
        "pkg/model.py:3: unused ignore-next-line",
        "pkg/model.py:10: unused ignore[KL002]",
        "pkg/model.py:12: unused ignore",
        "pkg/model.py:13: unused ignore-next-line[KL002]",
    ]
    # An id of a rule the check did not run is not judged: another check may use it.
    only_kl001 = _applied(tmp_path, lines, rules=("KL001",))
    assert "pkg/model.py:10: unused ignore[KL002]" not in [u.one_line() for u in only_kl001.unused_ignores]


def _layer_file(tmp_path, extra: dict[int, str]) -> Path:
    """regressed/fp8_linear_new_ones.py as NEW_ONES records it (KL001 at the def, line 17; new_ones at 18),
    with `extra` appended to its lines (a comment in place of the line)."""
    source = tmp_path / "regressed" / "fp8_linear_new_ones.py"
    source.parent.mkdir(exist_ok=True)
    lines = ["# stand-in"] * 20
    lines[15] = "class Fp8BlockLinearNewOnes:"
    lines[16] = "    def _placeholder_scale(self, x):"
    lines[17] = "        return x.new_ones(1)"
    lines[4] = "x = 1"
    for n, text in extra.items():
        lines[n - 1] = text if text.startswith("#") else lines[n - 1] + text
    source.write_text("\n".join(lines) + "\n")
    return source


def test_cli_reports_unused_ignores_by_file_and_line_and_fixes_them(tmp_path, monkeypatch):
    source = _layer_file(tmp_path, {1: "# kernlint: ignore-file[KL002] stale", 5: "  # kernlint: ignore[KL001] old",
                                    18: "  # kernlint: ignore[KL001, KL005] kept until the fused kernel lands"})
    plain = _check(tmp_path, NEW_ONES)
    assert plain.returncode == 0 and "unused" not in plain.stderr   # only when asked
    proc = _check(tmp_path, NEW_ONES, "--report-unused-ignores")
    assert proc.returncode == 0, proc.stdout + proc.stderr          # an unused ignore leaves the exit code
    assert proc.stderr.splitlines() == [
        "kernlint: warning: regressed/fp8_linear_new_ones.py:1: unused ignore-file[KL002]",
        "kernlint: warning: regressed/fp8_linear_new_ones.py:5: unused ignore[KL001]",
        "kernlint: warning: regressed/fp8_linear_new_ones.py:18: unused ignore[KL005]",
        "kernlint: 3 unused ignore comment(s); only the files the findings' sources were read from were judged; "
        "comments in other files were not",
    ]
    monkeypatch.chdir(tmp_path)   # kernlint.check() carries the same data
    import kernlint

    report = kernlint.check(NEW_ONES)
    assert [u.one_line() for u in report.unused_ignores] == [line.split("warning: ")[1]
                                                             for line in proc.stderr.splitlines()[:3]]
    # ... and the JSON report, for scripts (the same three, whatever the flag)
    assert [(u["file"], u["line"], u["directive"]) for u in _json(tmp_path, NEW_ONES)["unused_ignores"]] == [
        ("regressed/fp8_linear_new_ones.py", 1, "ignore-file[KL002]"),
        ("regressed/fp8_linear_new_ones.py", 5, "ignore[KL001]"),
        ("regressed/fp8_linear_new_ones.py", 18, "ignore[KL005]")]
    before = source.read_text().splitlines()
    fixed = _check(tmp_path, NEW_ONES, "--fix-unused-ignores")
    assert fixed.returncode == 0 and "removed unused ignore comments from 1 file(s)" in fixed.stderr
    after = source.read_text().splitlines()
    assert len(after) == len(before) - 1 and after[3] == "x = 1"   # the comment's own line went
    assert after[16] == "        return x.new_ones(1)  # kernlint: ignore[KL001] kept until the fused kernel lands"
    assert after == [*before[1:4], "x = 1", *before[5:17], after[16], *before[18:]]
    again = _check(tmp_path, NEW_ONES, "--report-unused-ignores")
    assert again.returncode == 0 and again.stderr.splitlines()[0].startswith("kernlint: 0 unused ignore")
    data = _json(tmp_path, NEW_ONES)
    assert data["findings"] == [] and data["suppressed"]["by"] == {"inline": 1} and data["unused_ignores"] == []


def test_fix_removes_a_comment_line_of_its_own_and_keeps_line_endings(tmp_path):
    from kernlint.rules.suppressions import UnusedIgnore, removed_unused_ignores

    path = tmp_path / "m.py"
    path.write_bytes(b"a = 1\r\n    # kernlint: ignore-next-line[KL001]\r\n"
                     b"b = 2  # kernlint: ignore[KL001,kl002] why\r\n")
    written = removed_unused_ignores(tmp_path, [UnusedIgnore("m.py", 2, "next-line", ("KL001",)),
                                                UnusedIgnore("m.py", 3, "line", ("KL002",))])
    assert written == ["m.py"]
    assert path.read_bytes() == b"a = 1\r\nb = 2  # kernlint: ignore[KL001] why\r\n"
    # A file edited since the check (the comment no longer there) is left alone.
    assert removed_unused_ignores(tmp_path, [UnusedIgnore("m.py", 1, "line", None)]) == []


def test_a_file_outside_the_root_is_never_read_for_comments_nor_judged(tmp_path, monkeypatch):
    """A trace names any path: a comment in a file outside the source root neither suppresses nor is listed as
    unused, and the file is never opened; `kernlint.check()`'s pipeline carries the same unused ignores."""
    from kernlint.pipeline import CheckRequest, Inputs, SourceHandling, run_check
    from kernlint.rules import statements as statements_module
    from kernlint.rules.loader import load_rules
    from test_pipeline import _regressed_trace

    outside = tmp_path / "elsewhere" / "fp8_linear_new_ones.py"
    outside.parent.mkdir()
    outside.write_text("# kernlint: ignore-file[KL001]\n" + "\n" * 15
                       + "def _placeholder_scale(x):  # kernlint: ignore[KL001] from outside\n")
    (tmp_path / "repo").mkdir()
    opened = []
    real = statements_module.read_regular
    monkeypatch.setattr(statements_module, "read_regular", lambda p, *a, **k: opened.append(str(p)) or real(p, *a, **k))
    kl001 = [r for r in load_rules() if r.id == "KL001"]
    trace = _regressed_trace(tmp_path, str(outside))
    result = run_check(CheckRequest(rules=kl001, inputs=Inputs(paths=[trace]),
                                    sources=SourceHandling(root=tmp_path / "repo")))
    assert len(result.findings) == 1 and result.suppressed == [] and result.unused_ignores == []
    assert opened == []
    # The same file inside the root: read, it suppresses, and its other ignore is listed as unused.
    inside = tmp_path / "repo" / "fp8_linear_new_ones.py"
    inside.write_text(outside.read_text())
    trace = _regressed_trace(tmp_path, str(inside))
    result = run_check(CheckRequest(rules=kl001, inputs=Inputs(paths=[trace]),
                                    sources=SourceHandling(root=tmp_path / "repo")))
    assert [s.reason for s in result.suppressed] == ["from outside"]
    assert [u.one_line() for u in result.unused_ignores] == ["fp8_linear_new_ones.py:1: unused ignore-file[KL001]"]
