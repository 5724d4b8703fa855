#!/usr/bin/env python3
"""Derived CUDA-graph traces for tests/test_graph_replays.py (plain json + gzip; no kernlint imported).

    python3 scripts/make_graph_fixtures.py xdit-style
        fixtures/traces/gpu-graphs/graph-new-ones-in-window (H200: two captures and two replays in one trace)
        -> graph-new-ones-xdit-style.pt.trace.json.gz: each replay is its capture minus its last GEMM, as in
        xDiT's FLUX capture traces (capture and replay in one file; the capture holds one GEMM more than the
        replay). The GEMM kernel each graph launch ran last is removed, with its flow event.

    python3 scripts/make_graph_fixtures.py vllm-full-graph
        The TraceLens vLLM piecewise pair (fixtures/external, MIT, AMD-AGI/TraceLens) -> the same model as
        another graph configuration, one full graph (fixtures/traces/graph-pairing/):
        - tracelens-vllm-fullgraph-capture.pt.trace.json.gz: the capture trace with its 25 piecewise captures
          joined into one (the inner End/BeginCapture calls removed; ranges renamed *_FULL), recorded 60 s after
          the piecewise capture trace and before the piecewise replay trace (same process id and rank), without
          what the capturing thread did between two pieces, and without Python frames and flow events (to
          stay small: ops, ranges and launches are what pairing and attribution read);
        - tracelens-vllm-fullgraph-replay.pt.trace.json.gz: the replay trace with its 25 graph launches made one
          (every replayed kernel linked to the first launch; the other launches and the flow events removed).
        With the real pair beside them, a folder holds two configurations and their capture traces, as the
        vllm_decode_full / vllm_prefilldecode_piecewise folders of TraceLens do.

Deterministic (gzip mtime 0), so re-running it leaves the fixtures unchanged.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

# The trace reading and reproducible gzip writing of the other derived-fixture script (run from scripts/).
from record_edge_cases import load, save_gz

REPO = Path(__file__).resolve().parents[1]
GRAPHS = REPO / "fixtures" / "traces" / "gpu-graphs"
EXTERNAL = REPO / "fixtures" / "external"
PAIRING = REPO / "fixtures" / "traces" / "graph-pairing"
VLLM_REPLAY = EXTERNAL / "tracelens__vllm_piecewise__graph_execution.json.gz"
VLLM_CAPTURE = EXTERNAL / "tracelens__vllm_piecewise__graph_capture_rank_0.1773709679453551615.pt.trace.json.gz"
GEMM = re.compile(r"gemm|Cijk_", re.IGNORECASE)
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _graph_launches(events: list) -> list[dict]:
    return sorted((e for e in events if re.match(r"^(cuda|hip|cu)GraphLaunch", str(e.get("name", "")))),
                  key=lambda e: e["ts"])


def _ran_by(events: list, launch: dict) -> list[dict]:
    corr = launch["args"]["correlation"]
    return sorted((e for e in events if e.get("cat") in DEVICE_CATS and (e.get("args") or {}).get("correlation")
                   == corr), key=lambda e: e["ts"])


def xdit_style() -> Path:
    doc = load(GRAPHS / "graph-new-ones-in-window.pt.trace.json.gz")
    events = doc["traceEvents"]
    drop = set()
    for launch in _graph_launches(events):
        gemms = [k for k in _ran_by(events, launch) if GEMM.search(k["name"])]
        last = gemms[-1]
        drop.add(id(last))
        # its flow arrow's end (kineto draws one per kernel: same device lane and time)
        drop |= {id(e) for e in events if e.get("cat") == "ac2g" and e.get("ph") == "f" and e.get("ts") == last["ts"]
                 and e.get("pid") == last["pid"] and e.get("tid") == last["tid"]}
    doc["traceEvents"] = [e for e in events if id(e) not in drop]
    out = GRAPHS / "graph-new-ones-xdit-style.pt.trace.json.gz"
    save_gz(doc, out)
    return out


def vllm_full_graph() -> list[Path]:
    capture = load(VLLM_CAPTURE)
    events = capture["traceEvents"]
    shift = 60e6   # 60 s later: after the piecewise capture trace, before the piecewise replay trace
    begins = sorted((e for e in events if e.get("name") == "hipStreamBeginCapture"), key=lambda e: e["ts"])
    ends = sorted((e for e in events if e.get("name") == "hipStreamEndCapture"), key=lambda e: e["ts"])
    drop = {id(e) for e in begins[1:]} | {id(e) for e in ends[:-1]}
    # What the capturing thread did between two pieces (eager attention, the next piece's set-up) would be
    # inside the one joined capture: left out, so that the full graph holds the pieces' launches only.
    thread = (begins[0]["pid"], begins[0]["tid"])
    gaps = [(e["ts"], b["ts"]) for e, b in zip(ends[:-1], begins[1:])]
    kept = []
    for e in events:
        if id(e) in drop or e.get("cat") in ("python_function", "ac2g", "cpu_instant_event"):
            continue
        ts = e.get("ts")
        if (e.get("pid"), e.get("tid")) == thread and isinstance(ts, (int, float)) and \
                any(lo < ts < hi for lo, hi in gaps):
            continue
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = e["ts"] + shift
        if e.get("cat") == "user_annotation" and isinstance(e.get("name"), str):
            e["name"] = e["name"].replace("PIECEWISE", "FULL")
        kept.append(e)
    capture["traceEvents"] = kept
    capture["trace_id"] = "F0111GRAPH0CAPTURE0DERIVED0000001"
    out = [PAIRING / "tracelens-vllm-fullgraph-capture.pt.trace.json.gz"]
    save_gz(capture, out[0])

    replay = load(VLLM_REPLAY)
    events = replay["traceEvents"]
    launches = _graph_launches(events)
    first = launches[0]["args"]["correlation"]
    others = {g["args"]["correlation"] for g in launches[1:]}
    kept = []
    for e in events:
        if e.get("cat") == "ac2g" or (e in launches[1:]):
            continue
        args = e.get("args")
        if e.get("cat") in DEVICE_CATS and isinstance(args, dict) and args.get("correlation") in others:
            args["correlation"] = first
        kept.append(e)
    replay["traceEvents"] = kept
    replay["trace_id"] = "F0111GRAPH0REPLAY0DERIVED00000001"
    out.append(PAIRING / "tracelens-vllm-fullgraph-replay.pt.trace.json.gz")
    save_gz(replay, out[1])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("xdit-style", "vllm-full-graph"))
    args = ap.parse_args(argv)
    made = [xdit_style()] if args.what == "xdit-style" else vllm_full_graph()
    for path in made:
        print(f"{path.relative_to(REPO)}: {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
