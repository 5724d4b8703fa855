"""The audit runs its single-process workloads' children side by side (no baseline): each still a process of its
own under its own time limit, checked in the main thread, verdicts in workload order; a failure, Ctrl-C or
SIGTERM stops them all. With a baseline (timings compared) they run one at a time."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from fresh_interpreter import CHECKOUT_ENV
from kernlint.audit import run_audit
from kernlint.capture.child import ChildCancelled
from kernlint.errors import WorkloadError
from kernlint.workloads import Workload

# A fake workload: it writes "<name> <pid> <grandchild pid> <build start> <last step end>" lines to LOG, and
# starts a grandchild (a sleep) that must end with it.
_FAKE = '''
import os, signal, subprocess, sys, time

LOG = {log!r}

def _note(name, *fields):
    with open(LOG, "a") as fh:
        fh.write(" ".join(map(str, (name, os.getpid(), *fields))) + "\\n")

def workload(name, sleep_s, fail=None):
    def build(device):
        start = time.time()
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        _note(name, "start", grandchild.pid, start)
        print("building", name)
        if fail == "ignore-sigterm":   # stopped only by the SIGKILL after the grace period
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(sleep_s)
        if fail == "raise":
            raise RuntimeError("boom")
        if fail == "exit":
            os._exit(3)
        def step():
            _note(name, "end", grandchild.pid, time.time())
        return step
    return build
'''


def _fakes(tmp_path: Path, specs: list[tuple[str, float, str | None]]) -> tuple[list[Workload], Path]:
    log = tmp_path / "log.txt"
    code = _FAKE.format(log=str(log))
    for name, sleep_s, fail in specs:
        code += f"{name.replace('-', '_')} = workload({name!r}, {sleep_s!r}, {fail!r})\n"
    (tmp_path / "fakes.py").write_text(code)
    return [Workload(name, "a fake", lambda device: None, target=f"{tmp_path / 'fakes.py'}:{name.replace('-', '_')}")
            for name, _, _ in specs], log


def _log(log: Path) -> dict[str, dict]:
    seen: dict[str, dict] = {}
    for line in log.read_text().splitlines() if log.exists() else ():
        name, pid, what, grandchild, at = line.split()
        entry = seen.setdefault(name, {"pids": set()})
        entry["pids"] |= {int(pid), int(grandchild)}
        entry[what] = float(at)
    return seen


def _assert_gone(pids: set[int]) -> None:
    """None of these processes (nor their process groups) runs any longer: zombies of reaped parents aside."""
    deadline = time.monotonic() + 3.0
    while True:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for pid in alive:   # never leave one behind for the next test
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"still running: {alive}"


def test_single_process_workloads_run_side_by_side(tmp_path, monkeypatch):
    import kernlint.audit as audit

    monkeypatch.setattr(audit, "MAX_WORKLOAD_PROCESSES", 3)
    workloads, log = _fakes(tmp_path, [("w-a", 1.5, None), ("w-b", 1.5, None), ("w-c", 1.5, None)])
    printed: list[str] = []
    run = run_audit(workloads, [], "cpu", tmp_path / "out", process=audit.WorkloadProcess(on_output=printed.append))
    assert [v.workload.name for v in run.verdicts] == ["w-a", "w-b", "w-c"] and run.all_as_expected
    # what each prints comes after its name, whole lines from three processes at once
    assert {"w-a | building w-a", "w-b | building w-b", "w-c | building w-c"} <= set(printed), printed
    assert all(line.startswith(("w-a | ", "w-b | ", "w-c | ")) for line in printed), printed
    seen = _log(log)
    # all three were sleeping at once, and the audit took well under the sum of its workloads' times
    assert max(s["start"] for s in seen.values()) < min(s["end"] for s in seen.values()), seen
    assert run.seconds < 0.75 * sum(v.seconds for v in run.verdicts), [run.seconds, [v.seconds for v in run.verdicts]]
    _assert_gone({pid for s in seen.values() for pid in s["pids"]})


def test_the_progress_line_names_every_workload_being_captured():
    from kernlint.cli.audit import WorkloadStages

    stages = WorkloadStages("cuda")
    assert stages.step("capture", "w-a") == "capture w-a on cuda"
    for name in ("w-b", "w-c", "w-d", "w-e"):
        line = stages.step("capture", name)
    assert line == "capture w-a, w-b, w-c and 2 more on cuda"
    assert stages.step("check", "w-b") == "check w-b; capture w-a, w-c, w-d and 1 more on cuda"
    for name in ("w-a", "w-c", "w-d"):
        stages.step("check", name)
    assert stages.step("check", "w-e") == "check w-e on cuda"


@pytest.mark.parametrize("fail, what", [
    ("raise", "w-bad: the workload raised RuntimeError: boom"),
    ("exit", "w-bad: the workload's process exited with code 3"),
    ("hang", "w-bad: the workload did not finish within 2 s"),
])
def test_one_failing_workload_stops_the_others_and_is_the_error(tmp_path, monkeypatch, fail, what):
    import kernlint.audit as audit

    monkeypatch.setattr(audit, "MAX_WORKLOAD_PROCESSES", 3)
    if fail == "hang":   # the others finish: under the same limit, a slow one could run past it first
        specs = [("w-slow", 0.2, None), ("w-bad", 30.0, None), ("w-slower", 0.2, None)]
    else:
        specs = [("w-slow", 30.0, None), ("w-bad", 0.5, fail), ("w-slower", 30.0, None)]
    workloads, log = _fakes(tmp_path, specs)
    start = time.monotonic()
    with pytest.raises(WorkloadError) as caught:
        run_audit(workloads, [], "cpu", tmp_path / "out", process=audit.WorkloadProcess(timeout_s=2))
    assert what in str(caught.value)
    assert time.monotonic() - start < 15   # the 30 s workloads were stopped, not waited for
    seen = _log(log)
    assert {"w-slow", "w-slower"} <= set(seen), seen   # they had started: it is they that were stopped
    _assert_gone({pid for s in seen.values() for pid in s["pids"]})
    assert not [t for t in threading.enumerate() if t.name.startswith("kernlint-audit-")]


def test_of_several_failures_the_lowest_index_is_raised(tmp_path, monkeypatch):
    """w2 fails first; w1 fails while the audit stops the others; w0 is cancelled: w1's error, always."""
    import kernlint.audit as audit

    def capture_workload(workload, *args, cancel, **kwargs):
        if workload.name == "w0":
            assert cancel.wait(10)
            raise ChildCancelled("cancelled")
        if workload.name == "w1":
            assert cancel.wait(10)
            raise WorkloadError(None, "w1 failed")
        raise WorkloadError(None, "w2 failed")

    monkeypatch.setattr(audit, "MAX_WORKLOAD_PROCESSES", 3)
    monkeypatch.setattr(audit, "capture_workload", capture_workload)
    workloads = [Workload(f"w{i}", "", lambda device: None) for i in range(3)]
    with pytest.raises(WorkloadError, match="w1 failed"):
        run_audit(workloads, [], "cpu", tmp_path)


def test_verdicts_come_in_workload_order_checked_in_the_main_thread(tmp_path, monkeypatch):
    import kernlint.audit as audit

    def capture_workload(workload, *args, **kwargs):
        time.sleep({"w0": 0.6, "w1": 0.3, "w2": 0.0}[workload.name])   # they complete in reverse
        return [], 1

    checked, steps_from = [], set()

    def _checked(workload, device, *args):
        checked.append(workload.name)
        return audit.WorkloadVerdict(workload, device), []

    monkeypatch.setattr(audit, "MAX_WORKLOAD_PROCESSES", 3)
    monkeypatch.setattr(audit, "capture_workload", capture_workload)
    monkeypatch.setattr(audit, "_checked", _checked)
    workloads = [Workload(f"w{i}", "", lambda device: None) for i in range(3)]
    run = run_audit(workloads, [], "cpu", tmp_path, on_step=lambda stage, w: steps_from.add(threading.current_thread()))
    assert checked == ["w2", "w1", "w0"]
    assert [v.workload.name for v in run.verdicts] == ["w0", "w1", "w2"]
    assert steps_from == {threading.main_thread()}


def test_with_a_baseline_the_workloads_run_one_at_a_time(tmp_path, monkeypatch):
    import kernlint.audit as audit

    monkeypatch.setattr(audit, "MAX_WORKLOAD_PROCESSES", 3)
    workloads, log = _fakes(tmp_path, [("w-a", 0.3, None), ("w-b", 0.3, None)])
    run = run_audit(workloads, [], "cpu", tmp_path / "out", baseline="a baseline")   # no baseline rule: unread
    assert [v.workload.name for v in run.verdicts] == ["w-a", "w-b"]
    seen = _log(log)
    assert seen["w-a"]["end"] < seen["w-b"]["start"], seen


_DRIVER = """
import sys
import kernlint.audit as audit
import kernlint.capture.child as child
child._STOP_GRACE_S = 2.0   # a workload that ignores SIGTERM is killed after this
if sys.argv[2] == "spawned":   # no fork server (not Linux, or it could not start): each child a new interpreter
    import kernlint.capture.forkserver as forkserver
    forkserver.AVAILABLE = False
audit.MAX_WORKLOAD_PROCESSES = 3
# only the fake workloads of the fixtures folder given (regressed/workloads.py)
audit._candidates = lambda include_regressed, fixtures: list(audit.regressed_workloads(fixtures).values())
from kernlint.cli import main
main(["audit", "--device", "cpu", "--isolated", "--fixtures", sys.argv[1]], prog_name="kernlint")
"""


# Two signals to forked children need no case of their own: the fork server's close ends them whatever the audit's
# threads did (test_forkserver.py::test_closing_the_server_stops_what_it_runs).
@pytest.mark.parametrize("signals, children", [(1, "forked"), (2, "spawned")])
def test_sigterm_to_the_audit_stops_every_workload_running_side_by_side(tmp_path, signals, children):
    """One SIGTERM; or a second one while the audit stops its workloads (w-c ignores SIGTERM then, so stopping
    it takes the grace period): raised then, it must not cut the stopping short and leave w-c running. Forked
    children are also ended by their server as it closes; spawned ones only by the audit's threads."""
    w_c = "ignore-sigterm" if signals == 2 else None
    workloads, log = _fakes(tmp_path, [("w-a", 60.0, None), ("w-b", 60.0, None), ("w-c", 60.0, w_c)])
    (tmp_path / "regressed").mkdir()
    (tmp_path / "regressed" / "workloads.py").write_text(
        "from kernlint.workloads import WORKLOADS, Workload\n"
        + "".join(f"WORKLOADS.register({w.name!r}, Workload({w.name!r}, 'slow', lambda device: None, regressed=True, "
                  f"target={w.target!r}))\n" for w in workloads))
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER, str(tmp_path), children], env=CHECKOUT_ENV,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(_log(log)) < 3:   # all three sleeping at once
            assert proc.poll() is None and time.monotonic() < deadline, "the fake workloads did not all start"
            time.sleep(0.05)
        started = {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
        proc.send_signal(signal.SIGTERM)
        if signals == 2:
            time.sleep(0.5)
            assert proc.poll() is None, "w-c's grace period had not run out: the audit must still be stopping it"
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    # the workloads' own lines ("w-a | building w-a"), then the audit's one error line
    (line,) = [line for line in err.decode().splitlines() if " | " not in line]
    assert "terminated by SIGTERM" in line
    _assert_gone(started | {pid for s in _log(log).values() for pid in s["pids"]})
