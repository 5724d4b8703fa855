"""Runs a step under torch.profiler and writes a gzipped Chrome trace (the input of ``kernlint check``).

Imports torch, and of kernlint only the bottom module fileio (signal-safe temporary files).
"""
from __future__ import annotations

import contextlib
import functools
import gzip
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from kernlint.errors import ConfigError
from kernlint.fileio import removed_on_signal

__all__ = ["export_gzipped_trace", "profiler_arguments", "profiling_quietly", "record_trace"]

# Level 1: a GPU trace of the audit (about 6 MB of JSON) is written 10x faster than at gzip's default 9,
# and comes out about a third larger; reading it back takes the same time.
_GZIP_LEVEL = 1


# What kineto writes to the process's stderr on every start and stop, whatever its log level.
_KINETO_CHATTER = re.compile(r"^(USDT|STAGE):\S* \S* \S* \S*\] ")


@contextlib.contextmanager
def _native_stderr(log: list[str] | None):
    """Kineto writes lines (`USDT:... profiler_start`) straight to file descriptor 2, where sys.stderr's
    redirection cannot catch them. While the block runs, descriptor 2 goes to a temporary file; afterwards
    kineto's routine chatter is dropped and any other line (a CUPTI error, say) is added to `log`, or, when
    `log` is None, written to stderr as it would have been."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    sink = tempfile.TemporaryFile()
    try:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
    finally:
        sink.seek(0)
        text = sink.read().decode("utf-8", "replace")
        sink.close()
        lines = [line for line in text.splitlines() if line.strip() and not _KINETO_CHATTER.match(line)]
        if log is not None:
            log.extend(lines)
        elif lines:
            os.write(2, ("\n".join(lines) + "\n").encode())


@contextlib.contextmanager
def _inductor_left_unimported():
    """torch.profiler's start asks `hasattr(torch, "_inductor")` only to read inductor's cudagraphs setting;
    torch answers by importing inductor (1 to 3 s, in every process that profiles). Where nothing imported
    inductor yet, nothing compiled with it, so the setting is moot: during the block that one attribute
    reads as absent. Where inductor is loaded (a torch.compile'd workload), nothing changes."""
    getattr_ = torch.__dict__.get("__getattr__")
    if "torch._inductor" in sys.modules or getattr_ is None:
        yield
        return

    def lazy_but_inductor(name: str):
        if name == "_inductor":
            raise AttributeError(name)
        return getattr_(name)

    torch.__getattr__ = lazy_but_inductor
    try:
        yield
    finally:
        torch.__getattr__ = getattr_


@contextlib.contextmanager
def profiling_quietly(prof: profile, log: list[str] | None):
    """`with prof:`, with the profiler's start and stop under _native_stderr (the step's own output is not)."""
    with _native_stderr(log), _inductor_left_unimported():
        prof.__enter__()
    exc_info = (None, None, None)
    try:
        yield prof
    except BaseException:
        exc_info = sys.exc_info()
        raise
    finally:
        with _native_stderr(log):
            prof.__exit__(*exc_info)


def profiler_arguments() -> dict[str, object]:
    """The arguments of every torch.profiler.profile() kernlint starts: shapes, memory, Python stacks and
    nn.Module scopes (the rules need all four). `with_stack=True` records the nn.Module events of eager models
    on every torch kernlint supports; `with_modules=True` adds TorchScript models' module hierarchy, and is
    passed only where the installed torch still takes it without deprecation (_with_modules_is_current)."""
    arguments: dict[str, object] = {"record_shapes": True, "profile_memory": True, "with_stack": True}
    if _with_modules_is_current():
        arguments["with_modules"] = True
    return arguments


@functools.cache
def _with_modules_is_current() -> bool:
    """Whether the installed torch takes `with_modules` without a warning. torch 2.14 deprecated it (a
    FutureWarning when the profiler starts: it records only TorchScript models' modules, and `with_stack=True`
    records nn.Module events for eager ones). Asked of torch itself, not of its version: the autograd
    profiler that torch.profiler starts is made (not started: that is configuration only) with it, and any
    warning that names it, or a TypeError once it is gone, means leaving it out."""
    import warnings

    import torch.autograd.profiler as autograd_profiler

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            autograd_profiler.profile(with_modules=True, use_kineto=True)
        except TypeError:
            return False
    return not any("with_modules" in str(w.message) for w in caught)


def refuse_a_second_profiler(what: str) -> None:
    """Raise ConfigError when a profiler is already running in this process: torch.profiler cannot nest, and
    a second one started inside the first crashes the process (or records nothing)."""
    if torch.autograd._profiler_enabled():
        raise ConfigError(None, f"{what}: a profiler is already running in this process (another "
                                "kernlint.profiling() or kernlint_check block, or torch.profiler); profilers "
                                "do not nest: profile one block at a time")


def record_trace(step: Callable[[], object], out_path: str | os.PathLike, *, device: str,
                 warmup: int = 1, steps: int = 1, log: list[str] | None = None) -> Path:
    """Calls ``step`` ``warmup`` times, then ``steps`` times under the profiler; writes ``out_path`` (gzip).
    With several steps, each is inside a ``ProfilerStep#k`` range.

    Activities: CPU, plus CUDA when ``device`` is a CUDA device; shapes, memory, Python stacks and
    nn.Module scopes are recorded (the rules need all four). The trace is written to a temporary file in
    the same folder and moved into place, so ``out_path`` is never half-written.

    Kineto's routine lines on stderr at start and stop are dropped; anything else it writes then goes to
    ``log`` when given (the caller shows it), else to stderr.
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
    refuse_a_second_profiler("profiling the workload")
    prof = profile(activities=activities, **profiler_arguments())
    with profiling_quietly(prof, log):
        for k in range(steps):
            if steps == 1:
                step()
                continue
            # Repeated runs are marked as torch.profiler's own steps are (`ProfilerStep#N`): a baseline
            # takes each as one run, and so does any tool that reads profiler steps.
            with torch.profiler.record_function(f"ProfilerStep#{k}"):
                step()
        if is_cuda:
            # Kernels still in flight when the profiler stops would be missing from the trace.
            torch.cuda.synchronize()

    export_gzipped_trace(prof, out_path)
    return out_path


def export_gzipped_trace(prof: profile, out_path: str | os.PathLike) -> Path:
    """Write a finished profiler's Chrome trace to `out_path`, gzipped, whole or not at all: a temporary
    file beside it, renamed into place; SIGTERM / SIGINT / SIGHUP while writing leave no temporary behind."""
    out_path = Path(out_path)
    pending: set[str] = set()
    with removed_on_signal(pending):
        fd, tmp_json = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".json", dir=out_path.parent)
        os.close(fd)
        tmp_gz = tmp_json + ".gz"
        pending.update((tmp_json, tmp_gz))
        try:
            prof.export_chrome_trace(tmp_json)
            with open(tmp_json, "rb") as src, open(tmp_gz, "wb") as raw, \
                    gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=_GZIP_LEVEL) as dst:
                shutil.copyfileobj(src, dst, length=1 << 20)
            os.replace(tmp_gz, out_path)
        finally:
            for leftover in (tmp_json, tmp_gz):
                if os.path.exists(leftover):
                    os.remove(leftover)
    return out_path
