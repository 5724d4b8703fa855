"""Many ranks: memory and time of checking a run of N ranks, serial against `--jobs`, side by side.

Makes N synthetic rank traces of one run from a recorded H200 tensor-parallel rank trace
(fixtures/traces/gpu-tp2-nccl/fp8-tp-mlp): its profiled body repeated `--repeat` times with shifted times and
ids, `distributedInfo` rank / world size rewritten, and each rank its own host process (pid and file name),
so that run grouping puts all N in one run. Then checks each run in a fresh process per way of checking:

  - all tables: every trace loaded, then checked (kernlint.rules.engine.check_traces; what `check --jobs 1`
    did before the map/reduce, and what `--format html` still does: its timelines need every trace's events)
  - --jobs 1: the map in this process, one trace at a time, then the reduce over the summaries
  - --jobs N: the map in N worker processes (the processes backend); with --dask also on a local Dask cluster

and prints wall seconds, the peak RSS of the checking process and the largest peak RSS of its worker processes
(VmHWM of every descendant, polled), the parent's RSS as a ratio to "all tables", and whether the reports are
the same (a digest of every report). Speed is printed, never asserted.

Usage: python bench/bench_ranks.py [--ranks 8 16 32 64] [--repeat 32] [--jobs 2] [--dask] [--keep DIR]
"""
from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "fixtures" / "traces" / "gpu-tp2-nccl" / "fp8-tp-mlp"
ID_KEYS = ("External id", "correlation", "Python id", "Python parent id", "Ev Idx", "Record function id")
POLL_S = 0.01

# One way of checking, run in a fresh process: argv = [mode, folder, jobs]; prints a JSON line.
CHILD = r"""
import hashlib, json, resource, sys
from kernlint.rules.loader import load_rules
from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES, discover_traces, load_trace
mode, folder, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
rules = load_rules()
files = discover_traces([folder]).files
if mode == "tables":
    from kernlint.rules.engine import check_traces
    reports = check_traces([load_trace(p) for p in files], rules)
else:
    from kernlint.parallel import check_paths
    from kernlint.rules.engine import combine_checked
    checked = check_paths(files, rules, max_bytes=DEFAULT_MAX_TRACE_BYTES, jobs=jobs, backend=mode)
    reports = combine_checked(checked, rules)
groups = [r for r in reports if r.ranks]
print(json.dumps({"digest": hashlib.sha256(repr(reports).encode()).hexdigest()[:12],
                  "groups": [len(g.ranks) for g in groups],
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _rank_trace() -> dict:
    path = sorted(SOURCE.glob("*.pt.trace.json.gz"))[0]
    return json.loads(gzip.decompress(path.read_bytes()))


def _repeat(trace: dict, times: int) -> dict:
    """The trace's body `times` times in a row: times shifted by its span, ids by their range."""
    events = trace["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    timed = [e for e in body if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 100.0
    id_span = 1 + max([e["args"][k] for e in body for k in ID_KEYS
                       if isinstance((e.get("args") or {}).get(k), int)] +
                      [e["id"] for e in body if isinstance(e.get("id"), int)])
    out = list(meta)
    for i in range(times):
        for e in body:
            c = copy.copy(e)
            if isinstance(e.get("ts"), (int, float)):
                c["ts"] = e["ts"] + i * span
            if isinstance(e.get("id"), int):
                c["id"] = e["id"] + i * id_span
            args = e.get("args")
            if args:
                c["args"] = dict(args)
                for k in ID_KEYS:
                    if isinstance(args.get(k), int) and args[k] > 0:
                        c["args"][k] = args[k] + i * id_span
            out.append(c)
    return {**trace, "traceEvents": out}


def _as_rank(trace: dict, rank: int, world: int, pid: int, old_pid: int) -> dict:
    """The trace as rank `rank` of `world`, recorded by host process `pid` (pid and main thread rewritten)."""
    events = []
    for e in trace["traceEvents"]:
        if e.get("pid") == old_pid or e.get("tid") == old_pid:
            e = dict(e)
            if e.get("pid") == old_pid:
                e["pid"] = pid
            if e.get("tid") == old_pid:
                e["tid"] = pid
            if e.get("name") == "process_sort_index":
                e["args"] = {"sort_index": pid}
        events.append(e)
    info = copy.deepcopy(trace["distributedInfo"])
    info.update(rank=rank, world_size=world)
    for pg in info.get("pg_config", []):
        pg.update(pg_size=world, ranks=list(range(world)))
    return {**trace, "distributedInfo": info, "traceEvents": events}


def make_run(folder: Path, ranks: int, body: dict, old_pid: int) -> Path:
    folder.mkdir(parents=True)
    for r in range(ranks):
        pid = 20000 + r
        data = json.dumps(_as_rank(body, r, ranks, pid, old_pid)).encode()
        # tensorboard_trace_handler's name: `<host>_<pid>.<ms>.pt.trace.json.gz`.
        (folder / f"vm_{pid}.1795970422650.pt.trace.json.gz").write_bytes(gzip.compress(data, compresslevel=1))
    return folder


def _children(root: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    out, todo = [], list(kids.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(mode: str, folder: Path, jobs: int) -> dict:
    """One way of checking in a fresh process: wall s, its peak RSS, its workers' largest peak RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(folder), str(jobs)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    peaks: dict[int, int] = {}
    while proc.poll() is None:
        for pid in _children(proc.pid):
            peaks[pid] = max(peaks.get(pid, 0), _hwm_kb(pid))
        time.sleep(POLL_S)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{mode}: {err.strip().splitlines()[-1] if err.strip() else 'failed'}")
    result = json.loads(out.strip().splitlines()[-1])
    result.update(wall=wall, worker_kb=max(peaks.values(), default=0))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--repeat", type=int, default=32, help="copies of the recorded body in each rank trace")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--dask", action="store_true", help="also check on a local Dask cluster (--backend dask)")
    parser.add_argument("--keep", type=Path, default=None, help="write the runs here and keep them")
    args = parser.parse_args()
    source = _rank_trace()
    old_pid = next(e["pid"] for e in source["traceEvents"] if e.get("cat") == "cpu_op")
    body = _repeat(source, args.repeat)
    modes = [("all tables", "tables", 1), ("--jobs 1", "serial", 1), (f"--jobs {args.jobs}", "processes", args.jobs)]
    if args.dask:
        modes.append((f"--jobs {args.jobs} --backend dask", "dask", args.jobs))
    root = args.keep or Path(tempfile.mkdtemp(prefix="kernlint-ranks-"))
    try:
        sample = make_run(root / "sample", 1, body, old_pid)
        size = sum(p.stat().st_size for p in sample.iterdir())
        shutil.rmtree(sample)
        print(f"rank trace: {len(body['traceEvents']):,} events ({args.repeat} x {SOURCE.name} rank trace), "
              f"{size / 1e6:.1f} MB gzipped; {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
        print(f"{'ranks':>5}  {'way of checking':28} {'wall s':>7} {'parent MB':>10} {'max worker MB':>14} "
              f"{'parent vs all tables':>21}  {'report':>12}")
        for n in args.ranks:
            folder = make_run(root / f"ranks-{n}", n, body, old_pid)
            rows = [(label, measure(mode, folder, jobs)) for label, mode, jobs in modes]
            anchor = rows[0][1]["rss_kb"]
            for label, r in rows:
                same = "same" if r["digest"] == rows[0][1]["digest"] else "DIFFERENT"
                worker = f"{r['worker_kb'] / 1024:14.0f}" if r["worker_kb"] else f"{'-':>14}"
                print(f"{n:5d}  {label:28} {r['wall']:7.1f} {r['rss_kb'] / 1024:10.0f} {worker} "
                      f"{r['rss_kb'] / anchor:20.2f}x  {same:>4} {r['digest']}")
            if rows[0][1]["groups"] != [n]:
                print(f"       (run grouping found groups of {rows[0][1]['groups']} ranks, not one of {n})")
            if not args.keep:
                shutil.rmtree(folder)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
