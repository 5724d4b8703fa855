"""Issue 39, must show: the same traces, config and inline ignores give the same findings from the CLI,
`kernlint.check()`, the pytest fixture and `audit --replay`.

A project of its own (a kernlint.toml that changes a rule's severity, a model whose two layers each make their
placeholder scale with `new_ones`, one of them reviewed with an inline ignore) is profiled by the pytest fixture
in a pytest run of its own; the trace it keeps is then checked by `kernlint check`, by `kernlint.check()` and by
`kernlint audit --replay` (a case naming the trace), each from the project's folder. All four must report the
one kept finding at the config's severity, at the same statement, and the reviewed one as suppressed inline.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

MODEL = textwrap.dedent('''\
    from kernlint.reference import Fp8BlockLinear


    class KeptNewOnes(Fp8BlockLinear):
        def _placeholder_scale(self, x):
            return x.new_ones(1)


    class ReviewedNewOnes(Fp8BlockLinear):
        def _placeholder_scale(self, x):  # kernlint: ignore[KL001] reviewed: a placeholder of one element
            return x.new_ones(1)
''')
KEPT_LINE = 6        # the statement of KeptNewOnes._placeholder_scale that issues aten::new_ones
# ReviewedNewOnes's statement: its ignore sits on the def line above it (what the profiler records, and where an
# inline comment is read), the suppressed finding names the statement as a kept one does.
REVIEWED_LINE = 11

BLOCK_TEST = textwrap.dedent('''\
    import json
    import os

    import torch

    from model import KeptNewOnes, ReviewedNewOnes


    def test_block(kernlint_check):
        torch.manual_seed(0)
        kept = KeptNewOnes.from_float(torch.randn(256, 256))
        reviewed = ReviewedNewOnes.from_float(torch.randn(256, 256))
        x = torch.randn(4, 256)
        with kernlint_check(rules=["KL001"], fail=False, device="cpu") as run:
            kept(x)
            reviewed(x)
        result = run.result
        out = {"trace": str(run.trace),
               "findings": [[f.rule, f.severity, f.source] for f in result.findings],
               "suppressed": [[s.finding.rule, s.finding.source, s.how] for s in result.suppressed]}
        with open(os.environ["KL_ONE_VERDICT_OUT"], "w") as f:
            json.dump(out, f)
''')
CONFIG = textwrap.dedent('''\
    # The project's config: KL001 is a warning here (an error by default).
    [severity]
    KL001 = "warning"
''')


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, **env}
    environment.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run(args, cwd=cwd, env=environment, capture_output=True, text=True, timeout=300)


def _triples(findings: list[dict]) -> list[list]:
    return [[f["rule"], f["severity"], f["source"]] for f in findings]


def test_the_cli_the_api_the_fixture_and_audit_replay_give_one_verdict(tmp_path, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text(MODEL)
    (project / "test_block.py").write_text(BLOCK_TEST)
    (project / "kernlint.toml").write_text(CONFIG)
    cli_command = [sys.executable, "-m", "kernlint"]

    # 1. The pytest fixture profiles the block; the failing block's trace is kept in traces/.
    fixture_out = tmp_path / "fixture.json"
    ran = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                "--kernlint-trace-dir", "traces", "test_block.py"], project, KL_ONE_VERDICT_OUT=str(fixture_out))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    fixture = json.loads(fixture_out.read_text())
    trace = Path(fixture["trace"])
    assert trace.is_file() and trace.parent == project / "traces"

    kept = [["KL001", "warning", f"model.py:{KEPT_LINE}"]]
    reviewed = [["KL001", f"model.py:{REVIEWED_LINE}", "inline"]]
    assert fixture["findings"] == kept, fixture
    assert fixture["suppressed"] == reviewed, fixture

    # 2. `kernlint check`, from the project's folder.
    ran = _run([*cli_command, "check", str(trace), "--select", "KL001", "--format", "json", "-o", "cli.json"], project)
    assert ran.returncode == 1, ran.stderr
    cli = json.loads((project / "cli.json").read_text())
    assert _triples(cli["findings"]) == kept
    assert [[s["rule"], s["source"], s["how"]] for s in cli["suppressed"]["findings"]] == reviewed

    # 3. kernlint.check(), from the same folder (it reads the kernlint.toml found there, as the CLI does).
    import kernlint

    monkeypatch.chdir(project)
    api = kernlint.check(trace, rules=["KL001"])
    assert [[f.rule, f.severity, f.source] for f in api.findings] == kept
    assert [[s.finding.rule, s.finding.source, s.how] for s in api.suppressed] == reviewed
    assert not api.passed
    # isolated=True reads no config: the finding at KL001's own severity; the inline comment still holds.
    alone = kernlint.check(trace, rules=["KL001"], isolated=True)
    assert [[f.rule, f.severity, f.source] for f in alone.findings] == [["KL001", "error", f"model.py:{KEPT_LINE}"]]

    # 4. `kernlint audit --replay` on a case that names the trace.
    cases = project / "replay" / "cases"
    cases.mkdir(parents=True)
    (cases / "KL001.toml").write_text(textwrap.dedent(f'''\
        rule = "KL001"

        [[case]]
        name = "project-block"
        trace = "{os.path.relpath(trace, cases.parent)}"
        expect = "failed"
        findings = 1
    '''))
    ran = _run([*cli_command, "audit", "--replay", "--fixtures", "replay", "--format", "json", "-o", "audit.json"],
               project)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (case,) = json.loads((project / "audit.json").read_text())["cases"]
    assert case["problems"] == [] and case["verdict"] == "failed"
    assert _triples(case["findings"]) == kept
    assert [[s["rule"], s["source"], s["how"]] for s in case["suppressed"]] == reviewed
