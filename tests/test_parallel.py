"""`--jobs N`: the map over traces in worker processes, the reduce over their summaries; the same reports
as the serial path, in argument order, with a worker's typed error raised as the same type."""
from __future__ import annotations

import ast
import json
import pickle
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, REPO
from kernlint.cli import main
from kernlint.errors import ConfigError, KernlintError, PluginError, RuleFileError, TraceError
from kernlint.parallel import BACKENDS, Backend, backend_names, check_paths, get_backend, register, resolve_jobs
from kernlint.parallel.work import Done, Failure, WorkerError, check_path, failure, matched_results
from kernlint.pipeline import check_tables, compare_checked
from kernlint.rules.engine import combine_checked
from kernlint.rules.loader import load_rules
from kernlint.rules.summary import CheckedTrace
from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES, discover_traces, load_trace

TRACES = FIXTURES / "traces"
# Every recorded multi-rank run: NCCL on the H200 (balanced, a sync on rank 1, every rank syncing, new_ones),
# gloo on the CPU, the window-edge and dispatch cases, and runs with several invocations and cycles.
MULTI_RANK = [TRACES / "gpu-tp2-nccl", TRACES / "cpu-gloo", TRACES / "gpu-edges", TRACES / "cpu-runs"]
RULES = load_rules()


def _files(*folders: Path) -> list[Path]:
    return discover_traces(folders).files


def _serial(files, rules=RULES, **options):
    return check_tables([load_trace(p) for p in files], rules, **options)


def _parallel(files, rules=RULES, **options):
    return combine_checked(check_paths(files, rules, max_bytes=DEFAULT_MAX_TRACE_BYTES, **options), rules)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def multi_rank_files():
    return _files(*MULTI_RANK)


@pytest.fixture(scope="module")
def serial_reports(multi_rank_files):
    reports = _serial(multi_rank_files)
    assert sum(1 for r in reports if r.ranks) >= 10   # the fixtures hold many run groups
    return reports


def test_two_worker_processes_give_the_serial_reports(multi_rank_files, serial_reports):
    assert _parallel(multi_rank_files, jobs=2, backend="processes") == serial_reports


@pytest.fixture(scope="module")
def streamed(multi_rank_files):
    """The map on the streaming serial backend (one trace at a time, let go): made once for the tests below."""
    return check_paths(multi_rank_files, RULES, max_bytes=DEFAULT_MAX_TRACE_BYTES, jobs=1)


def test_the_streaming_serial_backend_gives_the_same_reports(streamed, serial_reports):
    assert combine_checked(streamed, RULES) == serial_reports


def test_group_verdicts_come_from_summaries_that_crossed_a_process_boundary(streamed, serial_reports):
    """The cross-rank stage reads only what pickles: no table is reachable from a summary."""
    checked = streamed
    shipped = pickle.loads(pickle.dumps(checked))
    assert combine_checked(shipped, RULES) == serial_reports
    for c in checked:
        size = len(pickle.dumps(c))
        assert size < 64_000, (c.summary.path, size)   # the fixtures' traces are 60-900 KB gzipped


def _reversed_backend():
    """A backend whose workers finish in the reverse order of the arguments."""
    def run(fn, shared, items, *, workers, address=None):
        for i in reversed(range(len(items))):
            yield i, fn(items[i], *shared)

    return Backend(name="test-reversed", summary="finishes last first", run=run)


@pytest.fixture
def reversed_backend():
    backend = register(_reversed_backend())
    yield backend.name
    BACKENDS.remove(backend.name)


def test_reports_keep_the_argument_order_whatever_order_workers_finish(reversed_backend, multi_rank_files,
                                                                      serial_reports):
    checked = check_paths(multi_rank_files, RULES, max_bytes=DEFAULT_MAX_TRACE_BYTES, backend=reversed_backend)
    assert [c.summary.path for c in checked] == [str(p) for p in multi_rank_files]
    assert combine_checked(checked, RULES) == serial_reports


def _broken_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(TRACES / "gpu-tp2-nccl" / "fp8-tp-mlp", run)
    (run / "aa-no-events.json").write_text(json.dumps({"traceEvents": [], "schemaVersion": 1}))
    (run / "zz-truncated.json").write_text('{"traceEvents": [')
    return run


@pytest.mark.parametrize("backend", ["serial", "processes", "test-reversed"])
def test_a_worker_error_comes_back_as_the_same_type_for_the_first_file_in_argument_order(tmp_path, backend,
                                                                                         reversed_backend):
    run = _broken_run(tmp_path)
    files = _files(run)
    with pytest.raises(TraceError) as info:
        check_paths(files, RULES, max_bytes=DEFAULT_MAX_TRACE_BYTES, jobs=2, backend=backend)
    assert type(info.value) is TraceError and info.value.exit_code == 2
    assert info.value.path == str(run / "aa-no-events.json")
    assert info.value.one_line() == str(info.value) == f"{run / 'aa-no-events.json'}: holds no trace events"


def test_kernlint_errors_survive_pickling_as_failures():
    for exc in (TraceError("a.json", "not valid JSON", 3), RuleFileError(None, "bad"), ConfigError("x", "y")):
        back = pickle.loads(pickle.dumps(failure("a.json", exc))).exception()
        assert type(back) is type(exc) and back.one_line() == exc.one_line() and back.line == exc.line
        assert isinstance(back, KernlintError) and back.exit_code == 2
    bug = pickle.loads(pickle.dumps(failure("a.json", KeyError("frame")))).exception()
    assert type(bug) is KeyError and bug.args == ("frame",)


def test_an_exception_that_does_not_pickle_still_comes_back_as_one_line():
    class Local(Exception):   # a class pickle cannot find by name
        pass

    found = failure("t.json", Local("boom"))
    back = pickle.loads(pickle.dumps(found)).exception()
    assert isinstance(back, WorkerError) and "Local: boom" in str(back) and "t.json" in str(back)


def test_a_worker_never_raises(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{\"traceEvents\": [")
    result = check_path(str(bad), RULES, DEFAULT_MAX_TRACE_BYTES, False)
    assert isinstance(result, Failure) and result.kind is TraceError


def test_a_relative_path_is_read_from_the_callers_folder_and_keeps_its_name(monkeypatch, tmp_path):
    """What a remote worker does (its working directory is not ours): `base` resolves, the name stays."""
    shutil.copy(next((TRACES / "gpu").glob("*.json.gz")), tmp_path / "t.pt.trace.json.gz")
    monkeypatch.chdir(REPO)
    result = check_path("t.pt.trace.json.gz", RULES, DEFAULT_MAX_TRACE_BYTES, False, base=str(tmp_path))
    assert isinstance(result, CheckedTrace)
    assert result.report.trace == result.summary.path == "t.pt.trace.json.gz"
    missing = check_path("nope.json", RULES, DEFAULT_MAX_TRACE_BYTES, False, base=str(tmp_path))
    assert missing.exception().path == "nope.json"


def test_the_baseline_comparison_runs_from_the_workers_parts(tmp_path):
    """Each worker makes its trace's part of the program profile; the comparison equals the one made from
    the tables."""
    from kernlint.baseline import build_baseline, profile_traces

    run1, run2 = sorted((TRACES / "gpu-baseline").glob("*.json.gz"))
    baseline = build_baseline(profile_traces([load_trace(run1)]))
    rules = [r for r in RULES if r.needs_baseline] + [r for r in RULES if r.id == "KL001"]
    expected = _serial([run2], rules, baseline=baseline)
    checked = check_paths([run2], rules, max_bytes=DEFAULT_MAX_TRACE_BYTES, jobs=2, backend="processes",
                          baseline_parts=True)
    got = combine_checked(checked, rules, comparison=compare_checked(baseline, checked))
    assert got == expected and got[-1].subject == "baseline"
    assert [r.subject for r in combine_checked(checked, rules)] == ["trace"]   # no comparison, no baseline report


def test_jobs_auto_and_zero_mean_one_per_cpu():
    assert resolve_jobs("auto") == resolve_jobs(0) >= 1
    assert resolve_jobs(3) == 3
    with pytest.raises(ConfigError):
        resolve_jobs(-1)


def test_an_unknown_backend_is_one_config_error():
    with pytest.raises(ConfigError, match="no parallel backend 'nope' .*processes"):
        get_backend("nope")


def test_every_builtin_backend_registers_itself():
    assert {"serial", "processes", "dask"} <= set(backend_names())


# ---- the CLI ----------------------------------------------------------------------------------------------

def test_check_with_jobs_prints_what_the_serial_check_prints(tmp_path):
    folder = TRACES / "gpu-tp2-nccl"
    serial = invoke("check", folder, "--format", "json", "--isolated")
    parallel = invoke("check", folder, "--format", "json", "--isolated", "--jobs", "2")
    auto = invoke("check", folder, "--format", "json", "--isolated", "-j", "auto")
    assert serial.exit_code == parallel.exit_code == auto.exit_code == 1
    assert serial.output == parallel.output == auto.output


def test_a_bad_trace_under_jobs_is_one_line_and_exit_2(tmp_path):
    run = _broken_run(tmp_path)
    result = CliRunner().invoke(main, ["check", str(run), "--jobs", "2", "--isolated"])
    assert result.exit_code == 2
    assert result.output.strip() == f"kernlint: error: {run / 'aa-no-events.json'}: holds no trace events"


@pytest.mark.parametrize("args, message", [
    (["--backend", "nope"], "no parallel backend 'nope'"),
    (["--scheduler", "tcp://127.0.0.1:9", "--backend", "processes"], "--scheduler connects to a cluster"),
    (["--jobs", "-2"], "expected 0 (auto) or more"),
    (["--jobs", "many"], "expected a number of worker processes or auto"),
])
def test_bad_parallel_options_are_one_line_and_exit_2(tmp_path, args, message):
    result = CliRunner().invoke(main, ["check", str(TRACES / "gpu-tp2-nccl" / "fp8-tp-mlp"), "--isolated", *args])
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_html_with_jobs_checks_on_the_workers_and_writes_the_report(tmp_path):
    """--format html draws timelines from every trace's events (loaded here) while the checking runs on the
    --jobs workers: the report is written, and says what the serial one says."""
    run = TRACES / "gpu-tp2-nccl" / "fp8-tp-mlp-rank1-sync"
    serial, parallel = tmp_path / "serial.html", tmp_path / "parallel.html"
    one = CliRunner().invoke(main, ["check", str(run), "--isolated", "--format", "html", "-o", str(serial)])
    two = CliRunner().invoke(main, ["check", str(run), "--isolated", "--format", "html", "-o", str(parallel),
                                    "--jobs", "2"])
    assert one.exit_code == two.exit_code == 1, (one.output, two.output)
    assert parallel.stat().st_size > 10_000
    findings = re.compile(r'<article class="kl-finding[^"]*" id="[^"]*" data-rule="(KL\d{3})"')
    assert sorted(findings.findall(parallel.read_text())) == sorted(findings.findall(serial.read_text()))


def test_baseline_record_with_jobs_writes_the_serial_baseline(tmp_path):
    traces = sorted((TRACES / "gpu-baseline").glob("*.json.gz"))
    for name, extra in (("serial.json", []), ("jobs.json", ["--jobs", "2"])):
        result = invoke("baseline", "record", *traces, "-o", tmp_path / name, "--isolated", *extra)
        assert result.exit_code == 0, result.output
    serial, jobs = (json.loads((tmp_path / n).read_text()) for n in ("serial.json", "jobs.json"))
    for data in (serial, jobs):
        data.pop("created")
        data.pop("refresh_command")
    assert serial == jobs


# ---- layers -----------------------------------------------------------------------------------------------

def test_the_parallel_package_sits_below_report_and_the_cli():
    """kernlint.parallel runs the map of the rules layer: it may import trace, baseline, rules, errors."""
    for file in (REPO / "kernlint" / "parallel").glob("*.py"):
        tree = ast.parse(file.read_text())
        found = {n.module.split(".")[1] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("kernlint.")}
        assert not found & {"report", "cli", "api", "pytest_plugin", "capture", "workloads", "audit"}, file
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "print"]


def test_a_summary_is_a_fraction_of_its_trace():
    """An H200 rank trace's summary (identity, counts, each cross-rank rule's launch stream) pickles to a
    fraction of the gzipped trace."""
    src = sorted((TRACES / "gpu-tp2-nccl" / "fp8-tp-mlp").glob("*.json.gz"))[0]
    (checked,) = check_paths([src], RULES, max_bytes=DEFAULT_MAX_TRACE_BYTES)
    assert set(checked.summary.parts) == {r.id for r in RULES if r.cross_rank}
    stream = checked.summary.parts["KL003"]
    assert len(stream.keys) == len(stream.sites) == len(stream.ts) > 0
    assert len(pickle.dumps(checked.summary)) < src.stat().st_size / 4



def test_ctrl_c_under_jobs_stops_at_once_and_leaves_no_worker(tmp_path):
    """A terminal's Ctrl-C reaches the whole process group: the workers and their fork server ignore it, the
    parent stops them and exits 130 with one line (issue 22, item 15: it took 12 s and left workers behind)."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time

    for copy in range(6):   # 330 traces, about 8 s of checking: still running when the signal comes
        shutil.copytree(TRACES / "gpu-zoo", tmp_path / "run" / f"copy{copy}")
    # As from a terminal: Ctrl-C's default action, whatever this session inherited (a CI job or a shell's
    # background job starts with SIGINT ignored, and Python then keeps it ignored).
    proc = subprocess.Popen([sys.executable, "-m", "kernlint", "check", str(tmp_path / "run"), "--jobs", "2",
                             "--isolated"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline and not children.read_text().split():
        time.sleep(0.05)
    time.sleep(0.3)   # while the workers start (or, on a loaded machine, the fork server imports kernlint)
    assert proc.poll() is None, "the check ended before it could be interrupted"
    sent = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.monotonic() - sent < 10, (proc.returncode, err)   # was 12-17 s
    assert err.splitlines() == ["kernlint: interrupted"], err   # one line: no traceback from any process
    gone_by = time.monotonic() + 5   # the fork server and workers see their parent's pipe close
    while time.monotonic() < gone_by:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    left = subprocess.run(["ps", "-o", "pid=,args=", "-g", str(proc.pid)], capture_output=True, text=True).stdout
    assert not left.strip(), f"processes of the interrupted check still running:\n{left}"


# -- issue 38: each result is its own task's --------------------------------------------------------------------

def _backend_yielding(*pairs):
    """A backend that checks nothing and yields what it is told: (index, Done(task index, path, value))."""
    def run(fn, shared, items, *, workers, address=None):
        for index, of in pairs:
            yield index, Done(of, items[of].path, f"value of {of}")
    return run


def test_a_backend_that_returns_another_tasks_result_is_caught():
    items = ["a.json", "b.json"]
    assert list(matched_results(_backend_yielding((1, 1), (0, 0)), "x", None, (), items, workers=1)) == [
        (1, "value of 1"), (0, "value of 0")]
    for pairs, problem in [(((0, 0), (1, 0)), "returned the result of task #1 (a.json) as that of task #2 (b.json)"),
                           (((0, 0), (0, 0)), "returned the result of task #1 (a.json) twice")]:
        with pytest.raises(WorkerError, match=re.escape(f"the x backend {problem}")):   # a built-in's: a bug
            list(matched_results(_backend_yielding(*pairs), "x", None, (), items, workers=1))
        with pytest.raises(PluginError) as info:   # a plugin's: named, exit 2
            list(matched_results(_backend_yielding(*pairs), "x", "parallel backend plugin 'x' (pkg.mod:X)", (),
                                 items, workers=1))
        assert info.value.exit_code == 2 and info.value.one_line().startswith(
            f"parallel backend plugin 'x' (pkg.mod:X): {problem}")

    def not_a_result(fn, shared, items, *, workers, address=None):
        yield 0, "a CheckedTrace made up by the backend"
    with pytest.raises(WorkerError, match="yielded \\(int, str\\), not a task's index and result"):
        list(matched_results(not_a_result, "x", None, (), items, workers=1))
