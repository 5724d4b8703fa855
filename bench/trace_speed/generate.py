#!/usr/bin/env python3
"""Realistic large traces for bench/trace_speed: recorded on the GPU, or grown from a recorded one.

    # on the H200: a decode loop of 32 small layers plus kernlint's FP8 linear, with stacks, shapes and memory,
    # recorded with as many steps as it takes to reach about --size bytes of JSON
    python bench/trace_speed/generate.py record --size 150MB --out /tmp/ts/decode-150MB.pt.trace.json.gz
    # the same with stacks from a profiler schedule's window: Python frames that do not nest
    python bench/trace_speed/generate.py record --style cut-stacks --size 20MB --out /tmp/ts/cut-20MB.pt.trace.json.gz
    # anywhere: a recorded trace repeated step by step (times shifted, ids renumbered) to about --size bytes
    python bench/trace_speed/generate.py grow SRC --size 1GB --out /tmp/ts/decode-1GB.pt.trace.json

The data is never committed: a 150 MB trace is 9 MB gzipped, a 1 GB one 60 MB. `record` measures the JSON
size of a two-step probe first, then records the number of steps that reaches the target. `grow` writes
one event per line as it goes (memory: the source trace only), so a 1 GB trace is cheap to make.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Ids that tie events together: shifted by a whole copy's span so that every copy keeps its own links.
ID_KEYS = ("External id", "correlation", "Python id", "Python parent id", "Ev Idx", "Python module id")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMG]?)B?$", re.I)


def parse_size(text: str) -> int:
    m = _SIZE.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (say 150MB or 1GB)")
    return int(float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m.group(2).upper()])


def json_size(path: Path) -> int:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        return sum(len(chunk) for chunk in iter(lambda: f.read(1 << 20), b""))


def record(size: int, out: Path, layers: int, batch: int, style: str = "range") -> Path:
    sys.path.insert(0, str(REPO / "scripts"))
    import decode_traces  # the decode-step model the rule library was tried on

    with tempfile.TemporaryDirectory() as tmp:
        probe = decode_traces.record("clean", style, "cuda", Path(tmp) / "probe.json.gz", layers=layers,
                                     steps=2, batch=batch, fp8=True)
        per_step = json_size(probe) / 2
    steps = max(1, round(size / per_step))
    decode_traces.record("clean", style, "cuda", out, layers=layers, steps=steps, batch=batch, fp8=True)
    print(f"{out}: {steps} steps, {json_size(out) / 1e6:.0f} MB of JSON", flush=True)
    return out


def _open_json(path: Path):
    return gzip.open(path, "rb") if path.read_bytes()[:2] == b"\x1f\x8b" else open(path, "rb")


def grow(src: Path, size: int, out: Path, *, copies: int | None = None) -> Path:
    """`src` repeated step by step to about `size` bytes of JSON (or exactly `copies` times) in `out`."""
    with _open_json(src) as f:
        trace = json.load(f)
    events = trace.pop("traceEvents")
    head = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    start = min(e["ts"] for e in body if isinstance(e.get("ts"), (int, float)))
    end = max(e["ts"] + (e.get("dur") or 0) for e in body if isinstance(e.get("ts"), (int, float)))
    span = end - start + 100.0
    id_span = 1 + max((e.get("args") or {}).get(k) or 0 for e in body for k in ID_KEYS
                      if isinstance((e.get("args") or {}).get(k), int))
    lines = [json.dumps(e) for e in body]
    per_copy = sum(len(line) + 2 for line in lines)
    copies = copies or max(1, round(size / per_copy))
    opener = gzip.open if out.name.endswith(".gz") else open
    out.parent.mkdir(parents=True, exist_ok=True)
    with opener(out, "wt") as f:
        f.write(json.dumps(trace)[:-1] + ', "traceEvents": [\n')
        f.write(",\n".join(json.dumps(e) for e in head))
        for i in range(copies):
            for e in body:
                if i == 0:
                    text = json.dumps(e)
                else:
                    c = dict(e)
                    if isinstance(c.get("ts"), (int, float)):
                        c["ts"] = round(c["ts"] + i * span, 3)
                    args = c.get("args")
                    if args and any(isinstance(args.get(k), int) and args[k] > 0 for k in ID_KEYS):
                        args = c["args"] = dict(args)
                        for k in ID_KEYS:
                            if isinstance(args.get(k), int) and args[k] > 0:
                                args[k] += i * id_span
                    if e.get("ph") in ("s", "f") and isinstance(c.get("id"), int):
                        c["id"] += i * id_span
                    text = json.dumps(c)
                f.write(",\n")
                f.write(text)
        f.write("\n]}\n")
    print(f"{out}: {copies} copies of {len(body):,} events, {json_size(out) / 1e6:.0f} MB of JSON", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record a decode loop on the GPU")
    rec.add_argument("--size", type=parse_size, default=parse_size("150MB"))
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--layers", type=int, default=32)
    rec.add_argument("--batch", type=int, default=8)
    rec.add_argument("--style", choices=("range", "cut-stacks"), default="range",
                     help="range: stacks inside a record_function range; cut-stacks: stacks from a profiler "
                          "schedule's window, whose Python frames do not nest (the window cuts running frames)")
    gr = sub.add_parser("grow", help="repeat a recorded trace to a size")
    gr.add_argument("src", type=Path)
    gr.add_argument("--size", type=parse_size, required=True)
    gr.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.size, args.out, args.layers, args.batch, args.style)
    else:
        grow(args.src, args.size, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
