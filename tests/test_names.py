"""Kernel and op name tables, on real names (../shared facts, TensorRT-LLM, cuBLAS, and the H200 fixtures)."""
from __future__ import annotations

import pytest

from conftest import FIXTURES
from kernlint.trace.load import load_trace
from kernlint.trace.names import (classify_kernel, classify_op, classify_runtime, is_library_frame,
                                  short_kernel_name)

KERNELS = [
    ("void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16>, "
     "std::array<char*, 1ul> >(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul>)",
     "vectorized_elementwise_kernel[FillFunctor<BFloat16>]", "fill"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
     "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
     "vectorized_elementwise_kernel[FillFunctor<float>]", "fill"),
    ("void tensorrt_llm::kernels::fp8_blockscale_gemm::scale_1x128_kernel<__nv_bfloat16>(__nv_fp8_e4m3*, float*, "
     "__nv_bfloat16 const*, int, int)", "scale_1x128_kernel", "quant"),
    ("scale_1x128_kernel", "scale_1x128_kernel", "quant"),
    ("_per_token_group_quant_fp8", "_per_token_group_quant_fp8", "quant"),
    ("nvjet_sm90_qqtst_128x128_128x6_1x1_h_bz_coopA_Ablk128_Bvec128_TN", None, "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
     "__5x_cublas", None, "gemm"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
     "::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::Half)#1}, "
     "std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>,"
     " at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int)",
     "unrolled_elementwise_kernel[direct_copy_kernel_cuda]", "copy"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::float8_copy_kernel_cuda(at::TensorIteratorBase&)"
     "::{lambda()#2}::operator()() const::{lambda(c10::Half)#1}, std::array<char*, 2ul> >(int)",
     "vectorized_elementwise_kernel[float8_copy_kernel_cuda]", "cast"),
    ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD", "memcpy_dtod"),
    ("Memcpy DtoH (Device -> Pinned)", "Memcpy DtoH", "memcpy_dtoh"),
    ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD", "memcpy_htod"),
    ("Memset (Device)", "Memset", "memset"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", None, "comm"),
    ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, "
     "at::native::templates::cuda::uniform_and_transform<c10::Half, float, at::CUDAGeneratorImpl*>>(long)",
     "distribution_elementwise_grid_stride_kernel", "rng"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
     "float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float>)", None, "reduce"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
     "vectorized_elementwise_kernel[CUDAFunctor_add<float>]", "elementwise"),
]


@pytest.mark.parametrize("name, short, category", KERNELS, ids=[k[2] + ":" + k[0][:40] for k in KERNELS])
def test_kernel_names(name, short, category):
    assert classify_kernel(name) == category
    if short is not None:
        assert short_kernel_name(name) == short


@pytest.mark.parametrize("name, category", [
    ("cudaStreamSynchronize", "sync"), ("cudaDeviceSynchronize", "sync"), ("cudaEventSynchronize", "sync"),
    ("cudaLaunchKernel", "launch"), ("cuLaunchKernelEx", "launch"), ("cudaGraphLaunch", "launch"),
    ("cudaMemcpyAsync", "memcpy_call"), ("cudaMemsetAsync", "memcpy_call"), ("cudaMalloc", "alloc_call"),
    ("cudaFuncGetAttributes", "runtime_other"),
])
def test_runtime_names(name, category):
    assert classify_runtime(name) == category


@pytest.mark.parametrize("name, category", [
    ("aten::new_ones", "fill"), ("aten::fill_", "fill"), ("aten::zeros", "fill"), ("aten::zero_", "fill"),
    ("aten::full", "fill"), ("aten::_to_copy", "cast"), ("aten::copy_", "copy"), ("aten::contiguous", "copy"),
    ("aten::empty_strided", "alloc"), ("aten::new_empty", "alloc"), ("aten::view", "view"), ("aten::to", "view"),
    ("aten::uniform_", "rng"), ("aten::_scaled_mm", "gemm"), ("aten::_local_scalar_dense", "sync_op"),
    ("aten::nonzero", "sync_op"), ("aten::amax", "reduce"), ("aten::add", "elementwise"),
    ("aten::silu", "elementwise"), ("trtllm::fp8_block_scaling_gemm", "other"),
])
def test_op_names(name, category):
    assert classify_op(name) == category


@pytest.mark.parametrize("frame, library", [
    ("torch/nn/modules/module.py(1751): _call_impl", True),
    ("/usr/lib/python3/dist-packages/torch/_ops.py(1158): __call__", True),
    ("triton/runtime/jit.py(330): run", True),
    ("<built-in method apply of FunctionMeta object at 0x7f>", True),
    ("vllm/model_executor/layers/quantization/utils/fp8_utils.py(129): apply_w8a8_block_fp8_linear", False),
    ("fixtures/programs/functional_clean.py(35): fp8_linear", False),
])
def test_library_frames(frame, library):
    assert is_library_frame(frame) is library


GPU_TRACES = sorted((FIXTURES / "traces").glob("gpu*/**/*.pt.trace.json.gz"))


def test_the_h200_fixtures_are_there():
    assert len(GPU_TRACES) >= 20


@pytest.mark.parametrize("trace", GPU_TRACES, ids=[str(t.relative_to(FIXTURES / "traces")) for t in GPU_TRACES])
def test_every_kernel_in_the_h200_fixtures_is_classified(trace):
    f = load_trace(trace).frame
    device = f[f["kind"].isin(["kernel", "memcpy", "memset"])]
    assert len(device) > 0
    unknown = sorted(set(device.loc[device["category"] == "other", "name"]))
    assert not unknown, unknown
    assert (device["launcher"] >= 0).all(), "every device event links to its launching call"
