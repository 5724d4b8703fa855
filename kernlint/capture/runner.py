"""Capturing a step into the TensorBoard profiler layout, with its run metadata beside it."""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kernlint.capture.metadata import collect_run_metadata
from kernlint.capture.profiler import record_trace
from kernlint.fileio import write_text_atomically


@dataclass(frozen=True)
class Capture:
    trace: Path
    metadata: Path
    wall_seconds: float


def capture(step: Callable[[], object], out_dir: str | os.PathLike, run_name: str, *, device: str,
            warmup: int = 1, extra: dict[str, Any] | None = None) -> Capture:
    """Profile `step` into `out_dir/run_name/<worker>.<ms>.pt.trace.json.gz` (tensorboard_trace_handler's
    naming), and write `<worker>.<ms>.run.json` beside it with the run metadata."""
    run_dir = Path(out_dir) / run_name
    worker = f"{socket.gethostname()}_{os.getpid()}"
    stamp = int(time.time() * 1000)
    trace_path = run_dir / f"{worker}.{stamp}.pt.trace.json.gz"
    start = time.perf_counter()
    record_trace(step, trace_path, device=device, warmup=warmup)
    wall = time.perf_counter() - start
    meta = collect_run_metadata(device)
    meta.update({"run": run_name, "trace": trace_path.name, "capture_seconds": wall, **(extra or {})})
    meta_path = run_dir / f"{worker}.{stamp}.run.json"
    write_text_atomically(meta_path, json.dumps(meta, indent=2, default=str))
    return Capture(trace=trace_path, metadata=meta_path, wall_seconds=wall)
