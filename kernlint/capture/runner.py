"""Capturing a step into the TensorBoard profiler layout, with its run metadata beside it.

Every invocation writes into a run folder of its own, `OUT/<run_name>/<UTC time, ms>-<random>/`, created
atomically (two invocations never share one): a later `kernlint check OUT/<run_name>` then sees two runs in
two folders, and the traces themselves still tell them apart (kernlint.trace.runs).
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernlint.capture.metadata import collect_run_metadata
from kernlint.capture.profiler import record_trace
from kernlint.errors import ConfigError, KernlintError, WorkloadError
from kernlint.fileio import RUN_METADATA_SUFFIX, write_text_atomically

_NEW_FOLDER_ATTEMPTS = 20


@dataclass(frozen=True)
class Capture:
    trace: Path
    metadata: Path
    wall_seconds: float
    run_dir: Path
    profiler_log: tuple[str, ...] = ()   # what the profiler said on stderr beyond its routine start/stop lines


_last_stamp_us = 0


def new_run_dir(out_dir: str | os.PathLike, run_name: str) -> Path:
    """Create and return a fresh folder `out_dir/run_name/<YYYYmmddTHHMMSS.ffffffZ>-<6 hex>/` for one
    invocation.

    The folder is made with a plain mkdir (no exist_ok), so it is this invocation's alone; on the rare
    collision another random suffix is tried. Names sort by creation time.
    """
    parent = Path(out_dir) / run_name
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(parent, f"cannot create the run folder: {exc.strerror or exc}") from None
    global _last_stamp_us
    for _ in range(_NEW_FOLDER_ATTEMPTS):
        # Microseconds, strictly increasing within this process, so that names sort by creation time.
        _last_stamp_us = us = max(time.time_ns() // 1000, _last_stamp_us + 1)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(us / 1e6)) + f".{us % 1_000_000:06d}Z"
        folder = parent / f"{stamp}-{secrets.token_hex(3)}"
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise ConfigError(folder, f"cannot create the run folder: {exc.strerror or exc}") from None
        return folder
    raise ConfigError(parent, f"could not create a new run folder in {_NEW_FOLDER_ATTEMPTS} attempts")


def capture(step: Callable[[], object], out_dir: str | os.PathLike, run_name: str, *, device: str,
            warmup: int = 1, extra: dict[str, Any] | None = None, run_dir: str | os.PathLike | None = None,
            steps: int = 1) -> Capture:
    """Profile `step` into `<run folder>/<worker>.<ms>.pt.trace.json.gz` (tensorboard_trace_handler's
    naming) and write `<worker>.<ms>.run.json` beside it with the run metadata.

    The run folder is a new one under `out_dir/run_name` (see new_run_dir), or `run_dir` when given: the
    ranks of one distributed run share the folder their launcher made.
    """
    made = run_dir is None
    folder = new_run_dir(out_dir, run_name) if made else Path(run_dir)
    worker = f"{socket.gethostname()}_{os.getpid()}"
    stamp = int(time.time() * 1000)
    trace_path = folder / f"{worker}.{stamp}.pt.trace.json.gz"
    start = time.perf_counter()
    log: list[str] = []
    try:
        record_trace(step, trace_path, device=device, warmup=warmup, steps=steps, log=log)
    except BaseException:
        if made:  # the step failed: leave no empty run folder behind
            try:
                folder.rmdir()
            except OSError:
                pass
        raise
    wall = time.perf_counter() - start
    meta = collect_run_metadata(device)
    meta.update({"run": run_name, "run_dir": folder.name, "trace": trace_path.name, "capture_seconds": wall,
                 **(extra or {})})
    meta_path = folder / f"{worker}.{stamp}{RUN_METADATA_SUFFIX}"
    write_text_atomically(meta_path, json.dumps(meta, indent=2, default=str))
    return Capture(trace=trace_path, metadata=meta_path, wall_seconds=wall, run_dir=folder,
                   profiler_log=tuple(log))


def profile_workload(build: Callable[[str], Callable[[], object]], device: str, out_dir: str | os.PathLike,
                     run_name: str, *, label: str, warmup: int = 1, steps: int = 1,
                     extra: dict[str, Any] | None = None) -> Capture:
    """Build a workload's step for `device` and capture it. Whatever the workload's own code does wrong
    (raises, calls sys.exit, is interrupted) is a WorkloadError naming `label`: no trace, so nothing checked."""
    step = None
    try:
        step = build(device)
        return capture(step, out_dir, run_name, device=device, warmup=warmup, steps=steps, extra=extra)
    except KernlintError:
        raise
    except SystemExit as exc:   # sys.exit() in the workload: never a silent exit 0
        raise WorkloadError(None, f"{label}: the workload called sys.exit({exc.code!r}) before its trace was "
                                  "written; nothing was checked") from exc
    except KeyboardInterrupt as exc:
        raise WorkloadError(None, f"{label}: interrupted (KeyboardInterrupt) while the workload ran; nothing was "
                                  "checked") from exc
    except Exception as exc:   # the workload's code failed: one line naming it
        raise WorkloadError(None, f"{label}: the workload raised {type(exc).__name__}: {exc}") from exc
    finally:
        del step
