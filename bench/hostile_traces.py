"""Hostile traces against bounded time: a 40,000-character kernel name, and 100,000 anchors.

Prints one table: for each trace, `kernlint check` wall time (a fresh process, best of --repeat) against
the anchor of a bare `json.load` of the same file, side by side, as a ratio.

    python bench/hostile_traces.py [--anchors 100000] [--name-chars 40000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")


def _x(name, cat, ts, dur, pid=1, tid=1, **args):
    event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        event["args"] = args
    return event


def many_anchors(n: int) -> dict:
    """n linears, each an nn.Module holding a fill, the 1x128 quantization and a GEMM (a regressed layer),
    all inside one execute_model range."""
    events = [_x("execute_model", "user_annotation", 0, n * 10 + 10)]
    corr = 0
    for i in range(n):
        t = 5 + i * 10
        events.append(_x(f"nn.Module: Linear_{i}", "python_function", t, 9))
        for j, (kernel, launch) in enumerate(((FILL, "cudaLaunchKernel"), ("scale_1x128_kernel", "cuLaunchKernelEx"),
                                              ("nvjet_sm90_tst_128x128_64x4_1x2_h_bz_coopA_NNT", "cudaLaunchKernel"))):
            corr += 1
            events.append(_x(launch, "cuda_runtime", t + 1 + 2 * j, 1, correlation=corr))
            events.append(_x(kernel, "kernel", t + 3 + 2 * j, 1, pid=0, tid=7, correlation=corr, device=0, stream=7))
    return {"traceEvents": events}


def long_name(chars: int) -> dict:
    """A kernel whose templated name is `chars` long, nested templates included, before a quant kernel."""
    arg = "<" * (chars // 40) + "x" * (chars // 2) + ">" * (chars // 40)
    name = "void at::native::elementwise_kernel<128, 4, " + "at::native::Functor" + arg + ">(int)"
    name = name + "a" * max(0, chars - len(name))
    events = [_x("nn.Module: Linear_0", "python_function", 0, 100),
              _x("cudaLaunchKernel", "cuda_runtime", 1, 1, correlation=1),
              _x(name, "kernel", 10, 1, pid=0, tid=7, correlation=1),
              _x("cuLaunchKernelEx", "cuda_runtime", 3, 1, correlation=2),
              _x("scale_1x128_kernel", "kernel", 12, 1, pid=0, tid=7, correlation=2),
              _x("cudaLaunchKernel", "cuda_runtime", 5, 1, correlation=3),
              _x("nvjet_gemm", "kernel", 14, 1, pid=0, tid=7, correlation=3)]
    return {"traceEvents": events}


def _time(cmd: list[str], repeat: int) -> tuple[float, int]:
    best, code = float("inf"), -1
    for _ in range(repeat):
        start = time.perf_counter()
        code = subprocess.run(cmd, capture_output=True).returncode
        best = min(best, time.perf_counter() - start)
    return best, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", type=int, default=100_000)
    parser.add_argument("--name-chars", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kl-hostile-"))
    traces = {f"{args.anchors} anchors": many_anchors(args.anchors),
              f"{args.name_chars}-character kernel name": long_name(args.name_chars)}
    rows = []
    for label, data in traces.items():
        path = folder / (label.replace(" ", "_") + ".json.gz")
        path.write_bytes(gzip.compress(json.dumps(data).encode(), compresslevel=1))
        ours, code = _time([sys.executable, "-m", "kernlint.cli", "check", str(path), "--select", "KL001"],
                           args.repeat)
        anchor, _ = _time([sys.executable, "-c", "import gzip, json, sys; json.load(gzip.open(sys.argv[1]))",
                           str(path)], args.repeat)
        rows.append((label, len(data["traceEvents"]), ours, code, anchor))
    print(f"{'trace':<36} {'events':>8} {'kernlint check (s)':>19} {'exit':>5} {'json.load (s)':>14} {'ratio':>7}")
    for label, n, ours, code, anchor in rows:
        print(f"{label:<36} {n:>8} {ours:>19.2f} {code:>5} {anchor:>14.2f} {ours / anchor:>6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
