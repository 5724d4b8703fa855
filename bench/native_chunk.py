"""The native columnar reader against the Python path: per chunk of CHUNK_EVENTS events, decoding and
building the columns (issue 26, item 1), beside msgspec's decode alone and json.loads of the same chunks.

    python setup.py build_ext --inplace      # the extension, if `pip install -e .` did not build it
    python bench/trace_speed/generate.py grow fixtures/traces/gpu-decode/large-decode-clean-range.pt.trace.json.gz \
        --size 150MB --out /tmp/ts/d150.pt.trace.json.gz
    python bench/native_chunk.py [TRACE ...]  # default: the largest fixture trace, and /tmp/ts/d150 if it is there

Every path times the same joined chunks (joining them is common to both paths and timed apart), best of
--runs. "python" is decode_events' loop body (msgspec into RawEvent structs, the filter, _add_chunk, the shape
arguments); "native" is kernlint.trace.native_chunk.add_chunk_native into the same RawColumns (a chunk it
does not answer goes through the Python path, and is counted).
"""
from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

from kernlint.trace import columns as C
from kernlint.trace import load
from kernlint.trace.native_chunk import add_chunk_native, native_module

REPO = Path(__file__).resolve().parents[1]
GROWN = Path("/tmp/ts/d150.pt.trace.json.gz")


def chunks_of(raw_events: list) -> list[tuple[bytes, int]]:
    return [(joined, count) for _start, joined, count in C.joined_chunks(raw_events)]


def run_python(chunks, total):
    out = C.RawColumns(total)
    for joined, count in chunks:
        out.n += C.python_chunk(out, joined, count).kept
    return out, 0


def run_native(chunks, total):
    out = C.RawColumns(total)
    fallbacks = 0
    for joined, count in chunks:
        got = add_chunk_native(out, joined, count)
        if got is None:
            fallbacks += 1
            got = C.python_chunk(out, joined, count)
        out.n += got.kept
    return out, fallbacks


def best_of(runs: int, fn) -> float:
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
        del result
    return best


def bench(path: Path, runs: int) -> None:
    data = load.read_trace_bytes(path)
    mb = len(data) / 1e6
    raw = load.decode_trace(data, path).trace_events
    del data
    total = len(raw)
    start = time.perf_counter()
    chunks = chunks_of(raw)
    t_join = time.perf_counter() - start
    del raw
    module = native_module()
    rows = []
    t_py = best_of(runs, lambda: run_python(chunks, total))
    rows.append(("python path (msgspec + _add_chunk)", t_py))
    t_nat = best_of(runs, lambda: run_native(chunks, total))
    out, fallbacks = run_native(chunks, total)
    rows.append((f"native (add_chunk_native; {fallbacks} of {len(chunks)} chunks fell back)", t_nat))
    t_c = best_of(runs, lambda: [module.decode_chunk(j) for j, _ in chunks])
    rows.append(("  of which decode_chunk (C) alone", t_c))
    t_ms = best_of(runs, lambda: [C._chunk_decoder.decode(j) for j, _ in chunks])
    rows.append(("msgspec decode into RawEvent alone", t_ms))
    t_json = best_of(runs, lambda: [json.loads(j) for j, _ in chunks])
    rows.append(("json.loads alone", t_json))
    print(f"\n{path.name}: {mb:.0f} MB of JSON, {total:,} events, {len(chunks)} chunks of {C.CHUNK_EVENTS}; "
          f"{out.n:,} kept; joining the chunks {t_join:.3f} s (both paths); best of {runs}")
    print(f"  {'':58s} {'seconds':>8s} {'MB/s':>7s} {'vs python':>10s}")
    for label, t in rows:
        print(f"  {label:58s} {t:8.3f} {mb / t:7.0f} {t / t_py:9.2f}x")
    print(f"  native is {t_py / t_nat:.1f}x faster than the python path, {t_ms / t_nat:.2f}x msgspec's decode alone")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if native_module() is None:
        raise SystemExit("kernlint.trace._kineto_chunk is not built: python setup.py build_ext --inplace")
    traces = args.traces
    if not traces:
        fixtures = sorted((p for p in (REPO / "fixtures" / "traces").glob("*/*.json.gz")),
                          key=lambda p: p.stat().st_size)
        traces = [fixtures[-1]] + ([GROWN] if GROWN.exists() else [])
    for path in traces:
        bench(path, args.runs)


if __name__ == "__main__":
    main()
