"""pytest plugin: the `kernlint_check` fixture, which profiles a block of a test and fails the test when
the block's trace breaks a rule.

    def test_linear_launches_nothing_before_its_quant(kernlint_check):
        layer, x = build()
        with kernlint_check(rules=["KL001"]) as run:
            layer(x)
        # here the block was profiled and checked; run.result is the kernlint.api.CheckReport

pytest loads this module in every session of an environment where kernlint is installed (the `pytest11`
entry point `kernlint`; `-p no:kernlint` turns it off), so importing it must stay cheap: torch, pandas and
the rules load only when a test uses the fixture.

Command-line options (group "kernlint"):
  --kernlint-rules PATH      extra rule file or folder, loaded beside the shipped rules (repeatable)
  --kernlint-select RULES    rule ids, prefixes, names or ALL (comma-separated, repeatable): what a block
                             checks when its test names no rules
  --kernlint-trace-dir DIR   keep the trace of each block whose check fails here, named after the test
  --kernlint-baseline FILE   also compare each block with its program in this baseline (KL801-KL807): a
                             block's program is its test id (`#n` for the n-th block of a test, n > 1)
  --kernlint-record-baseline FILE
                             write the profile of every block into this baseline file when the session ends
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = ["KernlintOptions", "kernlint_check", "kernlint_options"]


@dataclass(frozen=True)
class KernlintOptions:
    """The session's kernlint options, as given on the command line (paths resolved)."""

    rule_paths: tuple[Path, ...] = ()
    select: tuple[str, ...] = ()
    trace_dir: Path | None = None
    baseline: Path | None = None
    record_baseline: Path | None = None
    # How many blocks each test has profiled so far: kept traces and baseline programs get distinct names.
    blocks_per_test: dict[str, int] = field(default_factory=dict, compare=False)
    # The profiles recorded for --kernlint-record-baseline, by program; the loaded --kernlint-baseline.
    recorded: dict[str, Any] = field(default_factory=dict, compare=False)
    loaded: dict[str, Any] = field(default_factory=dict, compare=False)

    def baseline_data(self):
        """The baseline, read once per session (a bad file fails the first test that uses it)."""
        if self.baseline is None:
            return None
        if "baseline" not in self.loaded:
            from kernlint.baseline import read_baseline

            self.loaded["baseline"] = read_baseline(self.baseline)
        return self.loaded["baseline"]


_OPTIONS_KEY = pytest.StashKey[KernlintOptions]()
_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
# A selector naming one rule: its id (KL001) or its kebab-case name (fill-before-block-quant).
_EXACT_RULE = re.compile(r"^(?:[A-Z]+\d{3}|[a-z0-9]+(?:-[a-z0-9]+)+)$")
_MAX_NAME = 120


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kernlint", "kernlint: check the torch.profiler trace of a block of a test")
    group.addoption("--kernlint-rules", action="append", default=[], metavar="PATH",
                    help="Extra kernlint rule file or folder, loaded beside the shipped rules (repeatable).")
    group.addoption("--kernlint-select", action="append", default=[], metavar="RULES",
                    help="Rule ids, prefixes, names or ALL (comma-separated, repeatable) that kernlint_check "
                         "applies when a test names no rules.")
    group.addoption("--kernlint-trace-dir", default=None, metavar="DIR",
                    help="Keep the trace of every kernlint_check block whose check fails in this folder "
                         "(<test id>-<n>.pt.trace.json.gz).")
    group.addoption("--kernlint-baseline", default=None, metavar="FILE",
                    help="Compare each kernlint_check block with its program (its test id) in this baseline.")
    group.addoption("--kernlint-record-baseline", default=None, metavar="FILE",
                    help="Write the profiles of every kernlint_check block into this baseline file at the end.")


def _existing(paths: Iterable[str], option: str) -> tuple[Path, ...]:
    out = []
    for text in paths:
        path = Path(text).expanduser().resolve()
        if not path.exists():
            raise pytest.UsageError(f"{option} {text}: no such file or folder")
        out.append(path)
    return tuple(out)


def pytest_configure(config: pytest.Config) -> None:
    rule_paths = _existing(config.getoption("kernlint_rules") or [], "--kernlint-rules")
    if rule_paths:
        # A bad rule file is a usage error of the session, reported before any test runs.
        from kernlint.errors import KernlintError
        from kernlint.rules.loader import load_rules

        try:
            load_rules(rule_paths)
        except KernlintError as exc:
            raise pytest.UsageError(f"--kernlint-rules: {exc}") from None
    baseline = config.getoption("kernlint_baseline")
    if baseline is not None:
        (baseline_path,) = _existing([baseline], "--kernlint-baseline")
        if not baseline_path.is_file():
            raise pytest.UsageError(f"--kernlint-baseline {baseline}: not a file")
    else:
        baseline_path = None
    trace_dir = config.getoption("kernlint_trace_dir")
    if trace_dir is not None:
        trace_path = Path(trace_dir).expanduser().resolve()
        if trace_path.exists() and not trace_path.is_dir():
            raise pytest.UsageError(f"--kernlint-trace-dir {trace_dir}: not a folder")
    else:
        trace_path = None
    select = tuple(s.strip() for value in config.getoption("kernlint_select") or []
                   for s in value.split(",") if s.strip())
    record = config.getoption("kernlint_record_baseline")
    record_path = Path(record).expanduser().resolve() if record else None
    if record_path is not None and record_path.is_dir():
        raise pytest.UsageError(f"--kernlint-record-baseline {record}: is a folder")
    config.addinivalue_line("markers", "kernlint(rules=None, *, select=(), ignore=(), fail_on='warning', "
                                       "allow_not_applicable=False): defaults of the test's kernlint_check blocks")
    config.stash[_OPTIONS_KEY] = KernlintOptions(rule_paths=rule_paths, select=select, trace_dir=trace_path,
                                                 baseline=baseline_path, record_baseline=record_path)


def _project_config(config: pytest.Config, options: KernlintOptions):
    """The project's kernlint.toml / [tool.kernlint] (a kernlint.config.Config, found upward from pytest's
    rootdir, as `kernlint check` finds it from the working directory). The fixture takes from it what
    `kernlint check` takes (kernlint.config.resolve_check): its rule files, [severity], [min-cost], `fail-on`,
    [per-source-ignores], [path-map], and its selection as the layer below the test's. Read when a test first
    uses the fixture, never at start-up (the plugin loads in every pytest session); a bad file fails that
    test with its one line."""
    if "project" not in options.loaded:
        from kernlint.config import resolve_config

        options.loaded["project"] = resolve_config(cwd=Path(config.rootpath))
    return options.loaded["project"]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    options = kernlint_options(session.config)
    if options.record_baseline is None or not options.recorded:
        return
    from kernlint.baseline import build_baseline, write_baseline

    refresh = f"pytest --kernlint-record-baseline {options.record_baseline}"
    write_baseline(options.record_baseline, build_baseline(dict(options.recorded), refresh_command=refresh))


def kernlint_options(config: pytest.Config) -> KernlintOptions:
    """The session's kernlint options (rule paths, selection, trace folder, baseline)."""
    return config.stash.get(_OPTIONS_KEY, KernlintOptions())


def pytest_report_header(config: pytest.Config) -> list[str]:
    options = kernlint_options(config)
    parts = [f"rules {', '.join(map(str, options.rule_paths))}" if options.rule_paths else "",
             f"select {','.join(options.select)}" if options.select else "",
             f"traces of failing blocks in {options.trace_dir}" if options.trace_dir else "",
             f"baseline {options.baseline}" if options.baseline else ""]
    parts = [p for p in parts if p]
    return [f"kernlint: {'; '.join(parts)}"] if parts else []


def _trace_name(nodeid: str, n: int) -> str:
    stem = _UNSAFE_FILE_CHARS.sub("_", nodeid).strip("_.")[:_MAX_NAME] or "test"
    return f"{stem}-{n}.pt.trace.json.gz"


@pytest.fixture
def kernlint_check(request: pytest.FixtureRequest):
    """`with kernlint_check(rules=None, *, select=(), ignore=(), fail_on="warning", fail=True, device=None,
    allow_not_applicable=False) as run:` profiles the block and checks its trace (kernlint.api.ProfiledBlock).

    A rule the test names that does not apply to the block (no anchor, no scope, nothing of its kind) fails
    the test (kernlint.api.RuleNotApplicable), unless `allow_not_applicable=True`. The test's
    `@pytest.mark.kernlint(rules=..., select=..., ignore=..., fail_on=..., allow_not_applicable=...)` gives the
    defaults of its blocks; the project's kernlint.toml / [tool.kernlint] applies as `kernlint check` applies
    it (its `fail-on` below the test's own fail_on, its selection below the test's), and so do the
    suppressions file and inline `# kernlint: ignore[...]` comments.

    When the block ends and the check did not pass, the test fails with kernlint.RuleViolation (an
    AssertionError) naming each finding: rule, message, source file:line. `fail=False` keeps the test going;
    `run.result` is the CheckReport either way. `rules` takes ids, prefixes, names and rule paths, like
    kernlint.check; the session's --kernlint-rules files are always loaded, and --kernlint-select applies
    when the test itself names no rules (neither in `rules` nor in `select`).
    """
    from kernlint.api import ProfiledBlock, split_rules

    options = kernlint_options(request.config)
    project = _project_config(request.config, options)

    marker = request.node.get_closest_marker("kernlint")
    defaults = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and marker.args:
        defaults.setdefault("rules", marker.args[0])

    def start(rules: Any = None, *, select: Iterable[str] = (), ignore: Iterable[str] = (),
              fail_on: str | None = None, fail: bool = True, device: Any = None,
              allow_not_applicable: bool | None = None) -> ProfiledBlock:
        rules = defaults.get("rules") if rules is None else rules
        select = select or defaults.get("select", ())
        ignore = ignore or defaults.get("ignore", ())
        # The test's own fail_on, else its marker's, else (None) the project's `fail-on`, as --fail-on > config.
        fail_on = fail_on or defaults.get("fail_on")
        if allow_not_applicable is None:
            allow_not_applicable = bool(defaults.get("allow_not_applicable", False))
        paths, selectors = split_rules(rules)
        select = [select] if isinstance(select, str) else list(select)
        ignore = [ignore] if isinstance(ignore, str) else list(ignore)
        named = bool(selectors or select)
        if not named:   # --kernlint-select, else (none) the project's selection: the layer below the test's
            select = list(options.select)
        save_trace = None
        n = options.blocks_per_test.get(request.node.nodeid, 0) + 1
        options.blocks_per_test[request.node.nodeid] = n
        if options.trace_dir is not None:
            save_trace = options.trace_dir / _trace_name(request.node.nodeid, n)
        program = request.node.nodeid if n == 1 else f"{request.node.nodeid}#{n}"
        # The settings are kernlint.check()'s (kernlint.api.resolve_settings) with the project's config: its rule
        # files, [severity], [min-cost], selection (a layer below the test's), fail-on, suppressions and
        # inline ignores, as `kernlint check` applies them.
        block = ProfiledBlock([*options.rule_paths, *paths, *selectors], select=select, ignore=ignore,
                              fail_on=fail_on, device=device, save_trace=save_trace, keep_trace="failed",
                              fail=fail, baseline=options.baseline_data(), program=program,
                              keep_profile=options.record_baseline is not None, config=project,
                              # The rules a test names must apply to its block: a check that cannot fail
                              # proves nothing. Named by id or name: each; by prefix, family or ALL: one.
                              require_applicable=False if not named or allow_not_applicable else
                              ([s for s in [*selectors, *select] if _EXACT_RULE.match(s)] or True))
        if options.record_baseline is not None:
            recorded.append(block)
        return block

    recorded: list = []
    yield start
    for block in recorded:   # blocks that finished: their profiles go into the recorded baseline
        if block.profile is not None:
            options.recorded[block.program] = block.profile

