"""Dummy-weight initialization (random weights for benchmarking without a checkpoint), vLLM-compatible.

``initialize_dummy_weights(model)`` walks ``model.state_dict()`` and calls
``initialize_single_dummy_weight(param, ...)`` per tensor, like vLLM's DummyModelLoader. Keep these two
names: traces of vLLM carry no annotation around dummy init, so rule KL002 finds it by these Python frames.

``uniform_`` has no FP8 kernel, so FP8 parameters take one of three forms (``mode``):

* ``"fixed"``: ``tmp = empty_like(param, fp16); tmp.uniform_(); param.copy_(tmp)``: one fp16 scratch,
  cast inside ``copy_``. Bit-identical to the old vLLM path (``param.data.to(fp16)``, ``uniform_``,
  ``.to(fp8)``, ``copy_``), which also read the old values and made a throw-away FP8 intermediate.
* ``"chunked"``: ``"fixed"`` in slices of ``chunk_numel`` elements, so the fp16 scratch stays bounded
  for huge tensors; bit-identical to ``"fixed"`` (below 2**31 elements). On CUDA the slices start at
  multiples of the uniform kernel's grid-stride period and the generator's Philox offset is set for
  each, so every element draws the same random number it draws in one full-size call.
* ``"fused"``: one Triton kernel writes FP8 directly from ``tl.randint4x`` with no scratch at all. Its
  random stream differs from ``"fixed"``: same range and seed-determinism, different values, and 8
  random bits per value (256 evenly spaced levels over [low, high], see ``_triton_dummy_init``). On
  CPU, or for layouts it does not take, it falls back to ``"fixed"``.
* ``"grouped"`` (model level): the values of ``"fused"``, bit for bit, but every FP8 tensor of the model
  that is contiguous and 16-byte aligned is written by one launch per (FP8 dtype, device), from a table
  of data pointers and sizes uploaded once (:func:`uniform_fp8_grouped_`). Per tensor the host work is
  a few attribute reads, not a launch. The model's tensors are collected by walking its modules'
  parameters and persistent buffers (what ``state_dict()`` holds for plain modules, without building
  it); everything else takes the ``"fused"`` path one tensor at a time.

Scale tensors (state-dict names ending in ``scale``, ``scales`` or ``scale_inv``: ``weight_scale``,
``weight_scale_inv``, ``input_scale``, ``k_scale``...) are set to 1.0, never randomized: a random scale in
[low, high] is negative or near zero, so the dequantized weights are garbage (SGLang PR 35491, TensorRT-LLM
PR 13879; kernlint rule KL005). Other non-FP8 floating-point parameters get ``param.uniform_`` in place in
every mode. Meta tensors are skipped
(their values are set later). Non-floating-point parameters (e.g. packed int weights) are left as they
are, except on ROCm, where vLLM zeroes them so runs are reproducible.
"""
from __future__ import annotations

import functools
import re
from array import array

import torch
from torch import nn

__all__ = [
    "MODES", "DEFAULT_CHUNK_NUMEL",
    "initialize_dummy_weights", "initialize_single_dummy_weight",
    "uniform_fp8_fixed_", "uniform_fp8_chunked_", "uniform_fp8_fused_", "uniform_fp8_grouped_",
]

MODES = ("fixed", "fused", "chunked", "grouped")
DEFAULT_CHUNK_NUMEL = 16 * 1024 * 1024  # 32 MiB of fp16 scratch

# torch's CUDA uniform_ (DistributionTemplates.h): 256-thread blocks, grid capped at
# SMs * (max threads per SM / 256), one curand_uniform4 (4 values, Philox offset +4) per thread per step.
_UNIFORM_BLOCK = 256
_UNIFORM_UNROLL = 4
_PHILOX_OFFSET_PER_STEP = 4

# State-dict names of quantization scales (the last name part), as vLLM's and SGLang's loaders name them:
# weight_scale, weight_scale_inv, input_scale, k_scale, v_scale, kv_scales, ...
_SCALE_NAME = re.compile(r"(?:^|[._])(?:\w*_)?scales?(?:_inv)?$")


def initialize_dummy_weights(model: nn.Module, low: float = -1e-3, high: float = 1e-3, seed: int = 1234,
                             mode: str = "fixed", chunk_numel: int = DEFAULT_CHUNK_NUMEL) -> None:
    """Fills every tensor of ``model.state_dict()`` with uniform values in [low, high].

    Each tensor gets its own generator seeded with ``seed`` (as in vLLM), so its values depend only on
    its shape, dtype, device and ``mode``, not on which other tensors the model holds.
    """
    if mode not in MODES:
        raise ValueError(f"initialize_dummy_weights: mode must be one of {MODES}, got {mode!r}")
    if mode == "grouped":
        with torch.no_grad():
            values = (t for name, t in _iter_named_state_tensors(model) if not _neutral_scale(name, t))
            for param in _fill_grouped(values, low, high, seed, {}):
                initialize_single_dummy_weight(param, low, high, seed, mode="fused", chunk_numel=chunk_numel)
        return
    for name, param in model.state_dict().items():
        if not _neutral_scale(name, param):
            initialize_single_dummy_weight(param, low, high, seed, mode=mode, chunk_numel=chunk_numel)


def is_scale_name(name: str) -> bool:
    """Whether a state-dict name is a quantization scale's (``layers.0.weight_scale_inv``, ``k_scale``)."""
    return bool(_SCALE_NAME.search(name))


@torch.no_grad()
def _neutral_scale(name: str, t: torch.Tensor) -> bool:
    """Sets a floating scale tensor to 1.0 (a valid, neutral scale) and says so; leaves anything else."""
    if not is_scale_name(name) or t.device.type == "meta" or not torch.is_floating_point(t):
        return False
    t.fill_(1.0)
    return True


@torch.no_grad()
def initialize_single_dummy_weight(param: torch.Tensor, low: float = -1e-3, high: float = 1e-3,
                                   seed: int = 1234, *, mode: str = "fixed",
                                   chunk_numel: int = DEFAULT_CHUNK_NUMEL) -> None:
    """Fills one tensor in place; see the module docstring for the modes."""
    if mode not in MODES:
        raise ValueError(f"initialize_single_dummy_weight: mode must be one of {MODES}, got {mode!r}")
    if param.device.type == "meta":
        return
    if not torch.is_floating_point(param):
        if torch.version.hip is not None and param.is_cuda:
            param.zero_()
        return
    if torch.finfo(param.dtype).bits >= 16:
        generator = torch.Generator(device=param.device)
        generator.manual_seed(seed)
        param.uniform_(low, high, generator=generator)
        return
    if mode in ("fused", "grouped") and _fused_supported(param):
        uniform_fp8_fused_(param, low, high, seed)
        return
    generator = torch.Generator(device=param.device)
    generator.manual_seed(seed)
    if mode == "chunked":
        uniform_fp8_chunked_(param, low, high, generator, chunk_numel)
    else:
        uniform_fp8_fixed_(param, low, high, generator)


def uniform_fp8_fixed_(param: torch.Tensor, low: float, high: float, generator: torch.Generator) -> None:
    """One fp16 scratch of param's layout (``empty_like`` keeps strides, as ``.to`` did), cast in ``copy_``."""
    tmp = torch.empty_like(param, dtype=torch.float16)
    tmp.uniform_(low, high, generator=generator)
    param.data.copy_(tmp)


def uniform_fp8_chunked_(param: torch.Tensor, low: float, high: float, generator: torch.Generator,
                         chunk_numel: int = DEFAULT_CHUNK_NUMEL) -> None:
    """``uniform_fp8_fixed_`` with at most ~``chunk_numel`` elements of fp16 scratch; same values."""
    if chunk_numel < 1:
        raise ValueError(f"chunk_numel must be >= 1, got {chunk_numel}")
    numel = param.numel()
    flat = _flat_memory_view(param)
    if param.is_cuda:
        period = _uniform_period(param.device.index if param.device.index is not None
                                 else torch.cuda.current_device())
        chunk_numel = -(-chunk_numel // period) * period
    if flat is None or numel <= chunk_numel:
        uniform_fp8_fixed_(param, low, high, generator)
        return
    scratch = torch.empty(chunk_numel, dtype=torch.float16, device=param.device)
    if param.is_cuda:
        base_offset = generator.get_offset()
        for start in range(0, numel, chunk_numel):
            n = min(chunk_numel, numel - start)
            # Element i of a full-size call draws at Philox offset base + 4 * (i // period).
            generator.set_offset(base_offset + _PHILOX_OFFSET_PER_STEP * (start // period))
            part = scratch[:n]
            part.uniform_(low, high, generator=generator)
            flat[start:start + n].copy_(part)
        generator.set_offset(base_offset + _PHILOX_OFFSET_PER_STEP * -(-numel // period))
    else:
        # CPU uniform_ draws serially in memory order from one mt19937: slices continue the stream.
        for start in range(0, numel, chunk_numel):
            n = min(chunk_numel, numel - start)
            part = scratch[:n]
            part.uniform_(low, high, generator=generator)
            flat[start:start + n].copy_(part)


def uniform_fp8_fused_(param: torch.Tensor, low: float, high: float, seed: int, **launch) -> None:
    """One Triton kernel, no scratch (CUDA, e4m3fn/e5m2, dense, 4-byte aligned); else ``"fixed"``.

    Its random stream differs from ``uniform_fp8_fixed_``: same range, deterministic per seed.
    ``launch`` passes ``block`` / ``num_warps`` / ``n_rounds`` to the kernel (benchmark sweeps).
    """
    if not _fused_supported(param):
        generator = torch.Generator(device=param.device)
        generator.manual_seed(seed)
        uniform_fp8_fixed_(param, low, high, generator)
        return
    from kernlint.reference._triton_dummy_init import fp8_uniform_fused_

    flat = _flat_memory_view(param)
    fp8_uniform_fused_(flat.view(torch.uint8), param.dtype, low, high, seed, **launch)


def uniform_fp8_grouped_(tensors, low: float = -1e-3, high: float = 1e-3, seed: int = 1234, **launch) -> None:
    """Fills every tensor of ``tensors`` as :func:`uniform_fp8_fused_` fills each (same values, bit for bit),
    the contiguous 16-byte-aligned CUDA FP8 ones in one launch per (FP8 dtype, device).

    Each tensor's values depend only on ``seed`` and its size, as with one launch per tensor. The others
    (odd layouts, CPU) go through :func:`uniform_fp8_fused_` one by one.
    ``launch`` passes ``block`` / ``num_warps`` / ``n_rounds`` / ``iters`` to the kernel (benchmarks), and
    ``tensors_per_launch``: launch each time that many tensors are collected (the GPU then starts while
    the host still walks the rest; the values do not change).
    """
    for param in _fill_grouped(tensors, low, high, seed, launch):
        uniform_fp8_fused_(param, low, high, seed,
                           **{k: v for k, v in launch.items() if k not in ("iters", "tensors_per_launch")})


_GROUPABLE = (torch.float8_e4m3fn, torch.float8_e5m2)
# Grouped launch shape: each program writes ITERS pieces of 16 * BLOCK bytes (fewer programs, fewer table
# searches). 512 x 4 was the fastest of bench/bench_grouped_init.py's sweep on the H200.
GROUPED_BLOCK = 512
GROUPED_ITERS = 4


def _fill_grouped(tensors, low: float, high: float, seed: int, launch: dict) -> list[torch.Tensor]:
    """Launches the grouped kernel over the tensors it takes; returns the others, in order."""
    from_table: dict[tuple, tuple[list, list, list, list]] = {}
    rest = []
    launch = {"block": GROUPED_BLOCK, "iters": GROUPED_ITERS, **launch}
    per_launch = launch.pop("tensors_per_launch", None) or -1
    words_per_program = 4 * launch["block"] * launch["iters"]
    groupable = _GROUPABLE
    for t in tensors:
        if t.dtype in groupable and t.is_cuda:
            ptr = t.data_ptr()
            numel = t.numel()
            if numel and not ptr & 15 and t.is_contiguous():
                key = (t.dtype, t.get_device())
                group = from_table.get(key)
                if group is None:
                    group = from_table[key] = ([], [], [], [0])
                starts, ptrs, numels, total = group
                starts.append(total[0])
                ptrs.append(ptr)
                numels.append(numel)
                # One program per words_per_program 4-byte words, at least one (it writes the tail bytes).
                total[0] += -(-(numel >> 2) // words_per_program) or 1
                if len(ptrs) == per_launch:
                    _launch_group(key, from_table.pop(key), low, high, seed, launch)
                continue
        rest.append(t)
    for key, group in from_table.items():
        _launch_group(key, group, low, high, seed, launch)
    return rest


def _launch_group(key, group, low, high, seed, launch) -> None:
    from kernlint.reference._triton_dummy_init import GroupedLaunch

    (dtype, device_index), (starts, ptrs, numels, total) = key, group
    host = torch.frombuffer(array("q", starts + ptrs + numels), dtype=torch.int64)
    # Pageable source, non_blocking: the driver stages it at once and the host does not wait for the GPU
    # (a blocking copy would synchronize the stream).
    table = host.to(f"cuda:{device_index}", non_blocking=True)
    GroupedLaunch.launch(table, len(ptrs), total[0], dtype, low, high, seed, **launch)


def _iter_named_state_tensors(model: nn.Module):
    """(local name, tensor) of the parameters and persistent buffers of every module, in ``state_dict()``
    order, without ``state_dict()``'s per-tensor detach and key building (a few us a tensor). A generator:
    the grouped path can launch while the walk goes on."""
    stack = [model]
    while stack:
        module = stack.pop()
        for name, p in module._parameters.items():
            if p is not None:
                yield name, p
        if module._buffers:
            skip = module._non_persistent_buffers_set
            for name, b in module._buffers.items():
                if b is not None and name not in skip:
                    yield name, b
        stack += [child for child in reversed(module._modules.values()) if child is not None]


def _iter_state_tensors(model: nn.Module):
    return (t for _, t in _iter_named_state_tensors(model))


def _state_tensors(model: nn.Module) -> list[torch.Tensor]:
    return list(_iter_state_tensors(model))


def _fused_supported(param: torch.Tensor) -> bool:
    return (param.is_cuda and param.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
            and param.numel() > 0 and param.data_ptr() % 4 == 0 and _flat_memory_view(param) is not None)


def _flat_memory_view(t: torch.Tensor) -> torch.Tensor | None:
    """A 1-D view of the memory a dense (any dim order) tensor covers; None if it has gaps or overlaps."""
    expected_stride = 1
    for stride, size in sorted((st, sz) for st, sz in zip(t.stride(), t.shape) if sz != 1):
        if stride != expected_stride:
            return None
        expected_stride *= size
    return t.as_strided((t.numel(),), (1,), t.storage_offset())


@functools.cache
def _uniform_period(device_index: int) -> int:
    """Elements per grid-stride step of torch's saturated CUDA uniform_ kernel (4 values a thread)."""
    props = torch.cuda.get_device_properties(device_index)
    blocks_per_sm = props.max_threads_per_multi_processor // _UNIFORM_BLOCK
    return _UNIFORM_BLOCK * props.multi_processor_count * blocks_per_sm * _UNIFORM_UNROLL
