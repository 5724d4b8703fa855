#!/usr/bin/env python3
"""Helpers for the GPU edge-case traces of fixtures/traces/gpu-edges (plain json + gzip, no kernlint).

    python3 scripts/record_edge_cases.py strip-ops SRC_DIR DST_DIR
        Copies every *.pt.trace.json.gz of SRC_DIR to DST_DIR without its ``cpu_op`` events (what a trace
        looks like when ops were not recorded: a sync is then only a cudaMemcpyAsync + Memcpy DtoH).
    python3 scripts/record_edge_cases.py analyze PATH... [--json OUT]
        Prints what each trace holds: event counts, device events without a launch, launches without a
        device event, syncs, sort / fill / quant kernels with their ranges and frames, CUDA-graph
        launches; for a folder with rank0 and rank1 traces, whether their host op streams are identical.
"""
from __future__ import annotations

import argparse
import collections
import difflib
import gzip
import json
import re
import sys
from pathlib import Path

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def load(path: Path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def save_gz(doc: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                 compresslevel=9) as gz:
        gz.write(json.dumps(doc, separators=(",", ":")).encode())


def strip_ops(src: Path, dst: Path) -> int:
    n = 0
    for path in sorted(src.glob("*.pt.trace.json.gz")):
        doc = load(path)
        before = len(doc["traceEvents"])
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "cpu_op"]
        save_gz(doc, dst / path.name)
        print(f"strip-ops: {path} -> {dst / path.name}: {before - len(doc['traceEvents'])} cpu_op events dropped")
        n += 1
    return n


def is_launch(e: dict) -> bool:
    """A runtime/driver call that enqueues device work (kernel, graph, copy, memset)."""
    name = e.get("name", "")
    return (name.startswith(("cudaLaunch", "cuLaunch", "cudaGraphLaunch", "cuGraphLaunch"))
            or name in ("cudaMemcpyAsync", "cudaMemcpy", "cudaMemcpy2DAsync", "cudaMemsetAsync",
                        "cudaMemset", "cuMemcpyAsync", "cuMemsetD8Async", "cuMemsetD32Async"))


def is_program_frame(name: str) -> bool:
    """Frames of the recording programs: torch names them by file name alone (their folder is on sys.path);
    library frames carry a path ("torch/...") and built-ins start with "<"."""
    return "/" not in name.split("(")[0] and not name.startswith("<") and ".py(" in name


def corr(e: dict):
    return (e.get("args") or {}).get("correlation")


def ext(e: dict):
    return (e.get("args") or {}).get("External id")


def short(name: str, n: int = 110) -> str:
    return name if len(name) <= n else name[: n - 3] + "..."


class Trace:
    def __init__(self, path: Path):
        self.path = path
        self.doc = load(path)
        self.ev = [e for e in self.doc["traceEvents"] if isinstance(e, dict)]
        by = collections.defaultdict(list)
        for e in self.ev:
            by[e.get("cat")].append(e)
        self.by = by
        self.device = sorted((e for c in DEVICE_CATS for e in by[c]), key=lambda e: e["ts"])
        self.runtime = sorted((e for c in LAUNCH_CATS for e in by[c]), key=lambda e: e["ts"])
        self.rt_by_corr = {corr(e): e for e in self.runtime if corr(e) is not None}
        self.dev_by_corr = collections.defaultdict(list)
        for e in self.device:
            self.dev_by_corr[corr(e)].append(e)
        self.ops = sorted(by["cpu_op"], key=lambda e: (e["ts"], -e.get("dur", 0)))
        self.ops_by_ext = collections.defaultdict(list)
        for e in self.ops:
            if ext(e) is not None:
                self.ops_by_ext[ext(e)].append(e)

    # --- containment helpers (same tid, interval holds ts) ---
    def enclosing(self, cat: str, tid, ts: float) -> list[dict]:
        out = [e for e in self.by[cat] if e.get("tid") == tid and e["ts"] <= ts <= e["ts"] + e.get("dur", 0)]
        return sorted(out, key=lambda e: e["ts"])

    def launch_of(self, dev: dict):
        return self.rt_by_corr.get(corr(dev))

    def op_chain(self, launch: dict) -> list[str]:
        if launch is None:
            return []
        return [o["name"] for o in self.enclosing("cpu_op", launch.get("tid"), launch["ts"])]

    def frames(self, launch: dict) -> list[str]:
        """The program's own Python frames (no library path, no built-in) around a launch, outermost first."""
        if launch is None:
            return []
        fr = self.enclosing("python_function", launch.get("tid"), launch["ts"])
        return [f["name"] for f in fr if is_program_frame(f["name"])]

    def ranges(self, launch: dict) -> list[str]:
        if launch is None:
            return []
        return [r["name"] for r in self.enclosing("user_annotation", launch.get("tid"), launch["ts"])]


def summarize(path: Path) -> dict:
    t = Trace(path)
    d = t.doc
    s: dict = {"file": str(path), "size_kib": round(path.stat().st_size / 1024, 1)}
    s["meta"] = {k: d.get(k) for k in ("cuda_driver_version", "cuda_runtime_version", "cupti_version",
                                       "with_stack", "record_shapes", "profile_memory", "with_modules")}
    di = d.get("distributedInfo")
    if di:
        s["meta"]["distributedInfo"] = {k: di.get(k) for k in ("backend", "rank", "world_size", "nccl_version")}
    props = d.get("deviceProperties") or []
    if props:
        s["meta"]["device"] = f"{props[0].get('name')} cc {props[0].get('computeMajor')}.{props[0].get('computeMinor')}"
    s["events"] = len(t.ev)
    s["by_category"] = dict(sorted(collections.Counter(e.get("cat") for e in t.ev).items(), key=str))

    # window edges
    no_launch = [e for e in t.device if corr(e) not in t.rt_by_corr]
    s["device_events_without_launch"] = {
        "count": len(no_launch),
        "names": dict(collections.Counter(short(e["name"]) for e in no_launch)),
    }
    launches = [e for e in t.runtime if is_launch(e)]
    orphan = [e for e in launches if corr(e) not in t.dev_by_corr]
    s["launches"] = len(launches)
    s["launches_without_device_event"] = {
        "count": len(orphan),
        "names": dict(collections.Counter(e["name"] for e in orphan)),
        "ops": dict(collections.Counter(" > ".join(t.op_chain(e)[-2:]) for e in orphan)),
    }
    cpu_span = [e for e in t.ev if e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")]
    if cpu_span and t.device:
        first_cpu = min(e["ts"] for e in cpu_span)
        last_cpu = max(e["ts"] + e.get("dur", 0) for e in cpu_span)
        s["time_us"] = {
            "host_first": 0.0,
            "host_last": round(last_cpu - first_cpu, 1),
            "device_first": round(t.device[0]["ts"] - first_cpu, 1),
            "device_last_end": round(max(e["ts"] + e.get("dur", 0) for e in t.device) - first_cpu, 1),
        }

    # syncs
    syncs = []
    for e in t.runtime:
        name = e["name"]
        if name.startswith("cudaMemcpy") or name in SYNC_CALLS:
            devs = t.dev_by_corr.get(corr(e), [])
            memcpy = [x["name"] for x in devs if x.get("cat") == "gpu_memcpy"]
            if name.startswith("cudaMemcpy") and not any("DtoH" in m for m in memcpy):
                continue
            ops = t.op_chain(e)
            syncs.append({"call": name, "device": memcpy[0] if memcpy else None,
                          "bytes": devs[0]["args"].get("bytes") if devs else None,
                          "ops": " > ".join(ops[-3:]) if ops else None})
    s["syncs"] = {
        "count_by_call": dict(collections.Counter(x["call"] for x in syncs)),
        "dtoh_memcpy": dict(collections.Counter(x["device"] for x in syncs if x["device"])),
        "patterns": dict(collections.Counter(
            f"{x['ops'] or '(no op)'} | {x['call']}" + (f" | {x['device']} {x['bytes']} B" if x["device"] else "")
            for x in syncs)),
    }
    s["sync_ops"] = dict(collections.Counter(
        o["name"] for o in t.ops if o["name"] in ("aten::item", "aten::_local_scalar_dense", "aten::nonzero",
                                                   "aten::is_nonzero", "aten::to", "aten::_to_copy")))

    # sort kernels, fills
    sort_k = [e for e in t.by["kernel"] if re.search(r"sort|radix", e["name"], re.I)]
    if sort_k:
        s["sort_kernels"] = dict(collections.Counter(short(e["name"], 160) for e in sort_k))
        s["sort_op_children"] = sort_children(t)
    fills = [o for o in t.ops if o["name"] == "aten::fill_"]
    if fills:
        s["fill_ops"] = dict(collections.Counter(
            f"{' > '.join(p['name'] for p in t.enclosing('cpu_op', o.get('tid'), o['ts'])[-3:-1]) or '(top)'}"
            f" > aten::fill_ {((o.get('args') or {}).get('Input Dims') or [None])[0]}: "
            f"{len([x for x in t.device if ext(x) == ext(o)])} device events"
            for o in fills))

    # quant kernels: ranges, frames and what ran just before on the same stream
    quant = [e for e in t.by["kernel"] if "per_token_group_quant" in e["name"]]
    if quant:
        s["quant_kernels"] = quant_report(t, quant)

    # CUDA graphs
    glaunch = [e for e in t.runtime if "GraphLaunch" in e["name"]]
    if glaunch:
        gk = [x for e in glaunch for x in t.dev_by_corr.get(corr(e), [])]
        s["graph"] = {
            "cudaGraphLaunch": len(glaunch),
            "device_events_from_graph_launches": len(gk),
            "names": dict(collections.Counter(short(x["name"], 90) for x in gk)),
            "launch_ranges": dict(collections.Counter(" > ".join(t.ranges(e)) or "(none)" for e in glaunch)),
            "launch_frames": dict(collections.Counter(" > ".join(t.frames(e)[-3:]) or "(none)" for e in glaunch)),
        }
    s["dummy_frames"] = sorted({e["name"] for e in t.by["python_function"] if "dummy" in e["name"].lower()})
    s["user_annotations"] = dict(collections.Counter(e["name"] for e in t.by["user_annotation"]))
    return s


def sort_children(t: Trace) -> list[str]:
    out = []
    for o in t.ops:
        if o["name"] == "aten::sort":
            kids = [c for c in t.ops if c.get("tid") == o.get("tid") and c is not o
                    and o["ts"] <= c["ts"] <= o["ts"] + o.get("dur", 0)]
            devs = [short(x["name"], 70) for x in t.device if ext(x) in {ext(c) for c in kids + [o]}]
            out.append({"children": [c["name"] for c in kids], "device_events": devs})
    return out


def quant_report(t: Trace, quant: list[dict]) -> dict:
    by_stream = collections.defaultdict(list)
    for e in t.device:
        by_stream[(e.get("pid"), e.get("tid"))].append(e)
    rows = []
    for q in quant:
        launch = t.launch_of(q)
        stream = by_stream[(q.get("pid"), q.get("tid"))]
        i = stream.index(q)
        prev = stream[i - 1] if i > 0 else None
        prev_launch = t.launch_of(prev) if prev else None
        rows.append({
            "launch": launch["name"] if launch else "(none: no launch in the trace)",
            "ranges": " > ".join(t.ranges(launch)) or "(none)",
            "frame": (t.frames(launch) or ["(no frames)"])[-1],
            "prev_kernel": short(prev["name"], 80) if prev else None,
            "prev_launch_frame": (t.frames(prev_launch) or ["(no frames)"])[-1] if prev_launch else None,
            "prev_ops": " > ".join(t.op_chain(prev_launch)[-2:]) if prev_launch else None,
        })
    return {
        "count": len(quant),
        "names": dict(collections.Counter(q["name"] for q in quant)),
        "by_range": dict(collections.Counter(r["ranges"] for r in rows)),
        "by_launch": dict(collections.Counter(r["launch"] for r in rows)),
        "by_frame": dict(collections.Counter(r["frame"] for r in rows)),
        "previous_kernel_on_stream": dict(collections.Counter(
            f"{r['prev_kernel']} <- {r['prev_ops'] or '-'} @ {r['prev_launch_frame'] or '-'}" for r in rows)),
    }


def compare_ranks(folder: Path) -> dict | None:
    r0, r1 = folder / "rank0.pt.trace.json.gz", folder / "rank1.pt.trace.json.gz"
    if not (r0.exists() and r1.exists()):
        return None
    t0, t1 = Trace(r0), Trace(r1)

    def opseq(t):
        return [o["name"] for o in t.ops if not o["name"].startswith("ProfilerStep")]

    def frameseq(t):
        return [f["name"] for f in sorted(t.by["python_function"], key=lambda e: e["ts"])
                if is_program_frame(f["name"])]

    def kseq(t):
        return [short(k["name"], 70) for k in t.by["kernel"]]

    out = {}
    for label, fn in (("cpu_op names", opseq), ("program frames", frameseq), ("kernel names", kseq)):
        a, b = fn(t0), fn(t1)
        diff = [ln for ln in difflib.unified_diff(a, b, "rank0", "rank1", n=0, lineterm="")
                if not ln.startswith(("---", "+++", "@@"))]
        only0 = collections.Counter(a) - collections.Counter(b)
        only1 = collections.Counter(b) - collections.Counter(a)
        out[label] = {"rank0": len(a), "rank1": len(b), "identical": a == b,
                      "same_multiset": not only0 and not only1,
                      "only_rank0": dict(only0), "only_rank1": dict(only1),
                      "diff": diff[:40], "diff_lines": len(diff)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("strip-ops")
    p.add_argument("src", type=Path)
    p.add_argument("dst", type=Path)
    p = sub.add_parser("analyze")
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--json", type=Path)
    p.add_argument("--brief", action="store_true", help="one line per trace instead of the JSON")
    args = ap.parse_args(argv)
    if args.cmd == "strip-ops":
        return 0 if strip_ops(args.src, args.dst) else 1
    report = {}
    for path in args.paths:
        files = sorted(path.rglob("*.pt.trace.json.gz")) if path.is_dir() else [path]
        for f in files:
            report[str(f)] = summarize(f)
        folders = sorted({f.parent for f in files})
        for folder in folders:
            cmp = compare_ranks(folder)
            if cmp:
                report[f"{folder} (rank0 vs rank1)"] = cmp
    if args.brief:
        for key, s in report.items():
            if "rank0 vs rank1" in key:
                print(f"{key}: " + "; ".join(f"{k} identical={v['identical']} same-multiset={v['same_multiset']}"
                                             for k, v in s.items()))
                continue
            print(f"{key}: {s['events']} events, {s['by_category'].get('kernel', 0)} kernels, "
                  f"{s['device_events_without_launch']['count']} device events w/o launch, "
                  f"{s['launches_without_device_event']['count']}/{s['launches']} launches w/o device event, "
                  f"syncs {s['syncs']['count_by_call']}, quant {s.get('quant_kernels', {}).get('count', 0)}, "
                  f"sort {list(s.get('sort_kernels', {}))}, graph {s.get('graph', {}).get('cudaGraphLaunch', 0)}")
    text = json.dumps(report, indent=1, default=str)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)
    if not args.brief:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
