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
    assert data["findings"] == [] and data["suppressed"]["by"] == {"inline": 1}
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
