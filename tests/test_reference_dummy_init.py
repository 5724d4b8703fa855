"""kernlint.reference.dummy_init: the fixed path is bit-identical to vLLM's old path (the regressed fixture),
chunked equals fixed, the fused Triton kernel is deterministic and in range, and the model-level loader
treats meta / non-float tensors as vLLM does. CPU, and (marked gpu) CUDA."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from kernlint.checkout import import_path
from kernlint.reference import (
    Fp8BlockLinear,
    initialize_dummy_weights,
    initialize_single_dummy_weight,
    uniform_fp8_chunked_,
    uniform_fp8_fixed_,
    uniform_fp8_fused_,
    uniform_fp8_grouped_,
)
from kernlint.reference.dummy_init import _state_tensors, is_scale_name

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
FP8_DTYPES = [torch.float8_e4m3fn, torch.float8_e5m2]
REPO_ROOT = Path(__file__).resolve().parent.parent


def load_old_path():
    path = REPO_ROOT / "fixtures" / "regressed" / "dummy_init_old.py"
    module = import_path(path, "fixture_dummy_init_old")
    return module


OLD = load_old_path()


def fp8_param(layout: str, dtype, device) -> torch.Tensor:
    """An FP8 tensor (garbage contents, as after torch.empty) in one of several memory layouts."""
    if layout == "contiguous":
        base = torch.empty(301, 257, dtype=dtype, device=device)
        return base
    if layout == "transposed":
        return torch.empty(257, 301, dtype=dtype, device=device).t()
    if layout == "strided":  # every other column: not dense
        return torch.empty(301, 514, dtype=dtype, device=device)[:, ::2]
    if layout == "flat":
        return torch.empty(77_777, dtype=dtype, device=device)
    raise AssertionError(layout)


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8)


def randomize_garbage(t: torch.Tensor) -> torch.Tensor:
    """Old contents must not matter: fill with random bytes first."""
    t.view(torch.uint8).copy_(torch.randint(0, 256, t.shape, dtype=torch.uint8))
    return t


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FP8_DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "flat"])
@pytest.mark.parametrize("low,high", [(-1e-3, 1e-3), (-1.0, 1.0), (0.5, 3.0)])
def test_fixed_is_bit_identical_to_old_path(device, dtype, layout, low, high):
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    ours = randomize_garbage(fp8_param(layout, dtype, device))
    old = randomize_garbage(fp8_param(layout, dtype, device))
    initialize_single_dummy_weight(ours, low, high, seed, mode="fixed")
    OLD.initialize_single_dummy_weight(old, low, high, seed)
    assert ours.stride() == old.stride()
    assert torch.equal(raw_bytes(ours), raw_bytes(old))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["fixed", "chunked", "fused"])
def test_values_in_range_and_many_distinct(device, mode):
    p = torch.empty(512, 1024, dtype=torch.float8_e4m3fn, device=device)
    initialize_single_dummy_weight(p, -1.0, 1.0, 7, mode=mode, chunk_numel=100_000)
    v = p.float()
    # FP8 rounding can step just past the bounds: e4m3 spacing at 1.0 is 1/8 above, 1/16 below.
    assert v.min() >= -1.0625 and v.max() <= 1.0625
    assert torch.isfinite(v).all()
    # e4m3 holds ~120 values in [-1, 1] and an fp16 uniform fill hits ~113 of them; the fused kernel's
    # 256 evenly spaced levels map onto 74 (it cannot reach the finest values near zero).
    min_distinct = 70 if (mode == "fused" and device == "cuda") else 100
    assert v.unique().numel() >= min_distinct
    assert abs(v.mean().item()) < 0.02
    assert abs((v > 0).float().mean().item() - 0.5) < 0.02


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["fixed", "chunked", "fused"])
def test_deterministic_for_a_seed(device, mode):
    a = torch.empty(1000, 333, dtype=torch.float8_e4m3fn, device=device)
    b = torch.empty_like(a)
    c = torch.empty_like(a)
    initialize_single_dummy_weight(a, -1.0, 1.0, 1234, mode=mode, chunk_numel=50_000)
    initialize_single_dummy_weight(b, -1.0, 1.0, 1234, mode=mode, chunk_numel=50_000)
    initialize_single_dummy_weight(c, -1.0, 1.0, 4321, mode=mode, chunk_numel=50_000)
    assert torch.equal(raw_bytes(a), raw_bytes(b))
    assert not torch.equal(raw_bytes(a), raw_bytes(c))


def chunkable_param(layout: str, device) -> torch.Tensor:
    """On CUDA, dense layouts are made larger than the saturated uniform_ grid (~1 Mi elements on an
    H200) so that the chunk boundaries and Philox offsets actually matter."""
    if device != "cuda" or layout == "strided":
        return fp8_param(layout, torch.float8_e4m3fn, device)
    if layout == "contiguous":
        return torch.empty(3001, 1777, dtype=torch.float8_e4m3fn, device=device)
    if layout == "transposed":
        return torch.empty(1777, 3001, dtype=torch.float8_e4m3fn, device=device).t()
    return torch.empty(5_000_003, dtype=torch.float8_e4m3fn, device=device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "flat"])
@pytest.mark.parametrize("chunk_numel", [777, 1 << 16, 1 << 22])
def test_chunked_equals_fixed(device, layout, chunk_numel):
    fixed = chunkable_param(layout, device)
    chunked = chunkable_param(layout, device)
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    g_fixed = torch.Generator(device=device)
    g_fixed.manual_seed(seed)
    g_chunked = torch.Generator(device=device)
    g_chunked.manual_seed(seed)
    uniform_fp8_fixed_(fixed, -1.0, 1.0, g_fixed)
    uniform_fp8_chunked_(chunked, -1.0, 1.0, g_chunked, chunk_numel)
    assert torch.equal(raw_bytes(chunked), raw_bytes(fixed))


@pytest.mark.parametrize("device", DEVICES)
def test_chunked_bounds_scratch(device, monkeypatch):
    if device == "cpu":
        p = torch.empty(1 << 20, dtype=torch.float8_e4m3fn)
        allocated = []
        real_empty = torch.empty

        def recording_empty(*args, **kwargs):
            t = real_empty(*args, **kwargs)
            allocated.append(t.numel())
            return t

        monkeypatch.setattr(torch, "empty", recording_empty)
        initialize_single_dummy_weight(p, mode="chunked", chunk_numel=4096)
        monkeypatch.undo()
        assert allocated and max(allocated) == 4096
        return
    numel = 64 << 20
    p = torch.empty(numel, dtype=torch.float8_e4m3fn, device=device)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    initialize_single_dummy_weight(p, mode="chunked", chunk_numel=4 << 20)
    torch.cuda.synchronize()
    scratch = torch.cuda.max_memory_allocated() - before
    assert scratch < 2 * (8 << 20), f"chunked mode used {scratch} bytes of scratch"


def test_fused_on_cpu_falls_back_to_fixed():
    a = torch.empty(100, 300, dtype=torch.float8_e4m3fn)
    b = torch.empty_like(a)
    initialize_single_dummy_weight(a, -1.0, 1.0, 99, mode="fused")
    initialize_single_dummy_weight(b, -1.0, 1.0, 99, mode="fixed")
    assert torch.equal(raw_bytes(a), raw_bytes(b))


@pytest.mark.gpu
@pytest.mark.parametrize("numel", [1, 3, 4, 5, 4095, 16 * 1024 + 3, (1 << 22) + 1])
def test_fused_covers_every_byte_and_is_deterministic(numel):
    p = torch.full((numel,), float("nan"), dtype=torch.float16, device="cuda").to(torch.float8_e4m3fn)
    q = torch.empty_like(p)
    uniform_fp8_fused_(p, -1.0, 1.0, 5)
    uniform_fp8_fused_(q, -1.0, 1.0, 5)
    v = p.float()
    assert torch.isfinite(v).all(), "a NaN left over means a byte was not written"
    assert v.min() >= -1.0625 and v.max() <= 1.0625
    assert torch.equal(raw_bytes(p), raw_bytes(q))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FP8_DTYPES)
def test_fused_layouts_and_stream_differs_from_fixed(dtype):
    transposed = torch.empty(2048, 1000, dtype=dtype, device="cuda").t()
    uniform_fp8_fused_(transposed, -2.0, 2.0, 11)
    v = transposed.float()
    assert v.min() >= -2.25 and v.max() <= 2.25 and v.unique().numel() >= 40
    fixed = torch.empty_like(transposed)
    initialize_single_dummy_weight(fixed, -2.0, 2.0, 11, mode="fixed")
    assert not torch.equal(raw_bytes(fixed), raw_bytes(transposed))
    # Not 4-byte aligned: falls back to the fixed path (same values as fixed on the same view).
    base_a = torch.empty(4097, dtype=dtype, device="cuda")
    base_b = torch.empty(4097, dtype=dtype, device="cuda")
    uniform_fp8_fused_(base_a[1:], -1.0, 1.0, 3)
    g = torch.Generator(device="cuda")
    g.manual_seed(3)
    uniform_fp8_fixed_(base_b[1:], -1.0, 1.0, g)
    assert torch.equal(raw_bytes(base_a[1:]), raw_bytes(base_b[1:]))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FP8_DTYPES)
@pytest.mark.parametrize("low,high", [(-1.0, 1.0), (0.25, 3.0), (-1e-3, 1e-3)])
def test_fused_values_follow_the_documented_byte_mapping(dtype, low, high):
    """Each random byte b is equally likely and maps to fp8(low + (b + 0.5) * (high - low) / 256)."""
    n = 1 << 22
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    p = torch.empty(n, dtype=dtype, device="cuda")
    uniform_fp8_fused_(p, low, high, seed)
    plain = torch.empty_like(p)
    uniform_fp8_fused_(plain, low, high, seed, ptx=False)
    assert (raw_bytes(p) == raw_bytes(plain)).float().mean() > 0.999, "inline-PTX and Triton paths disagree"

    step = (high - low) / 256
    step32 = torch.tensor(step, dtype=torch.float32).double()
    offset32 = torch.tensor(low + 0.5 * step, dtype=torch.float32).double()
    # float64 holds byte * step + offset exactly, so one rounding to float32: what the kernel's fma does.
    levels = (torch.arange(256, dtype=torch.float64) * step32 + offset32).float().to(dtype).view(torch.uint8)
    expected = torch.bincount(levels.long(), minlength=256).double() / 256
    observed = torch.bincount(raw_bytes(p).cpu().long(), minlength=256).double() / n
    sigma = (expected * (1 - expected) / n).sqrt()
    assert ((observed - expected).abs() <= 6 * sigma + 1e-9).all()


@pytest.mark.gpu
def test_fused_stream_does_not_depend_on_launch_parameters():
    numel = (1 << 20) + 7
    reference = torch.empty(numel, dtype=torch.float8_e4m3fn, device="cuda")
    uniform_fp8_fused_(reference, -1.0, 1.0, 77)
    for block, num_warps in ((256, 4), (2048, 8)):
        other = torch.empty_like(reference)
        uniform_fp8_fused_(other, -1.0, 1.0, 77, block=block, num_warps=num_warps)
        assert torch.equal(raw_bytes(other), raw_bytes(reference)), (block, num_warps)


@pytest.mark.gpu
def test_fused_allocates_nothing_and_fixed_one_fp16_scratch():
    numel = 32 << 20
    p = torch.empty(numel, dtype=torch.float8_e4m3fn, device="cuda")
    scratch = {}
    for mode in ("fused", "fixed"):
        initialize_single_dummy_weight(p, mode=mode)  # warm-up (Triton compile)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        initialize_single_dummy_weight(p, mode=mode)
        torch.cuda.synchronize()
        scratch[mode] = torch.cuda.max_memory_allocated() - before
    assert scratch["fused"] == 0
    assert scratch["fixed"] == 2 * numel


class TinyModel(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.fp8 = Fp8BlockLinear(256, 256, bias=True, device=device)
        self.dense = nn.Linear(128, 64, device=device, dtype=torch.bfloat16)
        self.register_buffer("positions", torch.arange(10, device=device))
        self.register_buffer("mask", torch.zeros(4, dtype=torch.bool, device=device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["fixed", "chunked", "fused", "grouped"])
def test_model_loader_fills_floats_and_leaves_ints(device, mode):
    model = TinyModel(device)
    initialize_dummy_weights(model, low=-1.0, high=1.0, seed=21, mode=mode)
    assert torch.equal(model.positions.cpu(), torch.arange(10))
    assert not model.mask.any()
    for name, t in model.state_dict().items():
        if not t.is_floating_point():
            continue
        if is_scale_name(name):   # scales are set to 1.0, never randomized (KL005)
            assert torch.equal(t.float(), torch.ones_like(t, dtype=torch.float32)), name
            continue
        v = t.float()
        assert v.min() >= -1.0625 and v.max() <= 1.0625, name
        assert v.unique().numel() > min(50, t.numel() // 2), name
    # Per tensor, same as calling the single-tensor function with the same seed ("grouped": as "fused").
    expected = torch.empty(256, 256, dtype=torch.float8_e4m3fn, device=device)
    initialize_single_dummy_weight(expected, -1.0, 1.0, 21, mode="fused" if mode == "grouped" else mode)
    assert torch.equal(raw_bytes(model.fp8.weight.data), raw_bytes(expected))


@pytest.mark.parametrize("device", DEVICES)
def test_model_loader_matches_old_loader(device):
    ours, old = TinyModel(device), TinyModel(device)
    old.load_state_dict(ours.state_dict())
    initialize_dummy_weights(ours, seed=5)
    OLD.initialize_dummy_weights(old, seed=5)
    for (name, a), b in zip(ours.state_dict().items(), old.state_dict().values()):
        if is_scale_name(name):   # the old loader randomized scales too; ours sets them to 1.0
            continue
        assert torch.equal(raw_bytes(a), raw_bytes(b)), name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["fixed", "chunked", "fused", "grouped"])
def test_scales_are_set_to_one_not_randomized(device, mode):
    """Block scales (weight_scale), per-tensor scales and inverse scales end up 1.0; the weights beside them
    and a parameter that merely contains "scale" in a longer word are still randomized."""
    model = TinyModel(device)
    model.register_buffer("k_scale", torch.full((), -7.0, device=device))
    model.register_parameter("weight_scale_inv", nn.Parameter(torch.full((2, 2), -7.0, device=device),
                                                              requires_grad=False))
    model.register_parameter("upscaler", nn.Parameter(torch.zeros(64, device=device), requires_grad=False))
    initialize_dummy_weights(model, seed=3, mode=mode)
    for name in ("fp8.weight_scale", "k_scale", "weight_scale_inv"):
        t = model.state_dict()[name]
        assert torch.equal(t, torch.ones_like(t)), name
    assert model.upscaler.abs().max() > 0 and model.upscaler.abs().max() <= 1e-3
    assert model.fp8.weight.float().abs().max() > 0
    assert not is_scale_name("fp8.weight") and not is_scale_name("upscaler") and is_scale_name("kv_scales")


def test_meta_params_are_skipped():
    with torch.device("meta"):
        model = TinyModel("meta")
    initialize_dummy_weights(model, mode="fixed")
    assert all(t.is_meta for t in model.state_dict().values())
    p = torch.empty(10, dtype=torch.float8_e4m3fn, device="meta")
    initialize_single_dummy_weight(p, mode="chunked")
    assert p.is_meta


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.uint8, torch.bool])
def test_non_float_params_untouched_outside_rocm(dtype):
    p = torch.randint(0, 2, (64,)).to(dtype)
    before = p.clone()
    initialize_single_dummy_weight(p)
    assert torch.equal(p, before)


def test_unknown_mode_raises():
    with pytest.raises(ValueError, match="mode"):
        initialize_dummy_weights(nn.Linear(4, 4), mode="fast")
    with pytest.raises(ValueError, match="mode"):
        initialize_single_dummy_weight(torch.empty(4), mode="fast")


# --- grouped: one launch for every FP8 tensor, bit-identical to one fused launch per tensor -------------

GROUPED_NUMELS = [1, 3, 4, 5, 17, 4095, 4096, 16 * 1024 + 3, 64 * 1024, 64 * 1024 + 4, (1 << 22) + 1, 3 << 20]


def fused_one_by_one(like: list[torch.Tensor], low, high, seed) -> list[torch.Tensor]:
    out = []
    for t in like:
        ref = torch.empty_like(t)
        uniform_fp8_fused_(ref, low, high, seed)
        out.append(ref)
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FP8_DTYPES)
def test_grouped_is_bit_identical_to_fused_per_tensor(dtype):
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    tensors = [randomize_garbage(torch.empty(n, dtype=dtype, device="cuda")) for n in GROUPED_NUMELS]
    tensors.append(randomize_garbage(torch.empty(300, 257, dtype=dtype, device="cuda")))
    uniform_fp8_grouped_(tensors, -1.0, 1.0, seed)
    for t, ref in zip(tensors, fused_one_by_one(tensors, -1.0, 1.0, seed)):
        assert torch.equal(raw_bytes(t), raw_bytes(ref)), t.shape


def odd_layouts() -> list[torch.Tensor]:
    fp8 = torch.float8_e4m3fn
    base = torch.empty(8 * 4096 + 16, dtype=fp8, device="cuda")
    return [base[4: 4 + 8 * 4096],  # 4-byte aligned, not 16: the per-tensor fused kernel
            torch.empty(512, 300, dtype=fp8, device="cuda").t(),  # dense, not contiguous: per tensor
            torch.empty(64, 256, dtype=fp8, device="cuda")[:, ::2],  # not dense: the fixed path
            torch.empty(777, 129, dtype=fp8, device="cuda")]  # grouped


@pytest.mark.gpu
def test_grouped_takes_odd_layouts_one_by_one_with_the_same_values():
    ours, refs = odd_layouts(), odd_layouts()
    uniform_fp8_grouped_(ours, -0.5, 0.5, 3)
    for t, ref in zip(ours, refs):
        uniform_fp8_fused_(ref, -0.5, 0.5, 3)
        assert torch.equal(raw_bytes(t), raw_bytes(ref)), t.shape


@pytest.mark.gpu
def test_grouped_many_tensors_one_launch():
    """Hundreds of tensors of random sizes: one grouped kernel launch, every byte as the fused kernel's."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, ()).item()))
    numels = torch.randint(1, 200_000, (300,), generator=gen).tolist()
    tensors = [torch.full((n,), float("nan"), dtype=torch.float16, device="cuda").to(torch.float8_e4m3fn)
               for n in numels]
    uniform_fp8_grouped_(tensors, -1.0, 1.0, 11)  # warm-up (compiles)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        uniform_fp8_grouped_(tensors, -1.0, 1.0, 11)
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "emcpy" not in e.name]
    assert kernels == ["fp8_uniform_init_grouped_kernel"], kernels
    for t, ref in zip(tensors, fused_one_by_one(tensors, -1.0, 1.0, 11)):
        assert torch.isfinite(t.float()).all()
        assert torch.equal(raw_bytes(t), raw_bytes(ref))


@pytest.mark.gpu
def test_grouped_launch_parameters_do_not_change_values():
    tensors = [torch.empty(n, dtype=torch.float8_e4m3fn, device="cuda") for n in GROUPED_NUMELS]
    refs = fused_one_by_one(tensors, -1.0, 1.0, 5)
    for block, iters, warps, per_launch in ((256, 1, 4, None), (1024, 4, 4, None), (2048, 2, 8, None),
                                            (1024, 4, 4, 5)):
        for t in tensors:
            randomize_garbage(t)
        uniform_fp8_grouped_(tensors, -1.0, 1.0, 5, block=block, iters=iters, num_warps=warps,
                             tensors_per_launch=per_launch)
        for t, ref in zip(tensors, refs):
            assert torch.equal(raw_bytes(t), raw_bytes(ref)), (block, iters, warps, per_launch, t.numel())


class MixedModel(nn.Module):
    """FP8 weights, bf16 and fp32 tensors, int buffers, a non-persistent buffer, a tied module."""

    def __init__(self, device):
        super().__init__()
        self.a = Fp8BlockLinear(512, 384, bias=True, device=device)
        self.b = nn.ModuleList(Fp8BlockLinear(256, 256, device=device) for _ in range(3))
        self.tied = self.b[1]
        self.norm = nn.LayerNorm(64, device=device)
        self.register_buffer("positions", torch.arange(10, device=device))
        self.register_buffer("scratch", torch.zeros(8, device=device), persistent=False)


def test_state_tensors_are_what_state_dict_holds():
    model = MixedModel("cpu")
    walked = [t.data_ptr() for t in _state_tensors(model)]
    expected = [t.data_ptr() for t in model.state_dict().values()]
    assert walked == expected


@pytest.mark.parametrize("device", DEVICES)
def test_grouped_model_init_is_bit_identical_to_fused(device):
    grouped, fused = MixedModel(device), MixedModel(device)
    initialize_dummy_weights(grouped, -1.0, 1.0, seed=17, mode="grouped")
    initialize_dummy_weights(fused, -1.0, 1.0, seed=17, mode="fused")
    for (name, a), b in zip(grouped.state_dict().items(), fused.state_dict().values()):
        assert torch.equal(raw_bytes(a), raw_bytes(b)), name
    assert not grouped.scratch.any()  # non-persistent: not in state_dict, left alone
