"""Launching an already compiled Triton kernel without the JIT's per-call work. Imported only on CUDA.

``kernel[grid](...)`` binds every argument, computes a specialization key (alignment of each pointer,
divisibility of each int), looks the kernel up and only then launches: about 10 us of host time per call
for a kernel with a dozen arguments. A :class:`FastKernel` keeps what the first launch compiled and calls
its launcher directly. The caller must only reuse it for arguments that specialize the same way (same
constexprs, pointer dtypes, 16-byte alignment, the same ints equal to 1 or divisible by 16): the callers
here key their caches on exactly that.
"""
from __future__ import annotations

import functools

import torch
import triton

__all__ = ["FastKernel", "current_stream", "gdc_launch_dependents", "gdc_wait", "hooks_active", "pdl_enabled"]


def _version(text: str) -> tuple[int, int]:
    parts = text.split(".")
    return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)


# From Triton 3.3 on the launcher takes every kernel parameter, constexprs included (it skips them);
# before, only the runtime ones.
_PASS_CONSTEXPRS = _version(triton.__version__) >= (3, 3)

# Programmatic dependent launch (Hopper on): a kernel launched with it may start while the kernel before it
# in the stream still runs, and waits (gdc_wait, griddepcontrol.wait) for that kernel's results only where it
# first needs them; the kernel before it says when it may start (gdc_launch_dependents). Triton 3.3+ has both
# and the `launch_pdl` option; where it does not, nothing is launched with PDL (and the stand-ins below,
# never reached, refuse to compile).
try:
    from triton.backends.nvidia.compiler import CUDAOptions
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

    _PDL_IN_TRITON = "launch_pdl" in CUDAOptions.__dataclass_fields__
except ImportError:   # an older Triton
    _PDL_IN_TRITON = False

if not _PDL_IN_TRITON:
    import triton.language as tl

    @triton.jit
    def gdc_wait():
        tl.static_assert(False, "no programmatic dependent launch in this Triton")

    @triton.jit
    def gdc_launch_dependents():
        tl.static_assert(False, "no programmatic dependent launch in this Triton")

# False turns programmatic dependent launch off for plans made from then on (the A/B of the benchmarks).
USE_PDL = True


def pdl_enabled(device_index: int) -> bool:
    """Whether the reference kernels launch with programmatic dependent launch on this device."""
    return USE_PDL and _PDL_IN_TRITON and _capability(device_index) >= (9, 0)


@functools.cache
def _capability(device_index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device_index)


@functools.cache
def sm_count(device_index: int) -> int:
    """Streaming multiprocessors on the device: the launch grids of all reference kernels are sized by it."""
    return torch.cuda.get_device_properties(device_index).multi_processor_count


# The raw stream handle, as the Triton JIT itself reads it (a C call, no torch.cuda.Stream object).
current_stream = torch._C._cuda_getCurrentRawStream


def _hook_set(hook) -> bool:
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)  # Triton 3.5+: a HookChain, present but empty by default
    return bool(calls) if calls is not None else True


def hooks_active() -> bool:
    """True when a launch hook (proton and the like) is set: such launches must go through the JIT."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        runtime = knobs.runtime
        return _hook_set(runtime.launch_enter_hook) or _hook_set(runtime.launch_exit_hook)
    from triton.compiler import CompiledKernel

    return _hook_set(getattr(CompiledKernel, "launch_enter_hook", None))


# The whole body of the CUDA launcher's __call__ where scratch sizes are 0 (Triton 3.5/3.6): when the
# installed launcher's source holds exactly this call, its C entry point can be called directly.
_LAUNCHER_CALL = ("self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, "
                  "self.launch_pdl, global_scratch, profile_scratch, *args)")


def _c_entry(launcher):
    """(C launch function, its fixed arguments after ``function``), or None where unsure."""
    import inspect

    try:
        source = " ".join(inspect.getsource(type(launcher).__call__).split())
    except (OSError, TypeError):
        return None
    if _LAUNCHER_CALL not in source:
        return None
    if getattr(launcher, "global_scratch_size", 1) or getattr(launcher, "profile_scratch_size", 1):
        return None
    return launcher.launch, (launcher.launch_cooperative_grid, launcher.launch_pdl, None, None)


class FastKernel:
    """One compiled variant of a Triton kernel, launched straight through its launcher.

    ``__call__(g0, g1, g2, stream, *runtime_args)``: pointers as ints (``data_ptr()``), runtime args in
    the kernel's order; the constexprs (which must be the kernel's last parameters) are appended here.
    """

    __slots__ = ("_run", "_head", "_function", "_tail", "n_regs", "n_spills")

    def __init__(self, compiled, constexpr_values: tuple):
        run = compiled.run  # first: this initializes the module and function handles
        self._function = compiled.function
        entry = _c_entry(run)
        if entry is not None:  # skip the launcher's Python __call__ (scratch allocation checks)
            self._run, fixed = entry
            self._head = (*fixed, compiled.packed_metadata, None, None, None)
        else:
            self._run = run
            self._head = (compiled.packed_metadata, None, None, None)
        self._tail = tuple(constexpr_values) if _PASS_CONSTEXPRS else ()
        self.n_regs = getattr(compiled, "n_regs", None)
        self.n_spills = getattr(compiled, "n_spills", None)

    @property
    def direct(self) -> bool:
        """True when launches call the launcher's C entry point."""
        return len(self._head) > 4

    def __call__(self, g0: int, g1: int, g2: int, stream: int, *args) -> None:
        try:
            self._run(g0, g1, g2, stream, self._function, *self._head, *args, *self._tail)
        except TypeError:
            # The launcher parses its arguments before launching: a count mismatch launched nothing.
            # Some builds take the runtime arguments only; try once without the constexprs, then keep that.
            if not self._tail:
                raise
            self._run(g0, g1, g2, stream, self._function, *self._head, *args)
            self._tail = ()

    @classmethod
    def first_launch(cls, jit_fn, grid: tuple, args: tuple, constexprs: dict, **options) -> FastKernel | None:
        """Launches through the JIT (compiling if needed) and returns the handle for later launches.

        ``args`` are the runtime arguments with tensors (the JIT reads their dtypes and alignment);
        ``constexprs`` maps the trailing constexpr names to values, in order. None when launch hooks are
        set: then every launch must take the JIT path.
        """
        compiled = jit_fn[grid](*args, **constexprs, **options)
        if hooks_active() or compiled is None:
            return None
        return cls(compiled, tuple(constexprs.values()))
