"""`--format sarif` and `--format junit` on real traces: the SARIF log is valid against the official OASIS
SARIF 2.1.0 schema (tests/data/sarif-schema-2.1.0.json, see tests/data/README.md) and points each finding at
the user line that launched it, or at the trace when it has no stacks; the JUnit XML counts every rule
verdict, and an incomplete verdict or an unreadable input is an error, never a pass. Neither can be broken
by what a trace holds."""
from __future__ import annotations

import gzip
import hashlib
import json
import re
import xml.etree.ElementTree as ET

import jsonschema
import msgspec
import pytest
from click.testing import CliRunner
from jsonschema.validators import validator_for

from conftest import FIXTURES, REPO
from kernlint.cli import main
from kernlint.report import audit_renderer, format_names, renderer
from kernlint.rules.loader import load_rules
from kernlint.rules.result import CheckResult, Finding, RuleOutcome, TraceReport

SCHEMA_PATH = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"
SCHEMA_SHA256 = "ddddcccbf95c7c50c037b5b07eff4140556278ca574ff374db46786b5fce7949"   # tests/data/README.md
SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))

# Relative to the repository root, as a CI job would pass them.
REGRESSED = "fixtures/traces/gpu/block_regressed.pt.trace.json.gz"       # KL001 fails twice, with stacks
CLEAN = "fixtures/traces/gpu/block_clean.pt.trace.json.gz"               # KL001 passes
NO_STACKS = "fixtures/external/hta__trace_filter_2rank"                  # HTA's 2 ranks: KL004 fails, no stacks
# The cross-rank sync rule alone: the zoo rules find more on this trace (syncs in hot scopes), not needed here.
ONLY_KL004 = ("--select", "KL004")
# The subject of the REGRESSED and CLEAN tests is KL001 (the fills): the recorded block's RMSNorm is a chain of
# kernels, which KL902 unfused-norm rightly flags in both traces, so those tests select KL001 alone.
ONLY_KL001 = ("--select", "KL001")
# The recorded path (regressed/...: relative to the sys.path entry) mapped to the repository's file.
LAUNCH_FILE, LAUNCH_LINE = "fixtures/regressed/fp8_linear_new_ones.py", 18   # `return x.new_ones(1)` (def: 17)

# Control characters (C0 with newline, DEL, C1), line separators, bidi controls, lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

# The jsonschema package checks the formats `uri` and `uri-reference` only with optional packages that are
# not installed here; these are RFC 3986's character set and its rule that a relative reference's first
# segment holds no colon (it would read as a scheme).
_URI_CHARACTERS = re.compile(r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("uri-reference")
def _is_uri_reference(value) -> bool:
    if not isinstance(value, str):
        return True
    if not _URI_CHARACTERS.fullmatch(value):
        return False
    return bool(_SCHEME.match(value)) or ":" not in re.split(r"[/?#]", value, maxsplit=1)[0]


@FORMATS.checks("uri")
def _is_uri(value) -> bool:
    return not isinstance(value, str) or bool(_URI_CHARACTERS.fullmatch(value) and _SCHEME.match(value))


VALIDATOR_CLASS = validator_for(SCHEMA)
VALIDATOR = VALIDATOR_CLASS(SCHEMA, format_checker=FORMATS)


@pytest.fixture(autouse=True)
def _at_repository_root(monkeypatch):
    monkeypatch.chdir(REPO)


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def sarif_of(*args) -> tuple[int, dict]:
    result = run("check", *args, "--format", "sarif")
    log = json.loads(result.output, parse_constant=_no_constant)
    assert_valid(log)
    return result.exit_code, log


def junit_of(*args) -> tuple[int, ET.Element]:
    result = run("check", *args, "--format", "junit")
    assert result.output.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    return result.exit_code, ET.fromstring(result.output.encode("utf-8"))


def json_of(*args) -> dict:
    return json.loads(run("check", *args, "--format", "json").output)


def _no_constant(name):
    raise AssertionError(f"{name} in JSON output")


def assert_valid(log: dict) -> None:
    errors = sorted(VALIDATOR.iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]


def strings(value, path=()):
    """Every (path, string) in decoded JSON, keys included."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield path, k
            yield from strings(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from strings(v, path + (i,))


def damaged_folder(tmp_path):
    """A real clean trace whose first kernel names a launch that is not in the trace (its KL001 verdict
    is incomplete), and a gzip file that cannot be read."""
    data = json.loads(gzip.decompress((FIXTURES / "traces" / "gpu" / "block_clean.pt.trace.json.gz").read_bytes()))
    kernel = next(e for e in data["traceEvents"] if e.get("cat") == "kernel")
    kernel["args"]["correlation"] = 999_999
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "damaged.json").write_text(json.dumps(data))
    (folder / "broken.json.gz").write_bytes(b"\x1f\x8b" + b"not gzip at all")
    return folder


def synthetic(findings: list[Finding], *, trace="run/rank0.json", name="fill-before-block-quant", rules=None
              ) -> CheckResult:
    outcome = RuleOutcome("KL001", name, "error", "failed", findings=findings)
    report = TraceReport(trace=trace, events=10, has_device_events=True, has_stacks=True, rank=None,
                         outcomes=[outcome])
    rules = rules if rules is not None else [r for r in load_rules() if r.id == "KL001"]
    return CheckResult(reports=[report], rules=rules, exit_code=1)


def finding(**changes) -> Finding:
    base = dict(rule="KL001", name="fill-before-block-quant", severity="error", message="a fill runs first",
                trace="run/rank0.json", scope="module Linear_0", event="fill", event_kind="kernel",
                event_category="fill", launch_op="aten::fill_", top_op="aten::new_ones", source="pkg/linear.py:17",
                anchor="scale_1x128_kernel", ts=1.0, function="forward", device_us=2.5, bytes=4096)
    return Finding(**{**base, **changes})


# -- registry ---------------------------------------------------------------------------------------------


def test_check_help_offers_sarif_and_junit():
    assert {"sarif", "junit"} <= set(format_names())
    help_text = run("check", "--help").output.replace("\n", "").replace(" ", "")
    (choices,) = re.findall(r"--format(?:,--output-format)?\[([^\]]+)\]", help_text)
    assert {"sarif", "junit"} <= set(choices.split("|"))


# -- SARIF ------------------------------------------------------------------------------------------------


def test_the_vendored_schema_is_the_recorded_official_file():
    assert hashlib.sha256(SCHEMA_PATH.read_bytes()).hexdigest() == SCHEMA_SHA256
    assert SCHEMA["id"] == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    VALIDATOR_CLASS.check_schema(SCHEMA)


def test_the_validator_rejects_what_sarif_forbids():
    """The validation below is real: a wrong level, an empty message, a URI with a space or a backslash
    are refused."""
    _, log = sarif_of(REGRESSED)
    for path, bad in ((("level",), "fatal"), (("message",), {}),
                      (("locations", 0, "physicalLocation", "artifactLocation", "uri"), "dir\\file.py"),
                      (("locations", 0, "physicalLocation", "artifactLocation", "uri"), "my file.py")):
        broken = json.loads(json.dumps(log))
        target = broken["runs"][0]["results"][0]
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = bad
        assert list(VALIDATOR.iter_errors(broken)), (path, bad)


def test_sarif_of_a_trace_with_stacks_points_at_the_launching_line():
    code, log = sarif_of(REGRESSED, *ONLY_KL001)
    assert code == 1
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-schema-2.1.0.json")
    (sarif_run,) = log["runs"]
    driver = sarif_run["tool"]["driver"]
    assert driver["name"] == "kernlint" and driver["version"]
    data = json_of(REGRESSED, *ONLY_KL001)
    expected = data["findings"]
    # The two layers' fills are one cause (one line): one result, its worst instance's, both listed.
    assert len(expected) == 2 and len(data["causes"]) == 1
    (result,) = sarif_run["results"]
    f = expected[data["causes"][0]["representative"]]
    assert result["ruleId"] == "KL001" and driver["rules"][result["ruleIndex"]]["id"] == "KL001"
    assert result["level"] == "error"
    assert result["partialFingerprints"] == {"kernlintFingerprint/v2": min(e["fingerprint"] for e in expected)}
    line = {"artifactLocation": {"uri": LAUNCH_FILE, "uriBaseId": "%SRCROOT%"}, "region": {"startLine": LAUNCH_LINE}}
    (location,) = result["locations"]
    assert location["physicalLocation"] == line
    assert {"name": f["scope"], "kind": "scope"} in location["logicalLocations"]
    assert f["message"] in result["message"]["text"] and f["scope"] in result["message"]["text"]
    assert "2 instances" in result["message"]["text"] and "device time" in result["message"]["text"]
    props = result["properties"]
    assert props["traceFile"] == REGRESSED and props["deviceTimeUs"] == f["device_us"] > 0
    assert props["event"] == f["event"] and props["launchOp"] == "aten::fill_"
    assert props["instances"] == 2 and props["scopes"] == [e["scope"] for e in expected]
    assert props["deviceTimeUsTotal"] == pytest.approx(sum(e["device_us"] for e in expected))
    related = result["relatedLocations"]
    assert [r["id"] for r in related] == [0, 1] and all(r["physicalLocation"] == line for r in related)
    assert [r["logicalLocations"][0]["name"] for r in related] == [e["scope"] for e in expected]
    (invocation,) = sarif_run["invocations"]
    assert invocation["exitCode"] == 1 and invocation["executionSuccessful"] is True
    assert not [n for n in invocation.get("toolExecutionNotifications", []) if n["level"] == "error"]


def test_sarif_of_a_trace_without_stacks_points_at_the_trace():
    code, log = sarif_of(NO_STACKS, *ONLY_KL004)
    assert code == 1
    expected = json_of(NO_STACKS, *ONLY_KL004)["findings"]
    results = log["runs"][0]["results"]
    assert len(results) == len(expected) >= 1 and all(f["source"] is None for f in expected)
    for result, f in zip(results, expected):
        assert result["ruleId"] == f["rule"] == "KL004"
        (location,) = result["locations"]
        # the trace file the finding is in, and no line: a trace has none
        assert location["physicalLocation"] == {"artifactLocation": {"uri": f["trace"], "uriBaseId": "%SRCROOT%"}}
        assert f["trace"].startswith(NO_STACKS + "/")
        assert result["properties"]["rank"] == f["rank"] and "source" not in result["properties"]


def test_sarif_of_a_clean_trace_has_no_results_and_exit_0():
    code, log = sarif_of(CLEAN, *ONLY_KL001)
    assert code == 0
    (sarif_run,) = log["runs"]
    assert sarif_run["results"] == []
    (invocation,) = sarif_run["invocations"]
    assert invocation["executionSuccessful"] is True and invocation["exitCode"] == 0
    assert "toolExecutionNotifications" not in invocation


def test_sarif_rules_carry_their_documentation_and_level():
    _, log = sarif_of(CLEAN)
    rules = {r.id: r for r in load_rules()}
    descriptors = log["runs"][0]["tool"]["driver"]["rules"]
    ids = [d["id"] for d in descriptors]
    assert "KL001" in ids and len(set(ids)) == len(ids) and set(ids) <= set(rules)
    level = {"error": "error", "warning": "warning", "info": "note"}
    for d in descriptors:
        rule = rules[d["id"]]
        assert d["name"] == rule.name and d["shortDescription"]["text"] == rule.spec.summary.strip()
        assert d["fullDescription"]["text"] == rule.spec.docs.what_it_does.strip()
        assert d["defaultConfiguration"]["level"] == level[rule.severity]
        assert d["properties"]["tags"] == list(rule.spec.tags)
        for heading in ("What it does", "Why is this bad?", "Example", "Use instead", "References"):
            assert heading in d["help"]["text"] and f"## {heading}" in d["help"]["markdown"]
        assert rule.spec.docs.use_instead.strip() in d["help"]["markdown"]
        assert all(ref in d["help"]["text"] for ref in rule.spec.docs.references)


@pytest.mark.parametrize("severity, level", [("error", "error"), ("warning", "warning"), ("info", "note")])
def test_sarif_levels_follow_severity(severity, level):
    (kl001,) = [r for r in load_rules() if r.id == "KL001"]
    rule = msgspec.structs.replace(kl001, spec=msgspec.structs.replace(kl001.spec, severity=severity))
    log = json.loads(renderer("sarif")(synthetic([finding(severity=severity)], rules=[rule])))
    assert_valid(log)
    assert log["runs"][0]["results"][0]["level"] == level
    assert log["runs"][0]["tool"]["driver"]["rules"][0]["defaultConfiguration"]["level"] == level


def test_sarif_names_incomplete_verdicts_and_unreadable_inputs(tmp_path):
    folder = damaged_folder(tmp_path)
    code, log = sarif_of(folder, "--select", "KL001")   # one rule, so one incomplete verdict
    assert code == 4
    (sarif_run,) = log["runs"]
    assert sarif_run["results"] == []
    (invocation,) = sarif_run["invocations"]
    assert invocation["exitCode"] == 4 and invocation["executionSuccessful"] is False
    errors = [n for n in invocation["toolExecutionNotifications"] if n["level"] == "error"]
    (incomplete,) = [n for n in errors if "associatedRule" in n]
    assert incomplete["associatedRule"]["id"] == "KL001"
    assert "KL001" in incomplete["message"]["text"] and "could not be fully checked" in incomplete["message"]["text"]
    damaged_uri = incomplete["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert damaged_uri == (folder / "damaged.json").as_uri()
    assert incomplete["properties"]["damage"]
    (unreadable,) = [n for n in errors if "associatedRule" not in n]
    assert "broken.json.gz" in unreadable["message"]["text"] and "could not be read" in unreadable["message"]["text"]
    assert unreadable["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("/logs/broken.json.gz")


def test_sarif_is_safe_and_locates_odd_paths():
    hostile = "fill\x1b]0;pwned\x07\nforged\u202e\ud800"
    findings = [
        finding(message=hostile, scope="module X\x1b[2J", source="a:b/c d.py:9", device_us=float("nan")),
        finding(scope="module Y", source="/abs/pkg/x.py:3", ts=2.0),
        finding(scope="module Z", source=None, trace="run dir/rank0.json", ts=3.0),
        finding(scope="module W", source="<built-in method fill_>", ts=4.0),
    ]
    out = renderer("sarif")(synthetic(findings))
    log = json.loads(out, parse_constant=_no_constant)
    assert_valid(log)
    for path, text in strings(log):
        allowed = "\n" if path[:4] == ("runs", 0, "tool", "driver") else ""   # rule docs keep their lines
        assert not _UNSAFE.search(text.replace(allowed, "") if allowed else text), (path, text)
    by_scope = {r["locations"][0]["logicalLocations"][0]["name"]: r for r in log["runs"][0]["results"]}
    hostile_result = by_scope["module X\\x1b[2J"]
    assert "fill\\x1b]0;pwned\\x07\\nforged\\u202e\ufffd" in hostile_result["message"]["text"]
    assert "deviceTimeUs" not in hostile_result["properties"] and "NaN" not in out
    assert {scope: r["locations"][0]["physicalLocation"] for scope, r in by_scope.items()} == {
        "module X\\x1b[2J": {"artifactLocation": {"uri": "a%3Ab/c%20d.py", "uriBaseId": "%SRCROOT%"},
                             "region": {"startLine": 9}},
        "module Y": {"artifactLocation": {"uri": "file:///abs/pkg/x.py"}, "region": {"startLine": 3}},
        "module Z": {"artifactLocation": {"uri": "run%20dir/rank0.json", "uriBaseId": "%SRCROOT%"}},   # the trace
        "module W": {"artifactLocation": {"uri": "run/rank0.json", "uriBaseId": "%SRCROOT%"}},  # not file:line
    }


def test_sarif_is_deterministic_whatever_the_order_of_findings():
    findings = [finding(scope=f"module L{i}", ts=float(i), source=f"pkg/linear.py:{10 + i}") for i in range(5)]
    first = renderer("sarif")(synthetic(findings))
    assert first == renderer("sarif")(synthetic(list(reversed(findings))))
    scopes = [r["locations"][0]["logicalLocations"][0]["name"] for r in json.loads(first)["runs"][0]["results"]]
    assert scopes == [f"module L{i}" for i in range(5)]
    # The instances of one cause (one line) too: listed in report order, the worst (here the earliest) shown.
    same = [finding(scope=f"module L{i}", ts=float(i)) for i in range(5)]
    first = renderer("sarif")(synthetic(same))
    assert first == renderer("sarif")(synthetic(list(reversed(same))))
    (result,) = json.loads(first)["runs"][0]["results"]
    assert result["locations"][0]["logicalLocations"][0]["name"] == "module L0"
    assert [r["logicalLocations"][0]["name"] for r in result["relatedLocations"]] == [f"module L{i}" for i in range(5)]


# -- JUnit ------------------------------------------------------------------------------------------------


def _counts(element: ET.Element) -> dict[str, int]:
    return {k: int(element.get(k)) for k in ("tests", "failures", "errors", "skipped")}


def _children(cases, tag) -> int:
    return sum(1 for case in cases for child in case if child.tag == tag)


@pytest.mark.parametrize("target", [REGRESSED, CLEAN, NO_STACKS])
def test_junit_counts_every_rule_verdict_of_every_trace(target):
    code, root = junit_of(target)
    data = json_of(target)
    assert code == data["exit_code"]
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [t["path"] for t in data["traces"]]
    for suite, trace in zip(suites, data["traces"]):
        statuses = [r["status"] for r in trace["rules"]]
        cases = suite.findall("testcase")
        assert [c.get("name") for c in cases] == [f"{r['rule']} {n}" for r, n in
                                                  zip(trace["rules"], _rule_names(data, trace))]
        assert _counts(suite) == {"tests": len(statuses), "failures": statuses.count("failed"),
                                  "errors": statuses.count("incomplete"), "skipped": statuses.count("not-applicable")}
        assert _counts(suite) == {"tests": len(cases), "failures": _children(cases, "failure"),
                                  "errors": _children(cases, "error"), "skipped": _children(cases, "skipped")}
    totals = [_counts(s) for s in suites]
    assert _counts(root) == {k: sum(t[k] for t in totals) for k in ("tests", "failures", "errors", "skipped")}


def _rule_names(data, trace):
    names = {r.id: r.name for r in load_rules()}
    return [names[r["rule"]] for r in trace["rules"]]


def test_junit_failure_lists_each_finding_with_its_source_line():
    code, root = junit_of(REGRESSED, *ONLY_KL001)
    assert code == 1
    (suite,) = root.findall("testsuite")
    (case,) = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert case.get("name") == "KL001 fill-before-block-quant"
    assert case.get("classname") == "kernlint.block_regressed"
    failure = case.find("failure")
    # The two layers' fills are one cause (one line): listed once, its two instances under it.
    assert failure.get("type") == "error" and failure.get("message").startswith("2 finding(s) in 1 cause(s): ")
    text = failure.text
    assert text.count(f"source: {LAUNCH_FILE}:{LAUNCH_LINE}") == 1
    data = json_of(REGRESSED, *ONLY_KL001)
    assert data["findings"][data["causes"][0]["representative"]]["message"] in text
    assert "2 instances: 2 scopes" in text
    for f in data["findings"]:
        assert f"- scope: {f['scope']}; trace: {REGRESSED}; " in text
    # the worst's cost, the total, each instance's (each share now names its denominator, "of the scope's device
    # time", so the costs are counted by their amounts)
    assert text.count("µs device time") == 4


def test_junit_of_a_trace_without_stacks_says_the_source_is_not_recorded():
    _, root = junit_of(NO_STACKS, *ONLY_KL004)
    (case,) = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert case.get("name").startswith("KL004 ")
    text = case.find("failure").text
    assert text.count("source: not recorded") == len(json_of(NO_STACKS, *ONLY_KL004)["findings"]) >= 1


def test_junit_incomplete_verdict_and_unreadable_input_are_errors(tmp_path):
    folder = damaged_folder(tmp_path)
    code, root = junit_of(folder, "--select", "KL001")   # one rule, so one incomplete verdict
    assert code == 4
    damaged = next(s for s in root.findall("testsuite") if s.get("name").endswith("damaged.json"))
    (case,) = [c for c in damaged.findall("testcase") if c.get("name").startswith("KL001 ")]
    assert [child.tag for child in case] == ["error"]          # not a pass, not a skip
    error = case.find("error")
    assert error.get("type") == "incomplete" and error.get("message").startswith("could not fully check")
    assert "damage: " in error.text
    assert _counts(damaged)["errors"] == 1 and _counts(damaged)["failures"] == 0
    (unreadable_suite,) = [s for s in root.findall("testsuite") if s.get("name") == "unreadable inputs"]
    (unreadable,) = unreadable_suite.findall("testcase")
    assert unreadable.get("name").endswith("broken.json.gz")
    assert unreadable.find("error").get("type") == "unreadable"
    assert _counts(root)["errors"] == 2


def test_junit_survives_hostile_names():
    message = "a ]]> b <script>&amp; c\x00\x1b[31m\x0b\ufffe\udc80"
    result = synthetic([finding(message=message, scope="module <X&Y>\x07")], trace="run/<evil>&\x1b.json",
                       name="fill]]>&<x>")
    out = renderer("junit")(result)
    root = ET.fromstring(out.encode("utf-8"))   # strict: expat refuses what XML 1.0 cannot hold
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "run/<evil>&\\x1b.json"
    (case,) = suite.findall("testcase")
    assert case.get("name") == "KL001 fill]]>&<x>"
    text = case.find("failure").text
    assert "a ]]> b <script>&amp; c\\x00\\x1b[31m\\x0b" in text and "scope: module <X&Y>\\x07" in text
    assert "source: pkg/linear.py:17 (forward)" in text
    assert not _UNSAFE.search(text.replace("\n", "")) and "\ufffe" not in out
    assert out == renderer("junit")(result)   # deterministic


def test_junit_audit_has_a_case_per_workload():
    from kernlint.audit import AuditRun, WorkloadVerdict
    from kernlint.workloads.base import Workload

    def workload(name, regressed=False):
        return Workload(name=name, summary="", build=lambda device: None, expect={"KL001": "failed"},
                        regressed=regressed)

    report = TraceReport(trace="t.json", events=1, has_device_events=False, has_stacks=False, rank=None,
                         outcomes=[RuleOutcome("KL001", "fill-before-block-quant", "error", "passed")])
    run_ = AuditRun(device="cpu", metadata={"torch": "2.x"}, out_dir=None, seconds=2.0, verdicts=[
        WorkloadVerdict(workload("fp8-block-linear"), "cpu", report=report, seconds=1.0),
        WorkloadVerdict(workload("fp8-block-linear-new-ones", regressed=True), "cpu", report=report, seconds=1.0,
                        problems=["KL001: expected failed, got passed"])])
    root = ET.fromstring(audit_renderer("junit")(run_).encode("utf-8"))
    assert _counts(root) == {"tests": 2, "failures": 1, "errors": 0, "skipped": 0}
    ok, caught = root.iter("testcase")
    assert ok.get("name") == "fp8-block-linear" and ok.find("failure") is None
    assert caught.get("name") == "fp8-block-linear-new-ones (regressed)"
    assert caught.find("failure").get("message") == "KL001: expected failed, got passed"
    assert "KL001: passed" in caught.find("failure").text

