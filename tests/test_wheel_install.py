"""What users install is the built wheel: build it (sdist first, then the wheel from the sdist), install it
into fresh virtual environments and run it there, far from the checkout.

- the light install (no torch, no pandas): check, rules, explain, report, baseline record, the API; the commands
  that capture say in one line which extra they need, and so does `EventTable.frame` (pandas); a zip import of
  the wheel loads the shipped rules too;
- the capture extra beside the local CPU torch: `kernlint audit --device cpu`.

Slow (about a minute and a half on the 2-core machine: two venvs, torch unpacked once); CI runs them.
"""
from __future__ import annotations

import json
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from wheel_build import (
    CLEAN,
    DEAD_FILL,
    PYPROJECT,
    REGRESSED,
    REPO,
    SHIPPED_RULE_IDS,
    _env,
    _ok,
    _pip,
    _pip_install,
    _place_dependencies,
    _run,
    _venv,
)

pytestmark = pytest.mark.install
pytest_plugins = ["wheel_build"]   # the `dist` fixture: the sdist and the wheel built from it


@pytest.fixture(scope="module")
def light(dist, tmp_path_factory) -> Path:
    """A fresh venv with the wheel and its core dependencies: no torch, no pandas. The dependencies this session's venv
    has are placed as pip installed them here (wheel_build._place_dependencies: only what the wheel declares)."""
    bindir = _venv(tmp_path_factory.mktemp("light") / "venv")
    _place_dependencies(bindir, dist["wheel"])
    _pip_install(bindir, str(dist["wheel"]))
    return bindir


def test_the_wheel_carries_the_package_data(dist):
    names = set(zipfile.ZipFile(dist["wheel"]).namelist())
    assert {f"kernlint/builtin_rules/{i}.toml" for i in SHIPPED_RULE_IDS} <= names
    assert {"kernlint/docs/rule-language.md", "kernlint/trace/aten_out_arguments.json",
            "kernlint/report/templates/report.html.j2", "kernlint/report/templates/report.css",
            "kernlint/report/templates/report.js"} <= names


def test_the_wheel_carries_the_native_reader_built_and_its_installed_loads_use_it(light, dist, tmp_path):
    """Where the build machine has a C compiler (this one has), the wheel holds the compiled native reader,
    not its source, and the installed kernlint decodes a trace's chunks with it."""
    names = zipfile.ZipFile(dist["wheel"]).namelist()
    assert any(n.startswith("kernlint/trace/_kineto_chunk.") and n.endswith(".so") for n in names), names
    assert "kernlint/trace/_kineto_chunk.c" not in names
    probe = ("import kernlint.trace.native_chunk as n, kernlint.trace.load as l; calls = []; f = n.add_chunk_native\n"
             "def counted(*a, **k):\n    r = f(*a, **k); calls.append(r is not None); return r\n"
             "import kernlint.trace.columns as c; c.add_chunk_native = counted\n"
             f"l.load_trace({str(REGRESSED)!r}); print(n.native_module().__file__, all(calls) and len(calls))")
    out = _ok(_run([light / "python", "-c", probe], cwd=tmp_path)).stdout.split()
    assert str(light.parent) in out[0] and int(out[1]) >= 1, out


def test_the_wheel_metadata_leaves_torch_to_the_capture_extra_and_declares_numpy(dist):
    with zipfile.ZipFile(dist["wheel"]) as whl:
        meta_name = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(whl.read(meta_name).decode())
    requires = [Requirement(r) for r in meta.get_all("Requires-Dist")]
    core = {r.name.lower() for r in requires if r.marker is None}
    assert "numpy" in core and "torch" not in core
    torch_reqs = [r for r in requires if r.name == "torch"]
    assert torch_reqs and all(r.marker.evaluate({"extra": "capture"}) for r in torch_reqs)
    assert not any(r.marker.evaluate({"extra": ""}) for r in torch_reqs)
    # pandas (and what it pulls: tzdata, python-dateutil) is the `pandas` extra, for EventTable.frame alone.
    assert "pandas" not in core
    pandas_reqs = [r for r in requires if r.name == "pandas"]
    assert pandas_reqs and all(r.marker.evaluate({"extra": "pandas"}) for r in pandas_reqs)
    assert "kernlint[capture,tensorboard,distributed,pandas]" in PYPROJECT["project"]["optional-dependencies"]["dev"]
    assert Version("2.15.0") in torch_reqs[0].specifier
    assert meta["Requires-Python"] == PYPROJECT["project"]["requires-python"]


def test_the_light_install_checks_reports_and_records_without_torch(light, dist, tmp_path):
    kernlint = light / "kernlint"
    probe = _ok(_run([light / "python", "-c", "import importlib.util as u, kernlint; "
                      "print(u.find_spec('torch') is None, u.find_spec('pandas') is None, kernlint.__file__)"],
                     cwd=tmp_path)).stdout.split()
    assert probe[0] == "True", "torch was installed"
    assert probe[1] == "True", "pandas was installed"
    assert str(light.parent) in probe[2], "kernlint was imported from somewhere else than the venv"
    installed = _pip(light, "list", "--format", "json").stdout
    names = {p["name"].lower() for p in json.loads(installed)}
    assert not {n for n in names if n == "torch" or n.startswith("nvidia-")}, sorted(names)
    assert not names & {"pandas", "tzdata", "python-dateutil"}, sorted(names)

    assert _run([kernlint, "check", REGRESSED], cwd=tmp_path).returncode == 1
    clean = _run([kernlint, "check", CLEAN], cwd=tmp_path)
    assert clean.returncode == 0 and "no findings" in clean.stdout

    listed = json.loads(_ok(_run([kernlint, "rules", "--format", "json"], cwd=tmp_path)).stdout)
    assert sorted(r["id"] for r in listed) == SHIPPED_RULE_IDS
    assert all("site-packages" in r["path"] for r in listed), "the rules came from outside the installed package"

    explained = _ok(_run([kernlint, "explain", "KL001"], cwd=tmp_path)).stdout
    assert "fill-before-block-quant" in explained and "Use instead" in explained
    assert "zoo.md" not in explained   # cites nothing the wheel does not ship
    assert "## " in _ok(_run([kernlint, "explain", "--schema"], cwd=tmp_path)).stdout

    # pyproject ships no project URL (whoever publishes fills [project.urls]): SARIF links to nothing.
    sarif = json.loads(_run([kernlint, "check", REGRESSED, "--format", "sarif"], cwd=tmp_path).stdout)
    driver = sarif["runs"][0]["tool"]["driver"]
    assert driver["rules"] and "informationUri" not in driver and not any("helpUri" in r for r in driver["rules"])
    # GitLab Code Quality from the wheel too: one issue per cause, the rule as check_name, a line to point at.
    gitlab = json.loads(_run([kernlint, "check", REGRESSED, "--format", "gitlab"], cwd=tmp_path).stdout)
    assert gitlab and {i["check_name"] for i in gitlab} >= {"KL001"}
    assert all(i["location"]["lines"]["begin"] >= 1 and i["fingerprint"] for i in gitlab)

    html = tmp_path / "report.html"
    _ok(_run([kernlint, "report", REGRESSED, "-o", html], cwd=tmp_path))
    assert html.read_text().lstrip().lower().startswith("<!doctype html") and "KL001" in html.read_text()

    baseline = tmp_path / "baseline.json"
    _ok(_run([kernlint, "baseline", "record", CLEAN, "-o", baseline], cwd=tmp_path))
    assert json.loads(baseline.read_text())["programs"]
    assert _run([kernlint, "check", CLEAN, "--baseline", baseline], cwd=tmp_path).returncode == 0

    api = _ok(_run([light / "python", "-c", f"import kernlint; print(kernlint.check({str(REGRESSED)!r}).passed)"],
                   cwd=tmp_path))
    assert api.stdout.strip() == "False"


def test_the_light_install_gives_the_findings_the_full_install_gives(light, tmp_path):
    """Verdicts must not depend on torch being installed (dead-fill reads out= positions from a shipped table)."""
    traces = [REGRESSED, CLEAN, *DEAD_FILL]
    args = ["check", *traces, "--format", "json", "--exit-zero", "-o"]
    _ok(_run([light / "kernlint", *args, tmp_path / "light.json"], cwd=tmp_path))
    _ok(_run([sys.executable, "-m", "kernlint", *args, tmp_path / "full.json"], cwd=tmp_path))
    light_report, full_report = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("light", "full"))
    assert light_report["findings"] == full_report["findings"]
    assert any(f["rule"] == "KL101" for f in light_report["findings"])


@pytest.mark.parametrize("command, what", [
    (["run", "fp8-block-linear"], "kernlint run"),
    (["audit"], "kernlint audit"),
    (["baseline", "record", "--workload", "fp8-block-linear", "-o", "b.json"], "kernlint baseline record"),
])
def test_capturing_without_torch_is_one_line_naming_the_extra(light, tmp_path, command, what):
    proc = _run([light / "kernlint", *command], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert what in proc.stderr and "pip install 'kernlint[capture]'" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "b.json").exists()


def test_audit_replay_from_the_wheel_says_in_one_line_where_to_get_the_fixtures(light, tmp_path):
    proc = _run([light / "kernlint", "audit", "--replay"], cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", proc
    (line,) = proc.stderr.strip().splitlines()
    assert "pip install kernlint-fixtures" in line and "--fixtures PATH/TO/kernlint/fixtures" in line, line
    assert "Traceback" not in proc.stderr
    # With the fixtures wheel installed the replay needs no --fixtures: tests/test_fixtures_wheel.py.


def test_profiling_from_python_without_torch_raises_the_typed_error(light, tmp_path):
    code = ("import kernlint\nfrom kernlint.errors import MissingExtraError\ntry:\n"
            "    with kernlint.profiling():\n        pass\nexcept MissingExtraError as e:\n    print('missing:', e)\n")
    out = _ok(_run([light / "python", "-c", code], cwd=tmp_path)).stdout
    assert out.startswith("missing: kernlint.profiling() needs torch") and "kernlint[capture]" in out


def test_the_event_frame_without_pandas_is_one_line_naming_the_extra(light, tmp_path):
    """Only the Python API's DataFrame needs pandas: the table loads and its columns read without it."""
    code = ("from kernlint.errors import MissingExtraError\nfrom kernlint.trace.load import load_trace\n"
            f"table = load_trace({str(REGRESSED)!r})\nprint('columns:', len(table.columns['kind']) == len(table))\n"
            "try:\n    table.frame\nexcept MissingExtraError as e:\n    print('missing:', e)\n")
    out = _ok(_run([light / "python", "-c", code], cwd=tmp_path)).stdout.splitlines()
    assert out[0] == "columns: True" and len(out) == 2, out
    assert out[1] == "missing: EventTable.frame needs pandas, which is not installed: pip install 'kernlint[pandas]'"
    frame = f"import kernlint.trace.load as l; l.load_trace({str(REGRESSED)!r}).frame"
    uncaught = _run([light / "python", "-c", frame], cwd=tmp_path)
    assert uncaught.returncode == 1
    assert uncaught.stderr.strip().splitlines()[-1] == (
        "kernlint.errors.MissingExtraError: EventTable.frame needs pandas, which is not installed: "
        "pip install 'kernlint[pandas]'")


def test_a_zip_import_of_the_wheel_loads_the_shipped_rules(light, dist, tmp_path):
    env = {**_env(), "PYTHONPATH": str(dist["wheel"])}
    where = _ok(_run([light / "python", "-c", "import kernlint; print(kernlint.__file__)"], cwd=tmp_path, env=env))
    assert where.stdout.strip().startswith(str(dist["wheel"]))
    listed = json.loads(_ok(_run([light / "python", "-m", "kernlint", "rules", "--format", "json"], cwd=tmp_path,
                                 env=env)).stdout)
    assert sorted(r["id"] for r in listed) == SHIPPED_RULE_IDS
    assert _run([light / "python", "-m", "kernlint", "check", REGRESSED], cwd=tmp_path, env=env).returncode == 1


def test_a_source_checkout_on_the_path_reads_its_own_rules(light, tmp_path):
    """The device scripts run the checkout uninstalled (PYTHONPATH=checkout): there is no
    kernlint.builtin_rules package then, and the checkout's rules/ and docs/ are read instead."""
    env = {**_env(), "PYTHONPATH": str(REPO)}
    code = ("import kernlint; from kernlint.rules.loader import builtin_rule_files, rule_language_reference; "
            "print(kernlint.__file__); print(builtin_rule_files()[0]); print(len(rule_language_reference()))")
    out = _ok(_run([light / "python", "-c", code], cwd=tmp_path, env=env)).stdout.splitlines()
    assert out[0].startswith(str(REPO / "kernlint")) and out[1] == str(REPO / "rules" / "KL001.toml")
    assert int(out[2]) > 1000
