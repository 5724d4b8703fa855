"""Kernel and op name tables, on real names (../shared facts, TensorRT-LLM, cuBLAS, and the H200 fixtures)."""
from __future__ import annotations

import re

import pytest

from conftest import FIXTURES
from kernlint.trace.load import load_trace
from kernlint.trace.names import (
    BREAKDOWN_CATEGORIES,
    BREAKDOWN_CATEGORY_TABLE,
    BREAKDOWN_FROM_DEVICE_CATEGORY,
    DEVICE_CATEGORIES,
    HOST_CATEGORIES,
    KERNEL_CATEGORY_TABLE,
    NAMED_PATTERNS,
    OP_CATEGORY_TABLE,
    RUNTIME_CATEGORY_TABLE,
    classify_breakdown,
    classify_kernel,
    classify_op,
    classify_runtime,
    is_library_frame,
    makes_launcher_sync,
    named_pattern,
    short_kernel_name,
)

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
    # GEMMs: a `gemm` token after a BLAS precision prefix, a digit, `_` or `::` (cuBLAS, CUTLASS, cuDNN, ROCm).
    ("ampere_sgemm_128x64_nn", None, "gemm"),
    ("volta_sgemm_64x32_sliced1x4_tn", None, "gemm"),
    ("ampere_gcgemm_64x64_nt", None, "gemm"),
    ("volta_h884gemm_64x64_ldg8_nn", None, "gemm"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>"
     "(cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4::Params)", None, "gemm"),
    ("void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, cublasGemvTensorStridedBatched<float const> >()",
     None, "gemm"),
    ("void cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GemmShape<128, 128, 32> >(Params)", None, "gemm"),
    ("sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize96x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel",
     None, "gemm"),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false, "
     "cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<float>, float, float)", None, "gemm"),
    ("void gemmk1_kernel<float, 256, 5, false, false, false, false>(cublasGemmk1Params<float>)", None, "gemm"),
    ("void sgemm_largek_lds64<true, true, 6, 3, 4, 5, 2, 66>(float*, float const*, int)", None, "gemm"),
    ("void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>(float*)", None, "gemm"),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_ISA90a_K1", None, "gemm"),
    ("volta_scudnn_128x64_relu_interior_nn_v1", None, "gemm"),
    ("void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int, int, int)",
     None, "gemm"),
    ("void cudnn::cnn::wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, int)", None, "gemm"),
    # fbgemm_gpu: the letters gemm inside `fbgemm` do not make a GEMM.
    ("void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, long, 2ul, 32ul>"
     "(at::GenericPackedTensorAccessor<c10::Half, 1ul, at::RestrictPtrTraits, long>)", None, "embedding"),
    ("void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_warp_per_row_1<c10::Half, float, "
     "c10::Half, 2ul, 32>(at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, long>)",
     None, "embedding"),
    ("void bounds_check_indices_kernel<long, false>(at::GenericPackedTensorAccessor<long, 1ul, "
     "at::RestrictPtrTraits, int>)", None, "embedding"),
    ("void permute_pooled_embs_kernel<float>(float const*, long const*, long const*, long const*, float*, long)",
     None, "embedding"),
    ("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)", None, "copy"),
    ("void fbgemm_gpu::(anonymous namespace)::_get_FP8_qparam_cuda_kernel<float>(float const*, int, int, "
     "unsigned char*, float*, bool)", None, "quant"),
    ("void fbgemm_gpu::(anonymous namespace)::_FP8rowwise_to_float_cuda_kernel<float>(unsigned char const*, int, "
     "int, float*, bool)", None, "cast"),
    ("void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_float_to_hfp8_gpu(at::Tensor const&, long, "
     "long, double)::{lambda(float)#1}, at::detail::Array<char*, 2> >(int)", None, "quant"),
    ("void fbgemm_gpu::_offsets_range_cuda_kernel<int>(long, long, int const*, int*)", None, "elementwise"),
    # Rotary position embedding is elementwise, not an embedding lookup.
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*)", None, "elementwise"),
    # Elementwise stays elementwise; dequantization is a cast, not a quantization.
    ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
     "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int)", None, "elementwise"),
    ("void vllm::dequant_kernel<c10::BFloat16>(c10::BFloat16*, signed char const*)", None, "cast"),
    ("void vllm::dynamic_scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*)",
     None, "quant"),
    ("void per_token_group_quant_8bit_kernel<c10::BFloat16, __nv_fp8_e4m3, false, false, float>("
     "c10::BFloat16 const*, void*, float*, int, int, int, float, float, float, int, int)", None, "quant"),
    # Collectives, sorts and scans, norms, pooling, dropout.
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", None, "comm"),
    ("void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false, "
     "long, int, int, int>(int*, int*, int*)", None, "reduce"),
    ("void at_cuda_detail::cub::DeviceScanKernel<at_cuda_detail::cub::AgentScanPolicy<128, 15, long> >(long*)",
     None, "reduce"),
    ("void at::native::(anonymous namespace)::LayerNormForwardCUDAKernel<float, float>(long, float const*)",
     None, "reduce"),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, float const*)",
     None, "reduce"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*)",
     None, "reduce"),
    ("void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4, bool>()",
     None, "rng"),
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)0>()",
     None, "copy"),
    # torch's helpers of sort (argsort) and nonzero, recorded on the H200 (fixtures/traces/gpu-edges).
    ("at::native::(anonymous namespace)::fill_reverse_indices_kernel(long*, int, "
     "at::cuda::detail::IntDivider<unsigned int>)", None, "reduce"),
    ("void at::native::(anonymous namespace)::write_indices<long>(long*, "
     "at::native::(anonymous namespace)::TensorDims<long>, int, long, long*, long)", None, "reduce"),
    ("void at::native::(anonymous namespace)::indexSelectLargeIndex<long, long, unsigned int, 1, 1, -2, true>()",
     None, "copy"),
]


@pytest.mark.parametrize("name, short, category", KERNELS, ids=[k[2] + ":" + k[0][:40] for k in KERNELS])
def test_kernel_names(name, short, category):
    assert classify_kernel(name) == category
    if short is not None:
        assert short_kernel_name(name) == short


# Breakdown categories ("where the time goes", kernlint.trace.time_breakdown) of real names: the H200 fixtures,
# fixtures/external (resnet50 on V100, HTA's traces, TraceLens' vLLM on MI300X), and the libraries' sources.
BREAKDOWN_KERNELS = [
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
     "attention"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(float*, float const*, "
     "int, int, int, bool const*, int, bool)", "attention"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
     "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)", "attention"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
     "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)", "reduce"),
    ("kernel_unified_attention_2d", "attention"),
    ("void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::half_t>>()",
     "attention"),
    ("fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t>::Params)",
     "attention"),
    ("void vllm::paged_attention_v1_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128>()", "attention"),
    ("_fwd_kernel", "attention"),
    ("triton_per_fused__softmax_0", "attention"),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, float const*)", "norm"),
    ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float, float, float)", "norm"),
    ("_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineProblemI",
     "norm"),
    ("_rms_norm_kernel", "norm"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float)", "norm"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "norm"),
    ("triton_red_fused_add_sum_0", "reduce"),
    ("triton_poi_fused_add_cos_sin_0", "elementwise"),
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)0>"
     "(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)", "copy/layout"),
    ("void nhwcToNchwKernel<__nv_bfloat16, __nv_bfloat16, float, true, false, (cudnnKernelDataType_t)0>()",
     "copy/layout"),
    ("batched_transpose_32x32_half", "copy/layout"),
    ("Memcpy DtoD (Device -> Device)", "copy/layout"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 1, 128, 1>(float*)",
     "copy/layout"),
    ("Memcpy HtoD (Pageable -> Device)", "host transfer"),
    ("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*)", "gemm"),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nchw_tilesize128x128x64_kernel__5x_cudnn", "gemm"),
    ("nvjet_sm90_tst_8x64_64x16_4x1_v_bz_TNN", "gemm"),
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1_swiglu", "gemm"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "communication"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)", "memset/fill"),
    ("Memset (Device)", "memset/fill"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
     "elementwise"),
    ("scale_1x128_kernel", "elementwise"),
    ("void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, long>()",
     "embedding"),
]


@pytest.mark.parametrize("name, breakdown", BREAKDOWN_KERNELS, ids=[b + ":" + n[:40] for n, b in BREAKDOWN_KERNELS])
def test_breakdown_categories(name, breakdown):
    assert classify_breakdown(name, classify_kernel(name)) == breakdown


def test_every_device_category_has_a_breakdown_category():
    assert set(BREAKDOWN_FROM_DEVICE_CATEGORY) == set(DEVICE_CATEGORIES)
    assert set(BREAKDOWN_FROM_DEVICE_CATEGORY.values()) <= set(BREAKDOWN_CATEGORIES)
    assert {c for _, c in BREAKDOWN_CATEGORY_TABLE} <= set(BREAKDOWN_CATEGORIES)
    assert "idle" not in BREAKDOWN_CATEGORIES   # idle is no event's category: time no event covers


@pytest.mark.parametrize("name, category", [
    ("cudaStreamSynchronize", "sync"), ("cudaDeviceSynchronize", "sync"), ("cudaEventSynchronize", "sync"),
    ("cudaLaunchKernel", "launch"), ("cuLaunchKernelEx", "launch"), ("cudaGraphLaunch", "launch"),
    ("cudaMemcpyAsync", "memcpy_call"), ("cudaMemsetAsync", "memcpy_call"), ("cudaMalloc", "alloc_call"),
    ("cudaFuncGetAttributes", "runtime_other"),
    # Host syncs: the CUDA runtime, the driver, HIP; synchronous copies.
    ("cuStreamSynchronize", "sync"), ("cuCtxSynchronize", "sync"), ("cuEventSynchronize", "sync"),
    ("hipStreamSynchronize", "sync"), ("hipDeviceSynchronize", "sync"), ("hipEventSynchronize", "sync"),
    ("cudaMemcpy", "sync"), ("cudaMemcpy2D", "sync"), ("cuMemcpyDtoH_v2", "sync"), ("hipMemcpy", "sync"),
    ("hipMemcpyWithStream", "sync"),
    # A stream waiting on an event waits on the device: not a host sync. Nor is querying.
    ("cudaStreamWaitEvent", "runtime_other"), ("hipStreamWaitEvent", "runtime_other"),
    ("cuStreamWaitEvent", "runtime_other"), ("cudaEventQuery", "runtime_other"), ("cudaEventRecord", "runtime_other"),
    # HIP like its CUDA counterparts.
    ("hipLaunchKernel", "launch"), ("hipExtModuleLaunchKernel", "launch"), ("hipModuleLaunchKernel", "launch"),
    ("hipGraphLaunch", "launch"), ("hipMemcpyAsync", "memcpy_call"), ("hipMemsetAsync", "memcpy_call"),
    ("hipMemcpyDtoHAsync", "memcpy_call"), ("hipMalloc", "alloc_call"), ("hipFree", "alloc_call"),
    ("hipHostMalloc", "alloc_call"), ("cudaHostAlloc", "alloc_call"), ("hipGetDevicePropertiesR0600", "runtime_other"),
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
    # Embedding ops; rotary embedding is elementwise.
    ("aten::embedding", "embedding"), ("aten::embedding_dense_backward", "embedding"),
    ("aten::_embedding_bag", "embedding"), ("fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function",
                                            "embedding"),
    ("fbgemm::bounds_check_indices", "embedding"), ("_C::rotary_embedding", "elementwise"),
    # Collectives by namespace: c10d::scatter_ is not aten::scatter_.
    ("c10d::alltoall_base_", "comm"), ("c10d::scatter_", "comm"), ("aten::scatter_", "copy"),
    ("c10d::allreduce_", "comm"), ("record_param_comms", "comm"),
    # Reads of device values on the host; nonzero_static and _assert_async do not read them.
    ("aten::item", "sync_op"), ("aten::is_nonzero", "sync_op"), ("aten::equal", "sync_op"),
    ("aten::_unique2", "sync_op"), ("aten::masked_select", "sync_op"), ("aten::nonzero_static", "elementwise"),
    ("aten::_assert_async", "elementwise"),
    # cuDNN batch norm is a norm, not a GEMM; `convex_sum` is not a convolution; tensordot is a GEMM.
    ("aten::cudnn_batch_norm", "reduce"), ("aten::cudnn_convolution", "gemm"), ("aten::conv2d", "gemm"),
    ("fb::convex_sum", "other"), ("aten::tensordot", "gemm"), ("aten::max_pool2d_with_indices", "reduce"),
    # Quantization ops; dequantization is a cast.
    ("_C::per_token_group_fp8_quant", "quant"), ("fbgemm::FloatToFP8RowwiseQuantized", "quant"),
    ("fbgemm::FP8RowwiseQuantizedToFloat", "cast"), ("aten::dequantize", "cast"),
    ("_C::rms_norm_dynamic_per_token_quant", "quant"), ("aten::_empty_affine_quantized", "alloc"),
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
    # kernlint's own driving code is never the user's scope (`kernlint run file.py:step` once blamed cli.py)
    ("/venv/lib/python3.11/site-packages/kernlint/cli.py(142): main", True),
    ("/venv/lib/python3.11/site-packages/kernlint/cli/run.py(42): run", True),
    ("kernlint/capture/runner.py(80): capture", True),
    ("kernlint/api.py(401): __exit__", True),
    ("kernlint/reference/linear.py(120): forward", False),      # the reference kernels are profiled code
    ("kernlint/workloads/fp8.py(30): step", False),
])
def test_library_frames(frame, library):
    assert is_library_frame(frame) is library


GPU_TRACES = sorted((FIXTURES / "traces").glob("gpu*/**/*.pt.trace.json.gz"))


def test_the_h200_fixtures_are_there():
    assert len(GPU_TRACES) >= 20


# Traces whose profiling window cuts work in two on purpose: kernels without a launch, a rank without kernels.
WINDOW_CUT = FIXTURES / "traces" / "gpu-edges" / "window-edges"


@pytest.mark.parametrize("trace", GPU_TRACES, ids=[str(t.relative_to(FIXTURES / "traces")) for t in GPU_TRACES])
def test_every_kernel_in_the_h200_fixtures_is_classified(trace):
    f = load_trace(trace).frame
    device = f[f["kind"].isin(["kernel", "memcpy", "memset"])]
    unknown = sorted(set(device.loc[device["category"] == "other", "name"]))
    assert not unknown, unknown
    if WINDOW_CUT in trace.parents or trace.name.endswith("-cpu-activity.pt.trace.json.gz"):
        return   # cut on purpose; or recorded with ProfilerActivity.CPU alone (launch calls, no kernels)
    assert len(device) > 0
    assert (device["launcher"] >= 0).all(), "every device event links to its launching call"


def test_every_table_category_is_a_known_category():
    assert {c for _, c in KERNEL_CATEGORY_TABLE} <= set(DEVICE_CATEGORIES)
    assert {c for _, c in RUNTIME_CATEGORY_TABLE} | {c for _, c in OP_CATEGORY_TABLE} <= set(HOST_CATEGORIES)
    assert "embedding" in DEVICE_CATEGORIES and "embedding" in HOST_CATEGORIES


@pytest.mark.parametrize("name, syncs", [
    ("Memcpy DtoH (Device -> Pageable)", True),
    ("Memcpy DtoH (Device -> Pinned)", False),   # asynchronous: the cudaStreamSynchronize after it is the sync
    ("Memcpy HtoD (Pageable -> Device)", False),
    ("Memcpy DtoD (Device -> Device)", False),
    ("Memcpy HtoD (Host -> Device)", False),     # ROCm's naming
    ("Memset (Device)", False),
])
def test_device_events_that_make_their_launch_a_sync(name, syncs):
    assert makes_launcher_sync(name) is syncs


# Real names (kernels, ops, ranges, Python frames) for each named pattern: (name, matches). Sources: vLLM
# csrc/quantization/.../per_token_group_quant.cu and fp8_utils.py, SGLang fp8_kernel.py and sgl-kernel,
# DeepGEMM tests, TensorRT-LLM fp8_blockscale_gemm and its trtllm:: ops, vLLM weight_utils.py / dummy_loader.py,
# torch.profiler and torch._inductor.
NAMED_CASES = {
    # -- R1/R2/R3 (fills, copies, casts) --
    "dead-fill-fill-op": [
        ("aten::fill_", True), ("aten::zero_", True), ("aten::masked_fill_", False), ("aten::index_fill_", False),
        ("aten::zeros", False), ("aten::fill_diagonal_", False),
    ],
    "dead-fill-factory-op": [
        ("aten::zeros", True), ("aten::full", True), ("aten::new_ones", True), ("aten::zeros_like", True),
        ("aten::full_like", True), ("aten::empty", False), ("aten::new_empty", False), ("aten::sum", False),
        ("aten::index_add_", False),
    ],
    "full-overwrite-op": [
        ("aten::copy_", True), ("aten::uniform_", True), ("aten::normal_", True), ("aten::fill_", False),
        ("aten::zero_", False), ("aten::add_", False), ("aten::index_copy_", False), ("aten::masked_scatter_", False),
        ("aten::_copy_from", False),
    ],
    "materializing-op": [
        ("aten::repeat", True), ("aten::tile", True), ("aten::contiguous", True), ("aten::repeat_interleave", False),
        ("aten::clone", False), ("aten::expand", False),
    ],
    "cast-op": [
        ("aten::_to_copy", True), ("aten::to", False), ("aten::copy_", False), ("aten::_to_copy_out", False),
    ],
    # -- R9 (eager attention, unfused norms, layout transforms) --
    "softmax-op": [
        ("aten::softmax", True), ("aten::_softmax", True), ("aten::_safe_softmax", True),
        ("aten::log_softmax", False), ("aten::_log_softmax", False), ("aten::_softmax_backward_data", False),
    ],
    "attention-matmul-op": [
        ("aten::matmul", True), ("aten::bmm", True), ("aten::baddbmm", True), ("aten::mm", False),
        ("aten::linear", False), ("aten::addmm", False),
    ],
    "fused-attention-op": [
        ("aten::scaled_dot_product_attention", True), ("aten::_scaled_dot_product_flash_attention", True),
        ("aten::_scaled_dot_product_efficient_attention", True), ("aten::_flash_attention_forward", True),
        ("aten::_scaled_dot_product_cudnn_attention", True), ("flash_attn::_flash_attn_forward", True),
        ("vllm::unified_attention_with_output", True), ("aten::softmax", False), ("aten::bmm", False),
    ],
    "norm-module": [
        ("Qwen2RMSNorm_0", True), ("LlamaRMSNorm_12", True), ("T5LayerNorm_3", True), ("LayerNorm_0", True),
        ("RMSNorm_1", True), ("BatchNorm2d_0", False), ("GroupNorm_0", False), ("Linear_0", False),
    ],
    "norm-frame": [
        ("model.py(40): rms_norm", True), ("modeling_llama.py(60): _norm", True),
        ("layers/layernorm.py(12): layer_norm_fn", True), ("torch/nn/functional.py(2900): layer_norm", True),
        ("torch/nn/functional.py(2800): batch_norm", False), ("model.py(12): normalize", False),
        ("torch/nn/utils/clip_grad.py(30): clip_grad_norm_", False), ("bench.py(169): rmsnorm", False),
        ("vllm/_aiter_ops.py(509): _rocm_aiter_rms_norm_impl", True), ("model.py(3): normalize_rows", False),
    ],
    "convolution-op": [
        ("aten::cudnn_convolution", True), ("aten::convolution_backward", True), ("aten::conv2d", True),
        ("aten::miopen_convolution", True), ("aten::_convolution", True), ("aten::convolution_overrideable", False),
        ("aten::conv_tbc_backward", False), ("aten::linear", False),
    ],
    "layout-transform-kernel": [
        ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>"
         "(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)", True),
        ("void nhwcToNchwKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>(int, int, int, int, "
         "float const*, float*, float, float)", True),
        ("batched_transpose_32x32_half", True),
        ("void at::native::elementwise_kernel<128, 2>(int, at::native::direct_copy_kernel_cuda)", False),
        ("sm80_xmma_fprop_implicit_gemm_indexed_f32f32_tf32f32_f32_nhwckrsc_nchw", False),
    ],
    "zero-copy-tensor-frame": [
        ("<built-in method from_numpy of type object at 0x7f10892cea40>", True),
        ("<built-in method frombuffer of type object at 0x7f10892cea40>", True),
        ("<built-in method tensor of type object at 0x7f10892cea40>", False),
        ("<built-in method as_tensor of type object at 0x7f10892cea40>", False),
        ("model.py(12): from_numpy", False),
    ],
    "scalar-read-op": [
        ("aten::item", True),
        ("aten::_local_scalar_dense", True),
        ("aten::is_nonzero", False),
        ("aten::itemsize", False),
    ],
    "data-loader-range": [
        ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", True),
        ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", True),
        ("DataLoader", False),
        ("ProfilerStep#3", False),
    ],
    "backward-node-op": [
        ("autograd::engine::evaluate_function: LinearBackward0", True),
        ("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", True),
        ("aten::linear", False),
        ("LinearBackward0", False),
    ],
    "inductor-generated-kernel": [
        ("triton_red_fused__fused_rms_norm_scale_1x128_0", True),
        ("triton_poi_fused_mul_scale_1x128_silu_split_1", True),
        ("triton_per_fused__to_copy_add_mean_pow_rsqrt_0", True),
        ("triton_tem_fused_mm_0", True),
        ("scale_1x128_kernel", False),
        ("_per_token_group_quant_fp8", False),
        ("triton_kernel_unified_attention", False),
    ],
    # -- FP8 and host patterns (KL203, KL503, KL005) --
    "pinned-host-alloc-call": [
        ("cudaHostAlloc", True), ("cudaMallocHost", True), ("hipHostMalloc", True), ("cuMemHostAlloc", True),
        ("cuMemAllocHost_v2", True),
        ("cudaHostRegister", False), ("cudaMalloc", False), ("cudaMallocAsync", False), ("hipMalloc", False),
        ("cudaFreeHost", False),
    ],
    "pinned-host-alloc-op": [
        ("aten::pin_memory", True), ("aten::_pin_memory", True),
        ("aten::is_pinned", False), ("aten::empty", False), ("aten::pin_memory_backward", False),
    ],
    "random-init-op": [
        ("aten::uniform_", True), ("aten::normal_", True), ("aten::random_", True),
        ("aten::uniform", False), ("aten::rand", False), ("aten::fill_", False), ("aten::normal", False),
    ],
    "act-quant-1x128-kernel": [
        # TensorRT-LLM's fused quantize + UE8M0 pack (trtllm::fp8_quantize_1x128_packed_ue8m0, PR 14348) and
        # FlashInfer's port of it.
        ("void tensorrt_llm::kernels::fp8_blockscale_gemm::fp8_quantize_1x128_packed_kernel<4>(__nv_fp8_e4m3*, "
         "int*, __nv_bfloat16 const*, int, int, int)", True),
        ("fp8_quantize_1x128_packed_ue8m0", True),
        ("fp8_quantize_1x1280_kernel", False),
        ("void tensorrt_llm::kernels::fp8_blockscale_gemm::scale_1x128_kernel<__nv_bfloat16>(__nv_fp8_e4m3*, "
         "float*, __nv_bfloat16 const*, int, int)", True),
        ("void tensorrt_llm::kernels::fp8_blockscale_gemm::scale_1x128_reshape_kernel<__nv_bfloat16, "
         "__nv_fp8_e4m3, float>(__nv_fp8_e4m3*, float*, __nv_bfloat16 const*, int, int, int, int)", True),
        ("scale_1x128_kernel", True),
        ("_per_token_group_quant_fp8", True),
        ("_per_token_group_quant_fp8_colmajor", True),
        ("void per_token_group_quant_8bit_kernel<c10::BFloat16, __nv_fp8_e4m3, false, false, float>("
         "c10::BFloat16 const*, void*, float*, int, int, int, float, float, float, int, int)", True),
        ("void per_token_group_quant_8bit_packed_kernel<c10::BFloat16, __nv_fp8_e4m3>(c10::BFloat16 const*, "
         "void*, unsigned int*, int, int, int, float, float, float, int, int)", True),
        ("_per_token_group_quant_8bit", True),
        ("_per_token_cast_to_fp8_kernel", True),
        ("_silu_mul_per_token_group_quant_fp8_colmajor", True),
        ("void vllm::dynamic_scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, "
         "c10::BFloat16 const*, float*, long)", False),
        ("void vllm::dynamic_per_token_scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>("
         "c10::Float8_e4m3fn*, float*, c10::BFloat16 const*, float const*, int)", False),
        ("void vllm::scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*)", False),
        ("void tensorrt_llm::kernels::fp8_blockscale_gemm::scale_128x128_kernel<__nv_bfloat16>(__nv_fp8_e4m3*)",
         False),
        ("per_block_cast_to_fp8", False),
        ("quantize_weight_128x128", False),
        ("_per_token_group_quant_int8", False),
        ("dequantize_1x128", False),
        ("void vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int)",
         False),
    ],
    "act-quant-1x128-op": [
        ("scale_1x128", True),
        ("vllm::per_token_group_quant_fp8", True),
        ("_C::per_token_group_fp8_quant", True),
        ("_C::per_token_group_fp8_quant_packed", True),
        ("sgl_kernel::sgl_per_token_group_quant_8bit", True),
        ("sgl_kernel::sgl_per_token_group_quant_8bit_v2", True),
        ("sgl_kernel::sgl_per_token_group_quant_fp8", True),
        ("trtllm::fp8_quantize_1x128", True),
        ("trtllm::fp8_batched_quantize_1x128_permute102", True),
        ("_C::dynamic_scaled_fp8_quant", False),
        ("_C::dynamic_per_token_scaled_fp8_quant", False),
        ("_C::static_scaled_fp8_quant", False),
        ("sgl_kernel::sgl_per_token_quant_fp8", False),
        ("sgl_kernel::sgl_per_tensor_quant_fp8", False),
        ("quantize_weight_128x128", False),
        ("dequantize_1x128", False),
        ("trtllm::fp8_block_scaling_gemm", False),
        ("aten::fill_", False),
    ],
    "dummy-weight-init-frame": [
        ("vllm/model_executor/model_loader/weight_utils.py(1340): initialize_dummy_weights", True),
        ("/usr/local/lib/python3.12/site-packages/vllm/model_executor/model_loader/weight_utils.py(1370): "
         "initialize_single_dummy_weight", True),
        ("vllm/model_executor/model_loader/dummy_loader.py(31): load_weights", True),
        ("kernlint/reference/dummy_init.py(48): initialize_dummy_weights", True),
        ("vllm/v1/worker/gpu_model_runner.py(2301): _dummy_run", False),
        ("vllm/v1/worker/gpu_model_runner.py(2510): _dummy_sampler_run", False),
        ("vllm/v1/worker/gpu_model_runner.py(2600): profile_run", False),
        ("vllm/v1/worker/gpu_model_runner.py(2700): capture_model", False),
        ("vllm/worker/model_runner.py(100): dummy_run", False),
        ("trainer.py(10): _get_dummy_batch", False),
        ("tests/utils.py(5): make_dummy_input", False),
        ("vllm/model_executor/model_loader/default_loader.py(260): load_weights", False),
        ("vllm/model_executor/model_loader/weight_utils.py(1340): initialize_dummy_weights_later", False),
    ],
    "dummy-weight-init-range": [
        ("dummy_init", True), ("dummy_weight_init", True), ("dummy_weights_init", True),
        ("init_dummy_weights", True), ("initialize_dummy_weights", True), ("DUMMY_INIT", True),
        ("model.dummy_init", True),
        ("_dummy_run", False), ("dummy_run", False), ("dummy_batch", False), ("_dummy_sampler_run", False),
        ("profile_run", False), ("execute_model", False),
    ],
    "invariant-source-op": [
        ("aten::arange", True), ("aten::ones", True), ("aten::full", True), ("aten::linspace", True),
        ("aten::eye", True),
        ("aten::empty", False), ("aten::ones_like", False), ("aten::randn", False), ("aten::arange_out", False),
    ],
    "invariant-math-op": [
        ("aten::pow", True), ("aten::outer", True), ("aten::cos", True), ("aten::sin", True), ("aten::cat", True),
        ("aten::einsum", True), ("aten::_to_copy", True),
        ("aten::linear", False), ("aten::mean", False), ("aten::uniform_", False), ("aten::item", False),
        ("aten::cosine_similarity", False), ("aten::copy_", False), ("aten::masked_fill", False),
        ("aten::lift_fresh", False),
    ],
    "hot-scope-range": [
        ("ProfilerStep#12", True), ("execute_model", True), ("GPUModelRunner.execute_model", True),
        ("forward_batch", True), ("forward_batch_generation", True), ("forward_decode", True),
        ("forward_extend", True), ("decode_step", True), ("sampler", True), ("Sampler", True),
        ("sample_tokens", True), ("train_step", True),
        ("_dummy_run", False), ("profile_run", False), ("capture_model", False), ("load_model", False),
        ("warmup", False), ("ProfilerStep", False), ("resample_buffer", False), ("scale_1x128", False),
        ("execute_model_setup_x", False),
    ],
    "hot-scope-frame": [
        ("vllm/model_executor/models/llama.py(320): forward", True),
        ("torch/nn/modules/linear.py(125): forward", True),
        ("vllm/v1/sample/sampler.py(60): sample", True),
        ("transformers/generation/utils.py(2700): _sample", True),
        ("vllm/v1/worker/gpu_model_runner.py(1500): execute_model", True),
        ("sglang/srt/model_executor/model_runner.py(900): forward_decode", True),
        ("tests/zoo.py(10): decode_step", True),
        ("vllm/model_executor/model_loader/default_loader.py(260): load_weights", False),
        ("vllm/v1/worker/gpu_model_runner.py(2301): _dummy_run", False),
        ("vllm/v1/worker/gpu_model_runner.py(2700): capture_model", False),
        ("train.py(10): warmup", False), ("model.py(5): __init__", False),
        ("model.py(5): forward_hook_setup", False), ("data.py(3): resample", False),
    ],
    "step-frame": [
        ("vllm/v1/sample/sampler.py(60): sample", True),
        ("vllm/v1/worker/gpu_model_runner.py(1500): execute_model", True),
        ("sglang/srt/model_executor/model_runner.py(900): forward_decode", True),
        ("tests/zoo.py(10): decode_step", True), ("train.py(3): train_step", True),
        ("vllm/model_executor/models/llama.py(320): forward", False),
        ("torch/nn/modules/linear.py(125): forward", False), ("train.py(10): warmup", False),
        ("data.py(3): resample", False),
    ],
    "setup-scope-range": [
        ("load_model", True), ("Warmup", True), ("profile_run", True), ("_dummy_run", True),
        ("capture_model", True), ("initialize_dummy_weights", True), ("[param|cuda]", True),
        ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", True),
        ("decode_step", False), ("ProfilerStep#3", False), ("execute_model", False), ("reinitialized", False),
        ("sampler", False),
    ],
    "setup-scope-frame": [
        ("model.py(5): __init__", True),
        ("vllm/model_executor/model_loader/default_loader.py(260): load_weights", True),
        ("vllm/v1/worker/gpu_model_runner.py(2301): _dummy_run", True), ("train.py(10): warmup", True),
        ("torch/nn/modules/linear.py(110): reset_parameters", True),
        ("model.py(9): forward", False), ("vllm/v1/sample/sampler.py(60): sample", False),
        ("model.py(5): __init___helper", False), ("_pytest/runner.py(500): setup", False),
    ],
    "hot-scope-module": [
        ("Linear_0", True), ("Sampler_0", True), ("LlamaDecoderLayer_31", True),
        ("Linear", False), ("execute_model", False), ("ProfilerStep#3", False), ("", False),
    ],
    "graph-capture-frame": [
        ("torch/cuda/graphs.py(400): make_graphed_callables", True),
        ("vllm/v1/worker/gpu_model_runner.py(2700): capture_model", True),
        ("sglang/srt/model_executor/cuda_graph_runner.py(380): capture", True),
        ("sglang/srt/model_executor/cuda_graph_runner.py(420): capture_one_batch_size", True),
        ("te/graph.py(100): _make_graphed_callables", True),
        ("kernlint/capture/runner.py(33): capture", False),
        ("vllm/v1/worker/gpu_model_runner.py(2301): _dummy_run", False),
        ("sglang/srt/model_executor/cuda_graph_runner.py(500): replay", False),
        ("torch/cuda/graphs.py(70): capture_begin", False),
    ],
    "compiled-graph-call-op": [
        ("## Call CompiledFxGraph f33zdrnvux5zrml46fzp4foviz2b6shnoy6nycaaofxl4cvsbemy ##", True),
        ("Torch-Compiled Region: 0/0", True),
        ("## forward ##", False), ("CompiledFunction", False), ("TorchDynamo Cache Lookup", False),
    ],
    "inductor-kernel-op": [
        ("triton_poi_fused__to_copy_add_fp8_blockscale_gemm_mean_mul_new_ones_pow_rsqrt_1", True),
        ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0", True), ("triton_red_fused_sum_2", True),
        ("triton_tem_fused_mm_0", False), ("scale_1x128_kernel", False), ("aten::fill_", False),
    ],
    "compiler-machinery-frame": [
        ("torch/_inductor/cudagraph_trees.py(2326): record_function", True),
        ("torch/_inductor/cudagraph_trees.py(603): _use_cuda_memory_pool_manager", True),
        ("torch/cuda/graphs.py(237): __enter__", True),
        ("/usr/lib/python3/dist-packages/torch/_dynamo/eval_frame.py(1423): _fn", True),
        ("torch/_dynamo/variables/builder.py(300): wrap", True),
        ("torch/cuda/__init__.py(1152): synchronize", False),
        ("torch/_inductor/runtime/triton_heuristics.py(1407): run", False),
        ("/tmp/torchinductor_root/es/ceshrgxlm.py(232): call", False),
        ("mytorch/_dynamo/eval_frame.py(10): _fn", False), ("model.py(12): forward", False),
    ],
    "graph-capture-range": [
        ("cuda_graph_capture", True), ("capture_cudagraph", True), ("CUDAGraph capture", True),
        ("graph_capture", True),
        ("cuda_graph_replay", False), ("execute_model", False), ("capture_model_inputs", False),
        ("_dummy_run", False),
    ],
    "profiler-step-range": [
        ("ProfilerStep#551", True), ("ProfilerStep#0", True),
        ("ProfilerStep", False), ("PyTorch Profiler (0)", False), ("ProfilerStep#1 (warmup)", False),
        ("my ProfilerStep#2", False),
    ],
    "profiler-container-range": [
        ("ProfilerStep#551", True), ("ProfilerStep#2", True),
        ("## Call CompiledFxGraph fbvcwuqulrovfujd7iuc223hzjvp3lnu3ph7 ##", True),
        ("Torch-Compiled Region: 0/0", True), ("CompiledFunction", True), ("CompiledFunctionBackward", True),
        ("TorchDynamo Cache Lookup", True), ("DistributedDataParallel.forward", True),
        ("PyTorch Profiler (0)", True),
        ("execute_model", False), ("attn(F)", False), ("mlp(B)", False), ("_dummy_run", False),
        ("scale_1x128", False), ("## forward ##", False), ("## encoder fp8 None ##", False),
        ("nn.Module: Linear_0", False), ("Optimizer.step#SGD.step", False), ("ProfilerStep", False),
    ],
}


@pytest.mark.parametrize("pattern, name, matches",
                         [(p, n, m) for p, cases in NAMED_CASES.items() for n, m in cases],
                         ids=[f"{p}:{'+' if m else '-'}:{n[-50:]}" for p, cases in NAMED_CASES.items()
                              for n, m in cases])
def test_named_patterns(pattern, name, matches):
    assert (re.search(named_pattern(pattern), name) is not None) is matches


def test_every_named_pattern_has_cases_both_ways():
    assert set(NAMED_CASES) == set(NAMED_PATTERNS)
    for pattern, cases in NAMED_CASES.items():
        assert {m for _, m in cases} == {True, False}, pattern


def test_an_unknown_named_pattern_names_the_known_ones():
    with pytest.raises(KeyError) as err:
        named_pattern("act-quant-1x129-kernel")
    assert "act-quant-1x128-kernel" in str(err.value) and "profiler-container-range" in str(err.value)


LONG = 40_000
LONG_NAMES = [
    "a" * LONG,
    "sm90_" * (LONG // 5),
    "void k<" + "at::native::Foo<" * (LONG // 16) + ">" * (LONG // 16) + ">(int)",
    "void at::native::vectorized_elementwise_kernel<4, " + "x" * LONG + ">(int)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::" + "Functor" * (LONG // 7) + "<int>>(int)",
    "x<" + "y" * LONG + ">(at::TensorIteratorBase&)",
    "unrolled_elementwise_kernel" * (LONG // 27),
    "fbgemm_" * (LONG // 7),
    "a::" * (LONG // 3),
    "<" * LONG,
    "(" * LONG,
    "Memcpy DtoH (Device -> " + "P" * LONG,
]


@pytest.mark.parametrize("name", LONG_NAMES, ids=[n[:16] for n in LONG_NAMES])
def test_a_long_name_classifies_and_shortens(name):
    # No timing: a quadratic pattern would take minutes on these, and show as a hang.
    for fn in (classify_kernel, short_kernel_name, classify_op, classify_runtime, makes_launcher_sync):
        fn.__wrapped__(name)
    for pattern in NAMED_PATTERNS.values():
        re.search(pattern, name)


def test_packed_ue8m0_scale_fills_are_fills_before_the_quant():
    """KL001 sees the packed-scale zero-fill before the quantization kernel (TensorRT-LLM PR 14348:
    packedBuf.zero_() in fp8_quantize_1x128_packed_ue8m0; vLLM PR 42988: torch.zeros for the packed FP8
    scales of per_token_group_quant_fp8_packed_for_deepgemm) as a fill: the kernel and the ops."""
    kernel = NAMED_PATTERNS["act-quant-1x128-kernel"]
    op = NAMED_PATTERNS["act-quant-1x128-op"]
    assert re.search(kernel, "void per_token_group_quant_8bit_packed_kernel<c10::BFloat16, __nv_fp8_e4m3>(...)")
    assert re.search(op, "trtllm::fp8_quantize_1x128_packed_ue8m0")
    assert re.search(op, "_C::per_token_group_fp8_quant_packed")
    assert classify_kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, "
                           "std::array<char*, 1ul> >(int, at::native::FillFunctor<int>, std::array<char*, 1ul>)"
                           ) == "fill"
    assert classify_op("aten::zeros") == "fill" and classify_op("aten::zero_") == "fill"
    assert classify_op("aten::empty_strided") == "alloc"   # the fix: torch.empty_strided, no fill

