"""kernlint.reference.linear against float64 references, on CPU and (marked gpu) on CUDA; plus what a
forward launches (the placeholder must cost nothing; the regressed fixture must reproduce the fill)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernlint.checkout import import_path
from kernlint.reference import (
    Fp8BlockLinear,
    block_scaled_mm,
    dequantize_1x128,
    dequantize_weight_128x128,
    fp8_blockscale_gemm,
    fp8_quant_gemm,
    gemm_backend_choices,
    scale_1x128,
)
from kernlint.reference import linear as linear_module

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
REPO_ROOT = Path(__file__).resolve().parent.parent


def load_fixture_module(relative_path: str):
    path = REPO_ROOT / "fixtures" / relative_path
    module = import_path(path, "fixture_" + path.stem)
    return module


def rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    actual = actual.double().cpu()
    expected = expected.double().cpu()
    return ((actual - expected).norm() / expected.norm()).item()


def make_layer(n, k, device, bias, dtype, quantize_in_gemm=True):
    w = torch.randn(n, k, device=device) / k ** 0.5
    b = torch.randn(n, device=device, dtype=dtype) if bias else None
    return Fp8BlockLinear.from_float(w, b, quantize_in_gemm=quantize_in_gemm), w, b


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("m", [1, 5, 16, 131])
@pytest.mark.parametrize("n,k", [(256, 256), (384, 512)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("quantize_in_gemm", [True, False], ids=["gemm-quantizes", "quantize-then-gemm"])
def test_forward_matches_float64(device, m, n, k, dtype, bias, quantize_in_gemm):
    layer, w, b = make_layer(n, k, device, bias, dtype, quantize_in_gemm)
    x = torch.randn(m, k, device=device, dtype=dtype)
    y = layer(x)
    assert y.shape == (m, n) and y.dtype == dtype and y.device.type == device
    assert torch.isfinite(y).all()

    # Against the exact product of the unquantized operands: only FP8 rounding of x and W (~3% each).
    exact = x.double() @ w.double().t() + (b.double() if bias else 0)
    assert rel_err(y, exact) < 0.08

    # Against float64 on the operands as this device quantized them: only accumulation and output rounding
    # remain. (Quantizing on the CPU instead can round a few elements one FP8 step the other way: the GPU
    # kernel multiplies by 1/scale; at M=1 that alone moved the error to 1-2% on the H200.)
    x_q, x_s = scale_1x128(x)
    x_deq = dequantize_1x128(x_q.cpu(), x_s.cpu(), torch.float64)
    w_deq = dequantize_weight_128x128(layer.weight.cpu(), layer.weight_scale.cpu(), torch.float64)
    quantized = x_deq @ w_deq.t() + (b.double().cpu() if bias else 0)
    assert rel_err(y, quantized) < 1e-2


@pytest.mark.parametrize("device", DEVICES)
def test_leading_dims_match_2d_call(device):
    layer, _, _ = make_layer(256, 384, device, bias=True, dtype=torch.bfloat16)
    x = torch.randn(2, 3, 5, 384, device=device, dtype=torch.bfloat16)
    y = layer(x)
    assert y.shape == (2, 3, 5, 256)
    assert torch.equal(y.reshape(30, 256), layer(x.reshape(30, 384)))


@pytest.mark.parametrize("device", DEVICES)
def test_in_features_not_multiple_of_128_raises(device):
    with pytest.raises(ValueError, match="multiple of 128"):
        Fp8BlockLinear(200, 256, device=device)
    layer, _, _ = make_layer(256, 256, device, bias=False, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="last dimension"):
        layer(torch.randn(4, 384, device=device, dtype=torch.bfloat16))


def test_block_scaled_mm_cpu_matches_float64():
    m, n, k = 9, 384, 640
    x_q, x_s = scale_1x128(torch.randn(m, k))
    w_q = (torch.randn(n, k) * 50).clamp(-448, 448).to(torch.float8_e4m3fn)
    w_s = torch.rand(n // 128, k // 128) + 0.5
    bias = torch.randn(n, dtype=torch.bfloat16)
    y = block_scaled_mm(x_q, x_s, w_q, w_s, torch.float32, bias)
    ref = (dequantize_1x128(x_q, x_s, torch.float64) @ dequantize_weight_128x128(w_q, w_s, torch.float64).t()
           + bias.double())
    assert rel_err(y, ref) < 1e-5


def cpu_op_names(fn) -> list[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return [e.name for e in sorted(prof.events(), key=lambda e: e.time_range.start)]


def test_fixed_placeholder_launches_no_fill_before_quant():
    layer, _, _ = make_layer(256, 256, "cpu", bias=False, dtype=torch.bfloat16)
    x = torch.randn(8, 256, dtype=torch.bfloat16)
    names = cpu_op_names(lambda: layer(x))
    before_quant = names[: names.index("scale_1x128")]
    assert "aten::new_empty" in before_quant
    assert not {"aten::new_ones", "aten::fill_", "aten::ones", "aten::zeros"} & set(before_quant)


def test_regressed_fixture_fills_before_quant_and_matches_fixed():
    regressed = load_fixture_module("regressed/fp8_linear_new_ones.py")
    fixed, w, _ = make_layer(256, 256, "cpu", bias=False, dtype=torch.bfloat16)
    slow = regressed.Fp8BlockLinearNewOnes.from_float(w)
    x = torch.randn(8, 256, dtype=torch.bfloat16)
    names = cpu_op_names(lambda: slow(x))
    before_quant = names[: names.index("scale_1x128")]
    assert "aten::new_ones" in before_quant and "aten::fill_" in before_quant
    assert torch.equal(slow(x), fixed(x))


def cuda_kernel_names(fn) -> list[str]:
    fn()  # warm-up: Triton compilation, cuBLAS probing
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return [e.name for e in sorted(kernels, key=lambda e: e.time_range.start)]


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 6, 64, 128])
def test_cuda_forward_launches_quant_and_gemm_only(m):
    """Small M: quant + the Triton GEMM (eager host time); larger M: quant + cuBLAS block-wise."""
    layer, _, _ = make_layer(512, 512, "cuda", bias=False, dtype=torch.bfloat16)
    x = torch.randn(m, 512, device="cuda", dtype=torch.bfloat16)
    names = cuda_kernel_names(lambda: layer(x))
    assert len(names) == 2, names
    assert names[0] == "scale_1x128_kernel", names
    if m <= linear_module.TRITON_MAX_M:
        assert names[1] == "fp8_block_scaled_gemm_kernel", names
    else:
        assert gemm_backend_choices().get((0, torch.bfloat16, False)) == "scaled_mm"


@pytest.mark.gpu
@pytest.mark.parametrize("m", [64, 256])
def test_cuda_forward_with_bias_adds_at_most_one_kernel(m):
    layer, _, _ = make_layer(512, 512, "cuda", bias=True, dtype=torch.bfloat16)
    x = torch.randn(m, 512, device="cuda", dtype=torch.bfloat16)
    names = cuda_kernel_names(lambda: layer(x))
    assert names[0] == "scale_1x128_kernel", names
    if m <= linear_module.TRITON_MAX_M:
        assert names == ["scale_1x128_kernel", "fp8_block_scaled_gemm_kernel"], names
        return
    backend = gemm_backend_choices()[(0, torch.bfloat16, True)]
    assert len(names) == (2 if backend in ("scaled_mm", "triton") else 3), (backend, names)


@pytest.mark.gpu
def test_cuda_regressed_fixture_launches_fill_right_before_quant():
    regressed = load_fixture_module("regressed/fp8_linear_new_ones.py")
    _, w, _ = make_layer(512, 512, "cuda", bias=False, dtype=torch.bfloat16)
    layer = regressed.Fp8BlockLinearNewOnes.from_float(w)
    x = torch.randn(128, 512, device="cuda", dtype=torch.bfloat16)
    names = cuda_kernel_names(lambda: layer(x))
    assert len(names) == 3, names
    assert "FillFunctor" in names[0] and names[1] == "scale_1x128_kernel", names


@pytest.mark.gpu
def test_cuda_k_blocks_not_multiple_of_4_avoid_cublas():
    """K/128 = 2: cuBLAS would take the call and return inf columns; the layer must use Triton."""
    layer, w, _ = make_layer(384, 256, "cuda", bias=False, dtype=torch.bfloat16)
    x = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    names = cuda_kernel_names(lambda: layer(x))
    assert names == ["scale_1x128_kernel", "fp8_block_scaled_gemm_kernel"], names
    y = layer(x)
    assert torch.isfinite(y).all() and rel_err(y, x.double() @ w.double().t()) < 0.08


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(5, 384, 512), (128, 200, 256), (300, 256, 1536)])
@pytest.mark.parametrize("bias", [False, True])
def test_triton_gemm_fallback_matches_float64(m, n, k, bias):
    from kernlint.reference._triton_gemm import block_scaled_mm_triton

    x_q, x_s = scale_1x128(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), column_major_scales=True)
    w_q = (torch.randn(n, k, device="cuda") * 50).clamp(-448, 448).to(torch.float8_e4m3fn)
    w_s = torch.rand(-(-n // 128), k // 128, device="cuda") + 0.5
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16) if bias else None
    y = block_scaled_mm_triton(x_q, x_s, w_q, w_s, torch.bfloat16, b)
    ref = (dequantize_1x128(x_q.cpu(), x_s.cpu(), torch.float64)
           @ dequantize_weight_128x128(w_q.cpu(), w_s.cpu(), torch.float64).t())
    if bias:
        ref = ref + b.double().cpu()
    assert y.shape == (m, n)
    assert rel_err(y, ref) < 1e-2


def gemm_operands(m, n, k, bias):
    x_q, x_s = scale_1x128(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), column_major_scales=True)
    w_q = (torch.randn(n, k, device="cuda") * 50).clamp(-448, 448).to(torch.float8_e4m3fn)
    w_s = torch.rand(-(-n // 128), k // 128, device="cuda") + 0.5
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16) if bias else None
    return x_q, x_s, w_q, w_s, b


def float64_product(x_q, x_s, w_q, w_s, b):
    ref = (dequantize_1x128(x_q.cpu(), x_s.cpu(), torch.float64)
           @ dequantize_weight_128x128(w_q.cpu(), w_s.cpu(), torch.float64).t())
    return ref if b is None else ref + b.double().cpu()


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,split", [(1, 384, 1024, 4), (16, 200, 768, 3), (33, 7168, 2048, 8),
                                         (64, 256, 4096, 16), (16, 2048, 4096, 5)])
@pytest.mark.parametrize("bias", [False, True])
def test_split_k_gemm_matches_float64_and_leaves_its_arrival_counters_at_zero(m, n, k, split, bias):
    """Split K: the last split to arrive adds the partials; call after call (the plan's later launches) and
    whatever split arrives last, the result is the product and the counters are back at 0."""
    from kernlint.reference._triton_gemm import _PLANS, block_scaled_mm_triton, gemm_config

    config = (*gemm_config(m, n, k, 0)[:4], split)
    for _ in range(3):
        x_q, x_s, w_q, w_s, b = gemm_operands(m, n, k, bias)
        y = block_scaled_mm_triton(x_q, x_s, w_q, w_s, torch.bfloat16, b, config=config)
        unsplit = block_scaled_mm_triton(x_q, x_s, w_q, w_s, torch.bfloat16, b, config=(*config[:4], 1))
        assert rel_err(y, float64_product(x_q, x_s, w_q, w_s, b)) < 1e-2
        assert rel_err(y, unsplit) < 1e-2
    plans = [p for p in _PLANS.values() if p.config == config and (p.m, p.n, p.k) == (m, n, k)]
    assert plans and all(p.split_k == split and p.kernel is not None for p in plans)
    torch.cuda.synchronize()
    assert all(int(p.arrivals.abs().sum()) == 0 for p in plans)


@pytest.mark.gpu
def test_programmatic_dependent_launch_changes_no_output_eagerly_or_under_graph_replay(monkeypatch):
    """On Hopper the GEMM starts while the quant kernel runs and waits for its results: the outputs are
    bit-identical to the layer launched without it, call after call and replayed from a CUDA graph."""
    from kernlint.reference import _launch

    assert _launch.pdl_enabled(0) == (torch.cuda.get_device_capability(0) >= (9, 0))
    layer, w, b = make_layer(2048, 4096, "cuda", True, torch.bfloat16)
    xs = [torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    with_pdl = [layer(x) for x in xs]
    static_x = xs[0].clone()
    layer(static_x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        replayed = layer(static_x)
    monkeypatch.setattr(_launch, "USE_PDL", False)
    plain = Fp8BlockLinear.from_float(w, b)   # plans made now: no PDL
    for x, y in zip(xs, with_pdl):
        assert torch.equal(y, plain(x))
        static_x.copy_(x)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(replayed, y)


@pytest.mark.gpu
def test_decode_shapes_split_k_and_large_m_does_not():
    from kernlint.reference._triton_gemm import gemm_config

    assert gemm_config(16, 2048, 4096, 0)[4] > 1   # 32 tiles of 64 columns: K is split to fill the GPU
    assert gemm_config(1, 7168, 7168, 0)[4] > 1
    assert gemm_config(4096, 7168, 2048, 0)[4] == 1
    for m, n, k in ((16, 2048, 4096), (64, 24576, 1536), (1, 7168, 256)):
        split = gemm_config(m, n, k, 0)[4]
        per_split = -(-(k // 128) // split)
        assert split * per_split - (k // 128) < per_split   # no split is left without K to sum


@pytest.mark.gpu
def test_split_k_gemm_replays_from_a_cuda_graph_with_no_fill_captured(monkeypatch):
    """Replays reuse the counters the last split reset; a plan first made inside a capture, before any
    counter pool exists, runs unsplit rather than capture a fill that every replay would run."""
    from kernlint.reference import _triton_gemm

    m, n, k = 16, 2048, 4096
    x_q, x_s, w_q, w_s, b = gemm_operands(m, n, k, True)
    config = _triton_gemm.gemm_config(m, n, k, 0)
    assert config[4] > 1
    call = lambda: _triton_gemm.block_scaled_mm_triton(x_q, x_s, w_q, w_s, torch.bfloat16, b)  # noqa: E731
    call()   # plans and compiles outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = call()
    for _ in range(3):
        x_q.copy_(scale_1x128(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), column_major_scales=True)[0])
        graph.replay()
        torch.cuda.synchronize()
        assert rel_err(y, float64_product(x_q, x_s, w_q, w_s, b)) < 1e-2

    _triton_gemm.block_scaled_mm_triton(x_q, x_s, w_q, w_s, torch.bfloat16, b, config=(*config[:4], 1))
    monkeypatch.setattr(_triton_gemm, "_ARRIVAL_POOLS", {})   # (the unsplit kernel is compiled: above)
    monkeypatch.setattr(_triton_gemm, "_PLANS", {})
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = call()
    (plan,) = _triton_gemm._PLANS.values()
    assert plan.split_k == 1 and plan.arrivals is None and not _triton_gemm._ARRIVAL_POOLS
    names = cuda_kernel_names(graph.replay)
    assert names == ["fp8_block_scaled_gemm_kernel"], names
    assert rel_err(y, float64_product(x_q, x_s, w_q, w_s, b)) < 1e-2


# --- eager plans, custom ops, torch.compile, CUDA graphs ------------------------------------------------


def quantized_reference(layer, x):
    """float64 product of the operands as this device quantized them (plus the bias)."""
    x2d = x.reshape(-1, x.shape[-1])
    x_q, x_s = scale_1x128(x2d)
    x_deq = dequantize_1x128(x_q.cpu(), x_s.cpu(), torch.float64)
    w_deq = dequantize_weight_128x128(layer.weight.cpu(), layer.weight_scale.cpu(), torch.float64)
    out = x_deq @ w_deq.t()
    if layer.bias is not None:
        out = out + layer.bias.double().cpu()
    return out.reshape(*x.shape[:-1], -1)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 16, 33, 96])
@pytest.mark.parametrize("n,k", [(7168, 2048), (384, 512)])
@pytest.mark.parametrize("bias", [False, True])
def test_cuda_planned_forward_matches_float64_call_after_call(m, n, k, bias):
    """First call plans and compiles, later calls launch from the plan: fresh inputs each time."""
    layer, _, _ = make_layer(n, k, "cuda", bias, torch.bfloat16)
    for _ in range(3):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        y = layer(x)
        assert y.shape == (m, n) and y.dtype == torch.bfloat16
        assert rel_err(y, quantized_reference(layer, x)) < 1e-2


@pytest.mark.gpu
def test_cuda_planned_forward_leading_dims_odd_strides_and_float16():
    layer, _, _ = make_layer(256, 512, "cuda", True, torch.float16)
    x = torch.randn(2, 3, 512, device="cuda", dtype=torch.float16)
    for _ in range(2):
        assert rel_err(layer(x), quantized_reference(layer, x)) < 1e-2
    odd = torch.randn(6, 1024, device="cuda", dtype=torch.float16)[:, ::2]  # inner stride 2: generic path
    for _ in range(2):
        assert rel_err(layer(odd), quantized_reference(layer, odd.contiguous())) < 1e-2
    shifted = torch.randn(6 * 512 + 1, device="cuda", dtype=torch.float16)[1:].view(6, 512)  # unaligned
    for _ in range(2):
        assert rel_err(layer(shifted), quantized_reference(layer, shifted)) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("m", [16, 256])
def test_cuda_forward_under_cuda_graph_capture(m):
    layer, _, _ = make_layer(1024, 2048, "cuda", True, torch.bfloat16)
    x = torch.randn(m, 2048, device="cuda", dtype=torch.bfloat16)
    layer(x)  # plans and compiles outside the capture (as warm-up before capture always must)
    layer(torch.randn(256, 2048, device="cuda", dtype=torch.bfloat16))  # cuBLAS probed outside it too
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        layer(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = layer(x)
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert rel_err(y, quantized_reference(layer, x)) < 1e-2


@pytest.mark.gpu
def test_cuda_forward_compiles_fullgraph():
    """One compiled layer, a decode M (Triton GEMM inside the op) and a prefill M (cuBLAS inside it)."""
    layer, _, _ = make_layer(1024, 2048, "cuda", True, torch.bfloat16)
    compiled = torch.compile(layer, fullgraph=True)
    for m in (16, 16, 256):
        x = torch.randn(m, 2048, device="cuda", dtype=torch.bfloat16)
        y = compiled(x)
        assert y.shape == (m, 1024)
        assert rel_err(y, quantized_reference(layer, x)) < 1e-2
        assert rel_err(y, layer(x)) < 1e-3
    x = torch.randn(16, 2048, device="cuda", dtype=torch.bfloat16)
    names = cuda_kernel_names(lambda: compiled(x))
    assert names[0] == "scale_1x128_kernel", names


@pytest.mark.gpu
def test_cuda_forward_compiled_with_cuda_graphs():
    """mode="reduce-overhead": the compiled forward is replayed from a CUDA graph."""
    layer, _, _ = make_layer(1024, 2048, "cuda", False, torch.bfloat16)
    compiled = torch.compile(layer, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):
        x = torch.randn(16, 2048, device="cuda", dtype=torch.bfloat16)
        assert rel_err(compiled(x).clone(), quantized_reference(layer, x)) < 1e-2


@pytest.mark.gpu
def test_a_compiled_new_ones_placeholder_is_made_by_the_compiler_and_new_empty_costs_nothing():
    """Under torch.compile the layer calls torch.ops.kernlint.fp8_blockscale_gemm with its placeholder scale as
    an argument (as vLLM's op takes it): the compiler cannot drop the placeholder, so new_ones(1) costs a fill
    kernel before the quantization kernel, and new_empty(1) none (issue 36)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
    from regressed.fp8_linear_new_ones import Fp8BlockLinearNewOnes

    fixed, _, _ = make_layer(1024, 2048, "cuda", False, torch.bfloat16)
    regressed = Fp8BlockLinearNewOnes.from_float(fixed.weight.float(), None)
    regressed.load_state_dict(fixed.state_dict())
    x = torch.randn(16, 2048, device="cuda", dtype=torch.bfloat16)
    for layer, fills in ((fixed, 0), (regressed, 1)):
        compiled = torch.compile(layer, fullgraph=True)
        assert rel_err(compiled(x), layer(x)) < 1e-3
        names = cuda_kernel_names(lambda c=compiled: c(x))
        quant = names.index("scale_1x128_kernel")
        assert quant == fills, names   # the fill (inductor's own kernel) is all that runs before it


# opcheck's schema test multiplies inputs, which torch has no FP8 kernel for: the other three checks.
OPCHECK_FP8_INPUTS = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


@pytest.mark.gpu
def test_block_scaled_mm_op_passes_opcheck_on_cuda():
    x_q, x_s = scale_1x128(torch.randn(8, 512, device="cuda", dtype=torch.bfloat16), column_major_scales=True)
    w_q = (torch.randn(256, 512, device="cuda") * 50).clamp(-448, 448).to(torch.float8_e4m3fn)
    w_s = torch.rand(2, 4, device="cuda") + 0.5
    bias = torch.randn(256, device="cuda", dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.kernlint.block_scaled_mm.default, (x_q, x_s, w_q, w_s, torch.bfloat16, bias),
                          test_utils=OPCHECK_FP8_INPUTS)
    torch.library.opcheck(torch.ops.kernlint.scale_1x128.default,
                          (torch.randn(8, 512, device="cuda"), 1e-10, False, True, 4, torch.float8_e4m3fn))


def test_block_scaled_mm_op_passes_opcheck_on_cpu():
    x_q, x_s = scale_1x128(torch.randn(8, 512))
    w_q = (torch.randn(256, 512) * 50).clamp(-448, 448).to(torch.float8_e4m3fn)
    w_s = torch.rand(2, 4) + 0.5
    torch.library.opcheck(torch.ops.kernlint.block_scaled_mm.default, (x_q, x_s, w_q, w_s, torch.float32, None),
                          test_utils=OPCHECK_FP8_INPUTS)


def test_fp8_blockscale_gemm_op_passes_opcheck_on_cpu():
    w_q = (torch.randn(256, 512) * 50).clamp(-448, 448).to(torch.float8_e4m3fn)
    w_s = torch.rand(2, 4) + 0.5
    x = torch.randn(6, 512)
    torch.library.opcheck(torch.ops.kernlint.fp8_blockscale_gemm.default, (x, w_q, w_s, x.new_empty(1), None),
                          test_utils=OPCHECK_FP8_INPUTS)


def test_the_compiled_layer_passes_its_placeholder_to_one_custom_op():
    """What the compiler sees of a quantize-in-GEMM layer: one kernlint::fp8_blockscale_gemm call whose
    input_scale is the placeholder the layer made (so a new_ones placeholder cannot be dropped as dead code)."""
    layer, _, _ = make_layer(256, 384, "cpu", True, torch.bfloat16)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(layer, fullgraph=True, backend=backend)
    x = torch.randn(5, 384, dtype=torch.bfloat16)
    assert torch.equal(compiled(x), layer(x))
    (gm,) = graphs
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and "fp8_blockscale_gemm" in str(n.target)]
    assert len(calls) == 1
    placeholder = calls[0].args[3]
    assert "new_empty" in str(placeholder.target)


def test_layer_traces_fullgraph_on_cpu():
    layer, _, _ = make_layer(256, 384, "cpu", True, torch.bfloat16)
    x = torch.randn(5, 384, dtype=torch.bfloat16)
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(x), layer(x))


def test_layer_copies_without_plans():
    import copy

    layer, _, _ = make_layer(256, 256, "cpu", False, torch.bfloat16)
    layer._cuda_plans[("fake",)] = object()
    assert copy.deepcopy(layer)._cuda_plans == {}
    assert layer.__getstate__()["_cuda_plans"] == {} and layer._cuda_plans


# --- quantize-in-GEMM (opt-in) -------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("m,n,k", [(5, 384, 512), (130, 256, 1536), (256, 512, 2048)])
@pytest.mark.parametrize("bias", [False, True])
def test_fp8_quant_gemm_matches_float64(device, m, n, k, bias):
    w = torch.randn(n, k, device=device) / k ** 0.5
    layer = Fp8BlockLinear.from_float(w, torch.randn(n, device=device, dtype=torch.bfloat16) if bias else None)
    dtype = torch.bfloat16
    x = torch.randn(m, k, device=device, dtype=dtype)
    y = fp8_quant_gemm(x, layer.weight, layer.weight_scale, layer.bias)
    assert y.shape == (m, n) and y.dtype == dtype
    assert rel_err(y, quantized_reference(layer, x)) < 1e-2
    two_step = fp8_blockscale_gemm(x, layer.weight, layer.weight_scale, None, layer.bias)[:m]
    assert rel_err(y, two_step) < 5e-3
