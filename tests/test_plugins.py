"""Another package adds a check kind and an output format through entry points (kernlint.check_kinds,
kernlint.formats): installed as a package (its dist-info on the path), they load and run in `kernlint check`
like the built-in ones; a plugin that fails to load, raises while it runs or (a backend) returns another
task's result is one line naming its entry point and module, exit 2."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from conftest import FIXTURES, REPO

TRACE = FIXTURES / "external" / "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"

KIND = '''
"""count-named-ops: at most `max` ops whose name matches `names` in the whole trace."""
from kernlint.rules.checks.base import CheckKind, CheckSpec, make_finding, register
from kernlint.rules.fields import DeviceCategories, Patterns
from kernlint.rules.result import decided, not_applicable
from kernlint.trace.rows import rows_matching
from kernlint.trace.scopes import Scope


class CountNamedOps(CheckSpec, tag="count-named-ops"):
    names: Patterns
    max: int = 0
    also_categories: DeviceCategories = []


def run(rule, table, index):
    rows = [r for p in rule.spec.check.names for r in rows_matching(index, ("op",), p).tolist()]
    if not rows:
        return not_applicable(rule, "no op matches")
    whole = Scope(row=-1, kind="window", name="whole trace", thread="", ts=0.0, end=0.0)
    extra = rows[rule.spec.check.max:]
    found = [make_finding(rule, index, r, whole, f"{index.name[r]} past the budget", None) for r in extra]
    return decided(rule, found, "op", len(rows))


register(CheckKind(type="count-named-ops", spec=CountNamedOps, run=run,
                   summary="At most `max` ops matching `names` in the trace."))
'''

FORMAT = '''
"""one line per finding: RULE<TAB>message (a demo plugin format)"""
from kernlint.report import Format, Renderer


def render(result, ctx):
    return "\\n".join(f"{f.rule}\\t{f.message}" for f in result.findings) + f"\\nDEMO {len(result.findings)}"


FORMAT = Format("demo", "one line per finding (a demo plugin)", Renderer(check=render))
'''

BACKEND = '''
"""A parallel backend that runs every task here, last first, and counts them in a file."""
import os

from kernlint.parallel import Backend


def run(fn, shared, items, *, workers, address=None):
    with open(os.environ["KL_DEMO_COUNT"], "a") as out:
        for i in reversed(range(len(items))):
            out.write("task\\n")
            yield i, fn(items[i], *shared)


BACKEND = Backend(name="backwards", summary="last first, in this process", run=run)
'''

RULE = '''
id = "DEMO001"
name = "too-many-copies"
severity = "error"
summary = "At most one aten::copy_ in the trace."

[check]
type = "count-named-ops"
names = ["^aten::copy_$"]
max = 1

[docs]
what-it-does = "Counts copies."
why-is-this-bad = "Copies cost."
example = "x.to(device)"
use-instead = "pin once"
references = []
'''


def _install(site, kind: str = KIND, fmt: str = FORMAT, backend: str = BACKEND):
    pkg = site / "kl_demo_plugin"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "kinds.py").write_text(textwrap.dedent(kind))
    (pkg / "fmt.py").write_text(textwrap.dedent(fmt))
    (pkg / "backend.py").write_text(textwrap.dedent(backend))
    info = site / "kl_demo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kl-demo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[kernlint.check_kinds]\ncount-named-ops = kl_demo_plugin.kinds\n\n"
                                           "[kernlint.formats]\ndemo = kl_demo_plugin.fmt:FORMAT\n\n"
                                           "[kernlint.parallel_backends]\nbackwards = kl_demo_plugin.backend:BACKEND\n")


def _kernlint(site, *args, **env_extra):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), **env_extra}
    return subprocess.run([sys.executable, "-m", "kernlint.cli", *args], capture_output=True, text=True, env=env,
                          cwd=site)


def test_a_plugin_kind_and_format_load_and_run(tmp_path):
    site = tmp_path / "site"
    _install(site)
    (tmp_path / "DEMO001.toml").write_text(RULE)
    done = _kernlint(site, "check", str(TRACE), "--isolated", "--rules", str(tmp_path / "DEMO001.toml"),
                     "--select", "DEMO001", "--format", "demo")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "DEMO 1" and lines[0] == "DEMO001\taten::copy_ past the budget", done.stdout
    listed = _kernlint(site, "check", "--help")
    assert "demo (one line per finding (a demo plugin))" in " ".join(listed.stdout.split())


def test_a_plugin_backend_runs_the_map(tmp_path):
    site = tmp_path / "site"
    _install(site)
    count = tmp_path / "count"
    plain = _kernlint(site, "check", str(TRACE), "--isolated", "--format", "json")
    done = _kernlint(site, "check", str(TRACE), str(TRACE.parent / "hta__triton_example__triton_example.json.gz"),
                     "--isolated", "--format", "json", "--backend", "backwards", KL_DEMO_COUNT=str(count))
    assert done.returncode == plain.returncode, done.stderr
    assert count.read_text() == "task\ntask\n"   # both traces went through the plugin's backend
    assert '"trace": "' + str(TRACE) in done.stdout and str(TRACE) in plain.stdout


def test_a_plugin_pattern_field_is_checked_at_load(tmp_path):
    site = tmp_path / "site"
    _install(site)
    (tmp_path / "DEMO001.toml").write_text(RULE.replace('names = ["^aten::copy_$"]', 'names = ["(a)\\\\1"]'))
    done = _kernlint(site, "check", str(TRACE), "--isolated", "--rules", str(tmp_path / "DEMO001.toml"))
    assert done.returncode == 2
    assert done.stderr.strip().startswith(f"kernlint: error: {tmp_path / 'DEMO001.toml'}:9: check.names:"), done.stderr


def test_a_plugin_category_field_is_checked_at_load_by_its_declared_type(tmp_path):
    """Issue 39: a kind declares a field's type (DeviceCategories): a wrong category in it is refused at load, one
    line naming the file, line and key, with no list in the loader naming the field."""
    site = tmp_path / "site"
    _install(site)
    (tmp_path / "DEMO001.toml").write_text(RULE.replace("max = 1\n", 'max = 1\nalso-categories = ["fil"]\n'))
    done = _kernlint(site, "check", str(TRACE), "--isolated", "--rules", str(tmp_path / "DEMO001.toml"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"kernlint: error: {tmp_path / 'DEMO001.toml'}:11: check.also-categories: unknown "
                                  "device category 'fil' (known: fill, "), done.stderr
    assert done.stderr.count("\n") == 1


def test_a_plugin_that_fails_to_load_is_one_line(tmp_path):
    site = tmp_path / "site"
    _install(site, kind="raise RuntimeError('broken plugin')\n")
    done = _kernlint(site, "check", str(TRACE), "--isolated")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.strip() == ("kernlint: error: check kind plugin 'count-named-ops' (kl_demo_plugin.kinds) "
                                   "failed to load: RuntimeError: broken plugin"), done.stderr


# -- issue 38: a plugin that raises or breaks its contract is named ---------------------------------------------

def test_a_plugin_backend_that_returns_another_tasks_result_is_named(tmp_path):
    site = tmp_path / "site"
    _install(site, backend=BACKEND.replace("yield i, fn(items[i], *shared)", "yield i, fn(items[0], *shared)"))
    other = TRACE.parent / "hta__triton_example__triton_example.json.gz"
    done = _kernlint(site, "check", str(TRACE), str(other), "--isolated", "--backend", "backwards",
                     KL_DEMO_COUNT=str(tmp_path / "count"))
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert done.stderr == ("kernlint: error: parallel backend plugin 'backwards' (kl_demo_plugin.backend:BACKEND): "
                           f"returned the result of task #1 ({TRACE}) as that of task #2 ({other}) (a bug in that "
                           "plugin, not in kernlint; run without --backend backwards)\n")


def test_a_plugin_that_raises_while_it_runs_is_named(tmp_path):
    """A check kind raising in a worker process (its traceback stays there) and a format raising here."""
    site = tmp_path / "site"
    _install(site, kind=KIND.replace("    rows = [", "    raise RuntimeError('kind boom')\n    rows = ["),
             fmt=FORMAT.replace('    return "', '    raise KeyError("fmt boom")\n    return "'))
    (tmp_path / "DEMO001.toml").write_text(RULE)
    other = TRACE.parent / "hta__triton_example__triton_example.json.gz"
    kind = _kernlint(site, "check", str(TRACE), str(other), "--isolated", "--rules", str(tmp_path / "DEMO001.toml"),
                     "--select", "DEMO001", "-j", "2")
    assert kind.returncode == 2 and kind.stderr == (
        f"kernlint: error: {TRACE}: check kind plugin 'count-named-ops' (kl_demo_plugin.kinds) raised "
        "RuntimeError: kind boom (a bug in that plugin, not in kernlint; rerun with --debug for the traceback)\n")
    fmt = _kernlint(site, "check", str(TRACE), "--isolated", "--format", "demo")
    assert fmt.returncode == 2 and fmt.stderr == (
        "kernlint: error: output format plugin 'demo' (kl_demo_plugin.fmt:FORMAT) raised KeyError: 'fmt boom' (a "
        "bug in that plugin, not in kernlint; rerun with --debug for the traceback)\n")


def test_the_builtins_are_default_plugins_loaded_as_plugins_are():
    """Issue 39: every registry gets its built-ins from a list of module names (its default plugins, as pytest's
    default_plugins), loaded by the code that loads an entry point's module; every check kind module is listed."""
    import pkgutil

    import kernlint.rules.checks as checks
    from kernlint.parallel import BACKENDS
    from kernlint.report import FORMATS
    from kernlint.report.builtin_formats import BUILTIN_FORMATS
    from kernlint.rules.checks import REGISTRY as KINDS
    from kernlint.rules.checks.base import DEFAULT_PLUGINS
    from kernlint.workloads import BUILTIN_WORKLOADS
    from kernlint.workloads.base import WORKLOADS

    kinds = {f"{checks.__name__}.{m.name}" for m in pkgutil.iter_modules(checks.__path__)
             if m.name != "base" and not m.name.startswith("_")}
    assert set(DEFAULT_PLUGINS) == kinds and len(DEFAULT_PLUGINS) == len(kinds)

    def builtin(registry):
        return {n for n in registry.names() if registry.is_builtin(n)}

    assert {KINDS.get(n).spec.__module__ for n in builtin(KINDS)} == set(KINDS.default_plugins)
    assert {BACKENDS.get(n).run.__module__ for n in builtin(BACKENDS)} == set(BACKENDS.default_plugins)
    assert builtin(FORMATS) == {f.name for f in BUILTIN_FORMATS}
    assert FORMATS.default_plugins == ("kernlint.report.builtin_formats",)
    assert builtin(WORKLOADS) == set(BUILTIN_WORKLOADS) and WORKLOADS.default_plugins == ("kernlint.workloads.fp8",)
    for registry in (KINDS, FORMATS, BACKENDS, WORKLOADS):   # loaded once: again is what it registered then
        for plugin in registry.default_plugins:
            assert registry.load_plugin(plugin) == registry.load_plugin(plugin)
