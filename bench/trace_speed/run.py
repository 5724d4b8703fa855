#!/usr/bin/env python3
"""kernlint check on large traces against the anchors, side by side in one run.

    python bench/trace_speed/run.py TRACE [TRACE ...] [--repeat 3] [--others]

For each trace (plain or gzipped JSON; make them with bench/trace_speed/generate.py), every reader runs in a
fresh process, `--repeat` times, interleaved; the table gives the median wall time and the largest peak RSS
(the child's own ru_maxrss):
  - anchor: read the file (gunzip when gzipped) and stdlib `json.loads` it
  - the same with orjson (the fastest JSON-to-Python-objects parser), where installed (or in --others-python)
  - `kernlint check TRACE --isolated` end to end: load, every shipped rule, the verdict printed
  - kernlint's load alone (decode + event table), to show where the time goes
  - with --others: HolisticTraceAnalysis (TraceAnalysis on a folder holding the trace) and torch-tb-profiler
    (RunProfileData.parse + analyze), when installed; they take minutes on a 150 MB trace
Targets (issue 12): check at most 0.5x the anchor's time; peak RSS at most 600 MB on the 150 MB trace and
the memory the trace takes (peak RSS above the process's RSS after its imports) at most 2x the JSON size;
time and memory growing linearly with the size (the last column: seconds per 100 MB of JSON).
"""
from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

ANCHOR = ("import gzip, json, sys; p = sys.argv[1]; raw = open(p, 'rb').read(); "
          "data = gzip.decompress(raw) if raw[:2] == b'\\x1f\\x8b' else raw; del raw; json.loads(data)")
ORJSON = ANCHOR.replace("import gzip, json,", "import gzip, orjson,").replace("json.loads(data)", "orjson.loads(data)")
LOAD = "import sys; from kernlint.trace.load import load_trace; load_trace(sys.argv[1])"
IMPORTS = ("import kernlint.cli, kernlint.trace.load, kernlint.rules.engine, kernlint.rules.loader; "
           "kernlint.rules.loader.load_rules()")
HTA = ("import sys, os, shutil, tempfile; from hta.trace_analysis import TraceAnalysis; d = tempfile.mkdtemp(); "
       "os.symlink(os.path.abspath(sys.argv[1]), os.path.join(d, 'rank-0.json' + ('.gz' if sys.argv[1].endswith("
       "'.gz') else ''))); TraceAnalysis(trace_dir=d)")
TB = ("import sys, tempfile; from torch_tb_profiler.profiler.data import RunProfileData; "
      "p = RunProfileData.parse('w', 's', sys.argv[1], tempfile.mkdtemp()); p.analyze()")


def readers(others: bool, others_python: str | None = None) -> dict[str, list[str]]:
    py = sys.executable
    out = {
        "json.loads (anchor)": [py, "-c", ANCHOR],
        "kernlint check": [py, "-m", "kernlint", "check", "--isolated", "--quiet"],
        "kernlint load only": [py, "-c", LOAD],
    }
    for interpreter in (py, others_python):
        if interpreter and subprocess.run([interpreter, "-c", "import orjson"], capture_output=True).returncode == 0:
            out["orjson.loads"] = [interpreter, "-c", ORJSON]
            break
    if others:
        for name, module, code in (("HolisticTraceAnalysis", "hta", HTA), ("torch-tb-profiler", "torch_tb_profiler",
                                                                           TB)):
            for interpreter in (py, others_python):   # HTA pulls in jupyterlab: often in a venv of its own
                if interpreter and subprocess.run([interpreter, "-c", f"import {module}"],
                                                  capture_output=True).returncode == 0:
                    out[name] = [interpreter, "-c", code]
                    break
    return out


def run_once(cmd: list[str], trace: Path | None) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MB) of the child, exit status."""
    argv = cmd + ([str(trace)] if trace is not None else [])
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tempfile.gettempdir(),
                            env={**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")})
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace").strip()
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):   # 1: kernlint found something; anything else is a failure of the reader
        raise RuntimeError(f"{' '.join(argv[:3])}... exited {code}: {err.splitlines()[-1] if err else ''}")
    return wall, usage.ru_maxrss / 1024.0, code


def json_bytes(path: Path) -> int:
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if not gz:
        return path.stat().st_size
    with gzip.open(path, "rb") as f:
        return sum(len(c) for c in iter(lambda: f.read(1 << 22), b""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--others", action="store_true", help="also time HTA and torch-tb-profiler (slow)")
    parser.add_argument("--others-python", help="another python to look for HTA / torch-tb-profiler in")
    args = parser.parse_args(argv)
    cmds = readers(args.others, args.others_python)
    base_rss = max(run_once([sys.executable, "-c", IMPORTS], None)[1] for _ in range(2))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; kernlint's imports alone: {base_rss:.0f} MB RSS",
          flush=True)
    header = (f"{'trace':28} {'JSON MB':>8} {'reader':24} {'median s':>9} {'peak RSS MB':>12} {'x anchor s':>11} "
              f"{'x anchor RSS':>13} {'trace mem / JSON':>17} {'s per 100 MB':>13}")
    print(header)
    print("-" * len(header))
    for trace in args.traces:
        size = json_bytes(trace) / 1e6
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
        for i in range(args.repeat):
            for name, cmd in cmds.items():
                if i and name in ("HolisticTraceAnalysis", "torch-tb-profiler"):
                    continue   # minutes each: once is enough to compare
                wall, rss, _ = run_once(cmd, trace)
                results[name].append((wall, rss))
        anchor_s = statistics.median(w for w, _ in results["json.loads (anchor)"])
        anchor_rss = max(r for _, r in results["json.loads (anchor)"])
        for name, runs in results.items():
            wall = statistics.median(w for w, _ in runs)
            rss = max(r for _, r in runs)
            mem = (rss - base_rss) / size if name.startswith("kernlint") else rss / size
            print(f"{trace.name[:28]:28} {size:8.0f} {name:24} {wall:9.2f} {rss:12.0f} {wall / anchor_s:10.2f}x "
                  f"{rss / anchor_rss:12.2f}x {mem:16.2f}x {100 * wall / size:13.2f}", flush=True)
    print("trace mem / JSON: kernlint rows give (peak RSS - RSS after imports) / JSON size; others peak RSS / JSON")
    return 0


if __name__ == "__main__":
    sys.exit(main())
