#!/usr/bin/env python3
"""A cold `kernlint audit`, phase by phase, against the 20 s target (issue 12).

Runs `python -m kernlint.cli audit --format json` in a fresh process with TRITON_CACHE_DIR pointed at a new,
empty folder (cold: every Triton kernel compiles), then, with --warm, once more with that folder kept (the
difference is Triton's compile time). The phases come from a `sitecustomize` this script writes into a
temporary folder and puts first on PYTHONPATH: in the audit process and in every process it starts (the
rank processes), it times watched imports and wraps a few functions by name (profiler start and stop, trace
export, trace load, rules, ...) where they exist, so the same bench measures old and new code alike.
Nothing in kernlint knows about it.

    python bench/bench_audit.py [--device auto|cuda|cpu] [--warm] [--include-regressed] [--tree DIR] [--json FILE]

--tree DIR runs the kernlint package found in DIR (another checkout) instead of this one.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Cold audit on one H200 before issue 42 (each workload in a process of its own, one after another:
# bench/results/audit-issue42-h200.txt), and issue 42's targets.
BEFORE_S = {False: 51.4, True: 81.1}
TARGET_S = {False: 15.0, True: 25.0}

# Imported first by every Python process the audit starts (PYTHONPATH): appends one JSON line per event
# {pid, role, what, t0, t1} to $KLBENCH_EVENTS. Patches by name, and only what exists.
HOOK = r'''
import atexit, importlib.abc, importlib.util, json, os, sys, time

_FILE = os.environ.get("KLBENCH_EVENTS")
_PID = os.getpid()
_T_START = time.time()


def _role():
    try:  # the real command line: sys.argv is not yet set while site runs
        with open("/proc/self/cmdline", "rb") as fh:
            argv = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        argv = " ".join(sys.argv)
    if "torch.distributed.run" in argv or "torchrun" in argv:
        return "torchrun"
    if os.environ.get("RANK") is not None:
        return "rank" + os.environ["RANK"]
    return "audit"


def _started():
    """This process's start (epoch seconds), from /proc (its age against the uptime, both in clock ticks):
    the spawn itself is counted too."""
    try:
        with open("/proc/self/stat") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return _T_START


_ROLE = _role()


def _emit(what, t0, t1, **extra):
    if not _FILE:
        return
    line = json.dumps({"pid": _PID, "role": _ROLE, "what": what, "t0": t0, "t1": t1, **extra}) + "\n"
    fd = os.open(_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _timed(what, fn):
    if getattr(fn, "_klbench", False):
        return fn
    def wrapper(*args, **kwargs):
        t0 = time.time()
        try:
            return fn(*args, **kwargs)
        finally:
            _emit(what, t0, time.time())
    wrapper._klbench = True
    wrapper.__wrapped__ = fn
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(wrapper, attr, getattr(fn, attr))
        except (AttributeError, TypeError):
            pass
    return wrapper


def _patch(obj, name, what):
    fn = getattr(obj, name, None)
    if callable(fn):
        setattr(obj, name, _timed(what, fn))


def _patch_renderer(module):
    fn = getattr(module, "audit_renderer", None)
    if callable(fn):
        def audit_renderer(fmt):
            return _timed("report render", fn(fmt))
        module.audit_renderer = audit_renderer


# module -> what to patch in it once it has run
_PATCHES = {
    "torch.cuda": lambda m: _patch(m, "_lazy_init", "CUDA init"),
    "torch.distributed": lambda m: _patch(m, "init_process_group", "dist init (NCCL/gloo)"),
    "torch.profiler.profiler": lambda m: [
        _patch(m.profile, "__enter__", "profiler start"), _patch(m.profile, "__exit__", "profiler stop"),
        _patch(m.profile, "export_chrome_trace", "trace export (json)")],
    "triton.compiler.compiler": lambda m: _patch(m, "compile", "Triton compile (or cache hit)"),
    "triton.runtime.jit": lambda m: _patch(m, "compile", "Triton compile (or cache hit)"),
    "triton.runtime.build": lambda m: _patch(m, "_build", "Triton C build (gcc: driver, launcher)"),
    "kernlint.audit": lambda m: _patch(m, "capture_workload", "workload: build+capture"),
    "kernlint.capture.profiler": lambda m: [
        _patch(m, "record_trace", "capture (warm-up+profile+write)"),
        _patch(m, "export_gzipped_trace", "trace write (json+gzip)")],
    "kernlint.capture.metadata": lambda m: _patch(m, "collect_run_metadata", "run metadata"),
    "kernlint.capture.distributed": lambda m: [
        _patch(m, "launch", "ranks: launch to traces"), _patch(m, "start", "ranks: start"),
        _patch(m, "RankLaunch", "ranks: start")],
    "kernlint.trace.load": lambda m: _patch(m, "load_trace", "trace load"),
    "kernlint.rules.engine": lambda m: [_patch(m, "check_trace", "rules"), _patch(m, "check_traces", "rules")],
    "kernlint.rules.loader": lambda m: _patch(m, "load_rules", "rule files load"),
    "kernlint.report": _patch_renderer,
    "kernlint.workloads.tp": lambda m: _patch(m, "build_tp_mlp", "build workload"),
}
_IMPORTS = {"torch", "triton", "pandas", "torch._inductor", "kernlint.cli", "kernlint.audit", "kernlint.rank_worker",
            "kernlint.rules.loader", "kernlint.report", "torch.distributed.run", "kernlint.reference",
            "kernlint.trace.load"}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name not in _PATCHES and name not in _IMPORTS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                t0 = time.time()
                run(module)
                if name in _IMPORTS:
                    _emit("import " + name, t0, time.time())
                if name in _PATCHES:
                    try:
                        _PATCHES[name](module)
                    except Exception as exc:
                        _emit("patch failed " + name + ": " + repr(exc), t0, t0)

            def __getattr__(self, attr):
                return getattr(loader, attr)

        spec.loader = _Loader()
        return spec


if _FILE:
    sys.meta_path.insert(0, _Finder())
    # The audit's own spawn time comes from the bench (exact); its children read theirs from /proc.
    _spawn = os.environ.pop("KLBENCH_SPAWN", None)
    _BORN = float(_spawn) if _spawn else _started()
    _emit("process", _BORN, _T_START)
    atexit.register(lambda: _emit("exit", _BORN, time.time()))
    _os_exit = os._exit

    def _exit(code):  # a process that leaves by os._exit runs no atexit handler
        _emit("exit", _BORN, time.time())
        _os_exit(code)

    os._exit = _exit
'''

# Phases shown, in this order; each sums its events' durations within one process.
ORDER = ["process start (spawn to site)", "import torch", "import triton", "import pandas",
         "import kernlint.reference", "import kernlint.cli", "import kernlint.audit", "import kernlint.rank_worker",
         "import torch.distributed.run", "import torch._inductor", "import kernlint.trace.load",
         "import kernlint.rules.loader", "import kernlint.report", "rule files load", "CUDA init",
         "dist init (NCCL/gloo)", "build workload",
         "workload: build+capture", "capture (warm-up+profile+write)", "  warm-up (incl. compile)",
         "  Triton compile (or cache hit)", "  Triton C build (gcc: driver, launcher)",
         "profiler start", "  profiled step(s)", "profiler stop", "trace write (json+gzip)", "trace export (json)",
         "run metadata", "ranks: start", "ranks: launch to traces", "trace load", "rules", "report render",
         "process lifetime"]


def _phases(events: list[dict]) -> tuple[dict[str, dict[str, float]], dict[str, tuple[float, float]]]:
    """Per role: phase -> seconds; and each role's [first, last] time."""
    per: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    span: dict[str, tuple[float, float]] = {}
    by_role = defaultdict(list)
    for e in events:
        by_role[e["role"]].append(e)
    for role, evs in by_role.items():
        p = per[role]
        for e in evs:
            d = e["t1"] - e["t0"]
            what = e["what"]
            if what == "process":
                p["process start (spawn to site)"] += d
            elif what == "exit":
                p["process lifetime"] += d
            else:
                p[what] += d
        # warm-up: from each capture's start to its profiler start; profiled step: profiler start end -> stop
        caps = sorted((e for e in evs if e["what"].startswith("capture")), key=lambda e: e["t0"])
        starts = sorted((e for e in evs if e["what"] == "profiler start"), key=lambda e: e["t0"])
        stops = sorted((e for e in evs if e["what"] == "profiler stop"), key=lambda e: e["t0"])
        for cap in caps:
            st = next((s for s in starts if cap["t0"] <= s["t0"] <= cap["t1"]), None)
            sp = next((s for s in stops if cap["t0"] <= s["t0"] <= cap["t1"]), None)
            if st:
                p["  warm-up (incl. compile)"] += st["t0"] - cap["t0"]
            if st and sp:
                p["  profiled step(s)"] += sp["t0"] - st["t1"]
        span[role] = (min(e["t0"] for e in evs), max(e["t1"] for e in evs))
    return per, span


def run_once(label: str, device: str, triton_cache: Path, tree: Path | None, work: Path,
             extra: tuple[str, ...] = ()) -> dict:
    hook_dir = work / "hook"
    hook_dir.mkdir(exist_ok=True)
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    events = work / f"events-{label}.jsonl"
    report = work / f"report-{label}.json"
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    path = [str(hook_dir)] + ([str(tree)] if tree else []) + inherited
    t0 = time.time()
    env = {**os.environ, "PYTHONPATH": ":".join(path), "TRITON_CACHE_DIR": str(triton_cache),
           "KLBENCH_EVENTS": str(events), "KLBENCH_SPAWN": repr(t0)}
    cmd = [sys.executable, "-m", "kernlint.cli", "audit", "--device", device, "--format", "json", "-o", str(report),
           *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tree or REPO_ROOT)
    wall = time.time() - t0
    evs = [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []
    data = json.loads(report.read_text()) if report.exists() else {}
    verdicts = {w["workload"]: w.get("verdicts") for w in data.get("workloads", [])}
    seconds = {w["workload"]: w.get("seconds") for w in data.get("workloads", [])}
    return {"label": label, "exit": proc.returncode, "wall": wall, "events": evs, "t0": t0, "verdicts": verdicts,
            "workload_seconds": seconds, "all_as_expected": data.get("all_as_expected"),
            "stderr_tail": proc.stderr[-1500:] if proc.returncode else ""}


def show(result: dict, timeline: bool = False) -> None:
    per, span = _phases(result["events"])
    roles = sorted(per, key=lambda r: (r != "audit", r))
    print(f"\n== {result['label']}: exit {result['exit']}, wall {result['wall']:.2f} s, "
          f"all as expected: {result['all_as_expected']}")
    if result["stderr_tail"]:
        print(result["stderr_tail"])
    width = max(len(k) for k in ORDER) + 2
    print("seconds per process; phases nest (an import in another, a compile in the warm-up) and processes "
          "overlap,\nso no column adds up to the wall time")
    print(f"{'phase':<{width}}" + "".join(f"{r:>10s}" for r in roles))
    names = ORDER + sorted({k for p in per.values() for k in p} - set(ORDER))
    for name in names:
        if any(per[r].get(name) for r in roles):
            print(f"{name:<{width}}" + "".join(f"{per[r].get(name, 0.0):10.2f}" for r in roles))
    print(f"{'span (from spawn of audit)':<{width}}" + "".join(
        f"{span[r][0] - result['t0']:4.1f}-{span[r][1] - result['t0']:<5.1f}" for r in roles))
    print("workload seconds (the audit's own column):",
          ", ".join(f"{k} {v:.2f}" for k, v in result["workload_seconds"].items() if v is not None))
    print("verdicts:", json.dumps(result["verdicts"], sort_keys=True))
    if timeline:
        print("timeline (s from the audit's spawn):")
        for e in sorted(result["events"], key=lambda e: e["t0"]):
            if e["what"] == "CUDA init" and e["t1"] - e["t0"] < 0.005:
                continue  # torch calls it before every CUDA op; only the first costs
            print(f"  {e['t0'] - result['t0']:7.2f} {e['t1'] - result['t0']:7.2f}  {e['role']:<9s} {e['what']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    parser.add_argument("--warm", action="store_true", help="then audit again with the Triton cache kept")
    parser.add_argument("--tree", type=Path, default=None, help="run the kernlint package in this checkout")
    parser.add_argument("--label", default="", help="a name for this tree in the output")
    parser.add_argument("--timeline", action="store_true", help="also print every event in time order")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw events and results here")
    parser.add_argument("--include-regressed", action="store_true",
                        help="audit the regressed workloads too (this checkout's fixtures/)")
    args = parser.parse_args()
    extra = ("--include-regressed", "--fixtures", str(REPO_ROOT / "fixtures")) if args.include_regressed else ()
    tree = args.tree.resolve() if args.tree else None
    label = args.label or (str(tree) if tree else "this checkout")
    results = []
    with tempfile.TemporaryDirectory(prefix="klbench-") as tmp:
        work = Path(tmp)
        cache = work / "triton-cache"   # new and empty: every kernel compiles
        cache.mkdir()
        results.append(run_once("cold", args.device, cache, tree, work, extra))
        if args.warm:
            results.append(run_once("warm (Triton cache kept)", args.device, cache, tree, work, extra))
    print(f"kernlint audit --device {args.device} {' '.join(extra[:1])} ({label}), python {sys.version.split()[0]}")
    for r in results:
        show(r, args.timeline)
    cold = results[0]["wall"]
    if any(r["exit"] != 0 or not r["all_as_expected"] for r in results):
        print("\nthe audit failed or did not get its expected verdicts: no time is reported")
        return 1
    print(f"\n{'cold audit total':<28}{cold:8.2f} s")
    before, target = BEFORE_S[bool(extra)], TARGET_S[bool(extra)]
    print(f"{'before (issue 42, H200)':<28}{before:8.2f} s   cold/before = {cold / before:.2f}")
    print(f"{'target':<28}{target:8.2f} s   cold/target = {cold / target:.2f} "
          f"({'met' if cold <= target else 'NOT met'})")
    if len(results) > 1:
        print(f"{'warm audit total':<28}{results[1]['wall']:8.2f} s   (cold - warm = "
              f"{cold - results[1]['wall']:.2f} s: Triton compile and cache writes)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if all(r["exit"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
