"""Runs a step under torch.profiler and writes a gzipped Chrome trace (the input of ``kernlint check``).

Imports torch only: no other kernlint layer.
"""
from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

__all__ = ["record_trace"]


def record_trace(step: Callable[[], object], out_path: str | os.PathLike, *, device: str,
                 warmup: int = 1, steps: int = 1) -> Path:
    """Calls ``step`` ``warmup`` times, then ``steps`` times under the profiler; writes ``out_path`` (gzip).

    Activities: CPU, plus CUDA when ``device`` is a CUDA device; shapes, memory, Python stacks and
    nn.Module scopes are recorded (the rules need all four). The trace is written to a temporary file in
    the same folder and moved into place, so ``out_path`` is never half-written.
    """
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    is_cuda = torch.device(device).type == "cuda"
    # Warm-up runs JIT compilation, cuBLAS handle creation and allocator growth outside the trace.
    for _ in range(warmup):
        step()
    if is_cuda:
        torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if is_cuda else [])
    with profile(activities=activities, record_shapes=True, profile_memory=True, with_stack=True,
                 with_modules=True) as prof:
        for _ in range(steps):
            step()
        if is_cuda:
            # Kernels still in flight when the profiler stops would be missing from the trace.
            torch.cuda.synchronize()

    fd, tmp_json = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".json", dir=out_path.parent)
    os.close(fd)
    tmp_gz = tmp_json + ".gz"
    try:
        prof.export_chrome_trace(tmp_json)
        with open(tmp_json, "rb") as src, open(tmp_gz, "wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as dst:
            shutil.copyfileobj(src, dst, length=1 << 20)
        os.replace(tmp_gz, out_path)
    finally:
        for leftover in (tmp_json, tmp_gz):
            if os.path.exists(leftover):
                os.remove(leftover)
    return out_path
