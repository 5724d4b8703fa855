"""Kernel and op names: normalization to short readable names, and classification into categories.

Device-side categories (kernels, memcpy, memset) and host-side categories (runtime calls, aten ops) come
from ordered tables of regular expressions; the first match wins. The tables are data so that a new
kernel family is one line. tests/test_names.py runs them on real names recorded on the H200 and read from
vLLM, SGLang, DeepGEMM, TensorRT-LLM and cuBLAS; tests/test_categories_real.py on traces other projects
recorded (fixtures/external: A100, V100, MI250, 2021 kineto, an fbgemm recommender). Names are classified
once per distinct name (lru_cache), and no pattern backtracks badly on a long name.

Also here: the device events whose launching call blocks the host (SYNCING_DEVICE_EVENTS), and the named
patterns that rule files reference as `@name` (NAMED_PATTERNS).

Nothing is compiled on import: a table's pattern is compiled when the first name reaches it (`_Table`), and
each of the module's own expressions on its first use (`_Lazy`), so a command that classifies a few names
compiles a few patterns.
"""
from __future__ import annotations

import re
from functools import lru_cache


class _Lazy:
    """A regular expression of this module, compiled on its first use. That use puts the compiled pattern in
    this module's namespace under the same name, so every later use (`names.GRAPH_LAUNCH.match`, or a
    function of this module) costs what a plain compiled pattern costs."""

    __slots__ = ("_name", "_source", "_compiled")

    def __init__(self, name: str, source: str) -> None:
        self._name = name
        self._source = source
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, attr: str):
        if attr in _Lazy.__slots__:   # an instance made without __init__ (a copy): not a pattern's attribute
            raise AttributeError(attr)
        if self._compiled is None:
            self._compiled = re.compile(self._source)
            globals()[self._name] = self._compiled
        return getattr(self._compiled, attr)

    def __repr__(self) -> str:
        return f"re.compile({self._source!r}) (not compiled yet)"


# Categories a device event can have. "gemm" holds matrix products and convolutions (aten's conv ops are gemm
# too); "reduce" holds reductions, norms, softmax, pooling, scans, sorts and top-k (as the op table does);
# "embedding" holds embedding lookups and their backward and optimizer kernels (fbgemm_gpu's split_embedding*,
# torch's embedding_bag), which gather rows and are neither GEMMs nor plain copies.
DEVICE_CATEGORIES = (
    "fill", "copy", "cast", "elementwise", "reduce", "gemm", "quant", "rng", "embedding",
    "memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memcpy_other", "memset", "triton", "comm", "other",
)
# Categories a host-side event (runtime/driver call, aten op) can have.
HOST_CATEGORIES = (
    "sync", "launch", "memcpy_call", "alloc_call", "runtime_other",
    "fill", "copy", "cast", "elementwise", "reduce", "gemm", "quant", "rng", "embedding", "sync_op", "comm",
    "alloc", "view", "other",
)

# Ordered: the first pattern that matches the full kernel name decides. Names here are real ones seen in
# torch 2.11 / H200 traces (fixtures/traces/gpu*), in the traces other projects recorded (fixtures/external: A100,
# V100, MI250, 2021 kineto, an fbgemm recommender) and in TensorRT-LLM's, vLLM's, SGLang's, DeepGEMM's and cuBLAS's
# kernels. Every pattern is tried only where an identifier token starts: at the start of the name or after a
# non-letter (`_`, a digit, `:`, `<`, a space). So `gemm` matches `sgemm` (through its BLAS prefix),
# `s1688gemm`, `gemmSN_TN_kernel`, `cutlass::gemm::` and `xmma_gemm`, but not the letters inside `fbgemm_gpu`.
# Patterns hold no unbounded wildcard (`.*`), so a name of any length classifies in linear time.
KERNEL_CATEGORY_TABLE: tuple[tuple[str, str], ...] = (
    (r"^Memcpy HtoD", "memcpy_htod"),
    (r"^Memcpy DtoH", "memcpy_dtoh"),
    (r"^Memcpy DtoD", "memcpy_dtod"),
    (r"^Memcpy", "memcpy_other"),
    (r"^Memset", "memset"),
    # torch's FillFunctor, masked_fill, zero_; triton_kernels' MoE routing memset (vLLM on ROCm).
    (r"FillFunctor|fill_kernel|zero_kernel|routing_memset", "fill"),
    # Inductor's generated Triton kernels say what they are in their prefix: pointwise, reduction,
    # persistent reduction, template (matmul / conv).
    (r"^triton_poi_", "elementwise"),
    (r"^triton_(?:red|per)_", "reduce"),
    (r"^triton_tem_", "gemm"),
    # NCCL / RCCL, NVSHMEM, vLLM's and TensorRT-LLM's custom all-reduce.
    (r"nccl|rccl|nvshmem|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device|one_shot_|two_shot_",
     "comm"),
    # Rotary position embedding is elementwise, not an embedding lookup.
    (r"rotary|m?rope(?![A-Za-z])", "elementwise"),
    # fbgemm_gpu: split_embedding_* (forward, backward, optimizer), bounds_check_indices, permute_pooled_embs,
    # its embedding cache; torch: embedding_bag, embedding_backward (a plain nn.Embedding forward is index_select).
    (r"[Ee]mbedding|bounds_check_indices|pooled_embs|lxu_cache|linearize_cache_indices", "embedding"),
    # Quantization with scales: 1x128 activation and 128x128 weight blocks (TensorRT-LLM scale_1x128_kernel,
    # vLLM / SGLang per_token_group_quant_*, DeepGEMM per_token_cast_to_fp8), per-tensor / per-token FP8 quant,
    # fbgemm's FP8 rowwise and HFP8 quantize kernels.
    (r"scale_1x128|scale_128x128|cast_to_fp8|quantize|quant(?![A-Za-z])|blockquant|qparam|to_hfp8", "quant"),
    # Conversions: torch's float8 / bfloat16 / half copy kernels, dequantization.
    (r"float8_copy|bfloat16_copy|float16_copy|to_fp8|fp8_convert|dequant|hfp8_to_float|FP8rowwise_to_float"
     r"|fp8_to_float", "cast"),
    # Copies, concatenation, indexing, gather / scatter, layout changes (cuDNN's nchw <-> nhwc), fbgemm's sparse
    # permutes, repeat_interleave (compute_cuda_kernel), vLLM's paged KV-cache writes (reshape_and_cache*).
    (r"direct_copy_kernel|copy_kernel|[A-Za-z]*CopyFunctor|copy_device_to_device|cat_batched|CatArrayBatched"
     r"|index_copy|index_kernel|index_put|indexing_backward|indexSelect|index_select|indexFunc|linearize_index"
     r"|gather(?!TopK)"
     r"|scatter|nchwToNhwc|nhwcToNchw|permute_2D|permute_1D|permute_indices|compute_cuda_kernel(?![A-Za-z])"
     r"|reshape_and_cache", "copy"),
    # GEMM, GEMV and convolution: cuBLAS / cuBLASLt (sgemm, h884gemm, s1688gemm, gemv2T, nvjet, xmma,
    # splitKreduce), CUTLASS, DeepGEMM, Triton matmuls, ROCm Tensile / hipBLASLt (Cijk_...) and rocBLAS, cuDNN
    # convolutions (scudnn, winograd, implicit_convolve_sgemm, fft2d, wgrad / dgrad engines, im2col).
    (r"(?:[sdhczi]|gc)?gemm|gemv|nvjet|cutlass|xmma|wgmma|cublas|matmul|b?mm_kernel|splitKreduce|Cijk_|rocblas"
     r"|hipblaslt|scudnn|[Ww]inograd|convolve|fft2d_|wgrad|dgrad|im2col|cask_cudnn|conv2d|conv_depthwise", "gemm"),
    (r"distribution_elementwise|uniform|normal_|philox|curand|randperm|bernoulli|random_|dropout", "rng"),
    # Reductions, norms (layer / RMS / batch norm, cuDNN's bn_fw / bn_bw), softmax, pooling, NLL loss, and cub's
    # scans, sorts, selections and reduce-by-key (DeviceScan*, DeviceRadixSort*, DeviceReduceByKey...) with
    # torch's helpers of sort and nonzero (fill_reverse_indices_kernel, fill_index_and_segment_kernel,
    # write_indices), CK's Rmsnorm2dFwd, triton_kernels' MoE routing (a histogram and scan of the top-k experts:
    # _combined_routing_compute, _sum_bitmatrix_rows).
    (r"reduce_kernel|Reduce|reduction|softmax|SoftMax|[Ll]ayer_?[Nn]orm|rms_?norm|RMSNorm|Rmsnorm|norm_kernel"
     r"|GammaBeta|routing_compute|bitmatrix"
     r"|RowwiseMoments|bn_fw|bn_bw|batch_norm|BatchNorm|argmax|argmin|topk|TopK|gatherTopK|cumsum|cumprod|scan"
     r"|Device(?:Segmented)?(?:Reduce|Scan|RadixSort|MergeSort|Sort|Select|Compact|Rle|Histogram)"
     r"|(?:bitonic|radix|merge)?[Ss]ort|fill_reverse_indices|fill_index_and_segment|write_indices"
     r"|max_pool|avg_pool|average_pool|MaxPool|AvgPool|ClassNLLCriterion|nll_loss", "reduce"),
    (r"elementwise|[A-Za-z]*Functor|pointwise|silu|gelu|act_and_mul|multi_tensor_apply|scalePackedTensor"
     r"|offsets_range", "elementwise"),
)

# Host-side runtime and driver calls (CUDA runtime `cuda*`, driver `cu*`, HIP `hip*`). An optional `_v2` /
# `_ptsz` / `_ptds` suffix (driver-API variants) is part of the name.
_API_SUFFIX = r"(?:_v\d+|_ptsz|_ptds)?$"
RUNTIME_CATEGORY_TABLE: tuple[tuple[str, str], ...] = (
    # Calls that block the host until a stream, an event, a context or the device is done. A stream waiting
    # on an event (cudaStreamWaitEvent) is a wait on the device, not on the host: it is runtime_other.
    (r"^(?:cuda|hip|cu)(?:Stream|Device|Event|Ctx|Thread)?Synchronize" + _API_SUFFIX, "sync"),
    # Synchronous copies return when the copy is done. hipMemcpyWithStream is PyTorch's blocking copy on ROCm
    # (where CUDA builds call cudaMemcpyAsync + cudaStreamSynchronize).
    (r"^(?:cuda|hip)Memcpy(?:2D|3D|Peer|ToSymbol|FromSymbol|DtoH|HtoD|WithStream)?" + _API_SUFFIX, "sync"),
    (r"^cuMemcpy(?:DtoH|HtoD|2D|3D|Peer)?" + _API_SUFFIX, "sync"),
    (r"^(?:cuda|hip|cu)\w*Launch", "launch"),
    (r"Memcpy|Memset|MemPrefetch", "memcpy_call"),
    (r"Malloc|Alloc|Free|MemPool|cuMemCreate|cuMemMap|cuMemUnmap|cuMemRelease|cuMemAddressReserve|HostRegister"
     r"|HostUnregister", "alloc_call"),
    (r".", "runtime_other"),
)

# Device events whose launching call blocks the host, whatever the call's name: a device-to-host copy into
# pageable memory returns only when the copy is done (CUDA "API synchronization behavior"), so the
# cudaMemcpyAsync / hipMemcpyAsync that issued it is a sync. `.item()` on torch 2.0 shows this way. Into pinned
# memory the copy is asynchronous; the cudaStreamSynchronize that follows is the sync. The 2021 kineto trace in
# fixtures/external names memcpys the same way (`Memcpy HtoD (Pageable -> Device)`); ROCm traces write `Host`
# (`Memcpy HtoD (Host -> Device)`), which does not say pageable, so those are left alone.
SYNCING_DEVICE_EVENTS: tuple[str, ...] = (
    r"^Memcpy DtoH \(Device -> Pageable\)",
)

# Ops by namespace, before their base name is looked at: every c10d op is a collective (c10d::scatter_ is not
# aten::scatter_).
OP_NAMESPACE_TABLE: tuple[tuple[str, str], ...] = (
    (r"^(?:c10d|_c10d_functional|c10d_functional)::", "comm"),
)

# aten / user ops, by name without the namespace. Ops in "alloc" and "view" do no device work.
OP_CATEGORY_TABLE: tuple[tuple[str, str], ...] = (
    (r"^(fill_|zero_|ones|zeros|full|new_ones|new_zeros|new_full|ones_like|zeros_like|full_like"
     r"|masked_fill_?|index_fill_?|scalar_tensor)$", "fill"),
    (r"^(_to_copy|_to_dtype|to_dtype|type_as)$", "cast"),
    # Dequantization (aten::dequantize, fbgemm's FP8RowwiseQuantizedToFloat / HFP8QuantizedToFloat).
    (r"(?<![A-Za-z])dequant|QuantizedToFloat", "cast"),
    (r"(?<![A-Za-z])(?:rotary|m?rope(?![A-Za-z]))", "elementwise"),
    (r"(?<![A-Za-z])(?:[Ee]mbedding|bounds_check_indices|pooled_embs)", "embedding"),
    (r"^(copy_|clone|contiguous|repeat|repeat_interleave|cat|_cat|stack|index|index_copy_?|index_put_?"
     r"|_index_put_impl_|scatter_?|gather|index_select|flip|roll|tile|take|take_along_dim|_copy_from"
     r"|_copy_from_and_resize|\w+_copy|constant_pad_nd|flatten_dense_tensors|permute_\w+)$", "copy"),
    (r"^(empty|empty_strided|empty_like|new_empty|new_empty_strided|resize_|resize_as_|set_|record_stream"
     r"|_empty_affine_quantized|empty_permuted)$", "alloc"),
    (r"^(view|view_as|reshape|_reshape_alias|as_strided|as_strided_|t|transpose|permute|unsqueeze|squeeze"
     r"|unsqueeze_|squeeze_|expand|expand_as|select|slice|narrow|detach|detach_|alias|unflatten|flatten|split"
     r"|split_with_sizes|chunk|unbind|lift_fresh|_unsafe_view|numpy_T|mT|movedim|unfold|resolve_conj|resolve_neg"
     r"|conj|_conj|to|size|stride|dim|is_contiguous|_nested_tensor_from_mask_left_aligned|item_size|requires_grad_"
     r"|result_type|_has_compatible_shallow_copy_type|diagonal|real|imag|view_as_real|view_as_complex|lift"
     r"|_unsafe_index|broadcast_tensors|unflatten_dense_tensors)$", "view"),
    # Quantizing ops (vLLM's _C::per_token_group_fp8_quant, scaled_fp8_quant, fused norm + quant ops, sgl_kernel's
    # sgl_per_token_group_quant_8bit, fbgemm's FloatToFP8RowwiseQuantized, kernlint's scale_1x128 range).
    (r"(?<![A-Za-z])(?:quant|scale_1x128)|Quantized", "quant"),
    (r"^(uniform_|normal_|rand|randn|randint|random_|bernoulli_?|multinomial|randperm|exponential_"
     r"|randn_like|rand_like|dropout|native_dropout|_fused_dropout|feature_dropout|alpha_dropout)$", "rng"),
    (r"^(mm|matmul|addmm|_addmm_activation|bmm|baddbmm|addbmm|linear|_scaled_mm|scaled_mm|_scaled_grouped_mm"
     r"|einsum|mv|dot|vdot|addmv|_int_mm|tensordot|chain_matmul|_?convolution\w*|conv\dd|conv_\w+"
     r"|cudnn_convolution\w*|miopen_\w*convolution\w*|mkldnn_convolution\w*|_?slow_conv\w*|thnn_conv\w*)$",
     "gemm"),
    # Ops that read device values on the host: item / _local_scalar_dense (also under is_nonzero, equal,
    # allclose), and ops whose output size depends on the data (nonzero, unique, masked_select).
    # nonzero_static exists not to sync; _assert_async asserts on the device; Tensor.tolist records no op.
    (r"^(_local_scalar_dense|item|nonzero|is_nonzero|equal|allclose|unique|_unique|_unique2|unique_consecutive"
     r"|unique_dim|unique_dim_consecutive|masked_select|_linalg_check_errors)$", "sync_op"),
    (r"^(sum|mean|amax|amin|max|min|norm|linalg_vector_norm|linalg_norm|std|var|std_mean|var_mean|prod|softmax"
     r"|_softmax|log_softmax|_log_softmax|_softmax_backward_data|_log_softmax_backward_data|argmax|argmin|topk"
     r"|sort|argsort|cumsum|cumprod|logsumexp|any|all|aminmax|_aminmax|\w*layer_norm\w*|\w*group_norm\w*"
     r"|\w*batch_norm\w*|\w*rms_norm|\w*cumsum|\w*pool\dd\w*|nll_loss\w*)$", "reduce"),
    (r"^(all_reduce|allreduce_?|allreduce_coalesced_?|all_gather\w*|allgather\w*|_allgather_base_"
     r"|reduce_scatter\w*|_reduce_scatter_base_|alltoall\w*|all_to_all\w*|broadcast_?|barrier|monitored_barrier"
     r"|send|recv_?|recv_any_source_|record_param_comms|wait_tensor|All2All\w*)$", "comm"),
)

_MEMCPY_SHORT = _Lazy("_MEMCPY_SHORT", r"^(Memcpy|Memset) (\w+)")
# Each starts only where a word starts ((?<!\w)), so a long run of word characters is scanned once, not once
# per character: a 40,000-character name still shortens in linear time.
_FUNCTOR = _Lazy("_FUNCTOR", r"(?<!\w)(\w*Functor\w*)(<[^<>]*(?:<[^<>]*>[^<>]*)*>)?")
_NAMESPACE_QUALIFIER = _Lazy("_NAMESPACE_QUALIFIER", r"(?:\b[A-Za-z_]\w*|\(anonymous namespace\))::")
# The host function a templated TensorIterator kernel was instantiated from (direct_copy_kernel_cuda, ...).
_HOST_FUNCTION = _Lazy("_HOST_FUNCTION", r"(?<!\w)(\w+)(?:<[^<>()]*>)?\(at::TensorIteratorBase")

# Where a kernel pattern may start: the start of an identifier token (not right after a letter).
_TOKEN_START = r"(?<![A-Za-z])"


class _Table:
    """An ordered table of (pattern, category): the first pattern that matches decides. Each pattern is
    compiled when the first name reaches it (a name that matches the third line compiles three)."""

    __slots__ = ("_sources", "_compiled")

    def __init__(self, table: tuple[tuple[str, str], ...], prefix: str = "") -> None:
        self._sources = tuple((f"{prefix}(?:{pattern})" if prefix else pattern, category)
                              for pattern, category in table)
        self._compiled: list[re.Pattern[str] | None] = [None] * len(self._sources)

    def first_match(self, name: str, default: str) -> str:
        compiled = self._compiled
        for i, (source, category) in enumerate(self._sources):
            pattern = compiled[i]
            if pattern is None:
                pattern = compiled[i] = re.compile(source)
            if pattern.search(name):
                return category
        return default


_KERNEL_TABLE = _Table(KERNEL_CATEGORY_TABLE, _TOKEN_START)
_RUNTIME_TABLE = _Table(RUNTIME_CATEGORY_TABLE)
_OP_NAMESPACE_TABLE = _Table(OP_NAMESPACE_TABLE)
_OP_TABLE = _Table(OP_CATEGORY_TABLE)
_SYNCING_DEVICE_EVENT = _Lazy("_SYNCING_DEVICE_EVENT", "|".join(f"(?:{p})" for p in SYNCING_DEVICE_EVENTS))


@lru_cache(maxsize=65536)
def classify_kernel(name: str) -> str:
    """Category of a device event (kernel, memcpy or memset) from its full name."""
    return _KERNEL_TABLE.first_match(name, "other")


@lru_cache(maxsize=4096)
def classify_runtime(name: str) -> str:
    """Category of a CUDA runtime or driver call."""
    return _RUNTIME_TABLE.first_match(name, "runtime_other")


@lru_cache(maxsize=16384)
def classify_op(name: str) -> str:
    """Category of an op (aten::fill_ -> fill): by namespace (c10d:: -> comm), else by the name without it."""
    category = _OP_NAMESPACE_TABLE.first_match(name, "")
    if category:
        return category
    base = name.rsplit("::", 1)[-1]
    return _OP_TABLE.first_match(base, "elementwise" if name.startswith("aten::") else "other")


@lru_cache(maxsize=4096)
def makes_launcher_sync(device_event_name: str) -> bool:
    """Whether the call that launched this device event blocks the host (SYNCING_DEVICE_EVENTS)."""
    return _SYNCING_DEVICE_EVENT.search(device_event_name) is not None


# -- device-time breakdown categories (issue 37, item 3; kernlint.trace.time_breakdown) --
# "Where the time goes": the coarse categories a step's device time is split into, in display order. They
# answer the engineer's first question about a step (how much is GEMM, attention, norms, layout changes,
# communication, idle), which the device categories above do not: those put softmax and norms in `reduce`
# and attention kernels in `triton` or `other`. `idle` is not a kernel's category: it is the step's device
# wall time that no device event covers (kernlint.trace.time_breakdown).
BREAKDOWN_CATEGORIES = (
    "gemm", "attention", "norm", "elementwise", "reduce", "embedding", "copy/layout", "host transfer",
    "communication", "memset/fill", "other",
)
# Ordered, first match wins, tried where an identifier token starts (as KERNEL_CATEGORY_TABLE); a name no line
# matches takes its device category's breakdown category (BREAKDOWN_FROM_DEVICE_CATEGORY).
BREAKDOWN_CATEGORY_TABLE: tuple[tuple[str, str], ...] = (
    # log-softmax is a loss or a sampler's log-probabilities, not attention (cunn_SoftMaxForward's
    # LogSoftMaxForwardEpilogue template argument says so; inductor names it `_log_softmax`).
    (r"LogSoftMax|log_?softmax|logsoftmax", "reduce"),
    # Attention: FlashAttention 2/3 (flash_fwd_kernel, flash_fwd_splitkv_kernel, flash_bwd_*, FlashAttnFwdSm90),
    # FlashMLA, xFormers / CUTLASS / CK / AITER fmha (fmha_cutlassF, FmhaFwdKernel, fmha_fwd), torch's
    # memory-efficient SDPA (efficient_attention_*), cuDNN SDPA (cudnn_generated_fort_native_sdpa_*), vLLM's
    # paged and Triton attention (paged_attention_v1_kernel, kernel_unified_attention_2d, prefix-prefill's
    # _fwd_kernel), FlashInfer (BatchPrefillWithPagedKVCacheKernel, BatchDecodeWith...), Triton tutorials'
    # _attn_fwd; and the softmax of eager attention (softmax_warp_forward, cunn_SoftMaxForward, inductor's
    # triton_per_fused__softmax_*): softmax in an LLM is attention's.
    (r"flash_?(?:fwd|bwd|attn|mla)|Flash_?(?:Attn|MLA)|[Ff]mha|FMHA|[Aa]ttention|attn_(?:fwd|bwd)|sdpa|SDPA"
     r"|^_fwd_kernel|flashinfer|(?:Batch|Single)(?:Prefill|Decode)With|softmax|SoftMax|Softmax", "attention"),
    # Normalization layers: layer / RMS / batch / group / instance norm (torch's vectorized_layer_norm_kernel,
    # RowwiseMomentsCUDAKernel, GammaBetaBackwardCUDAKernel; cuDNN's bn_fw_* / bn_bw_*; MIOpen's
    # MIOpenBatchNorm*; vLLM's rms_norm_kernel / fused_add_rms_norm_kernel; CK's Rmsnorm2dFwd; apex's
    # cuApplyLayerNorm), and inductor's reductions that are a norm by their fused ops (RMSNorm is
    # mean-pow-rsqrt, LayerNorm var_mean).
    (r"[Ll]ayer_?[Nn]orm|[Rr]ms_?[Nn]orm|RMSNorm|[Bb]atch_?[Nn]orm|BatchNorm|[Gg]roup_?[Nn]orm|[Ii]nstance_?[Nn]orm"
     r"|bn_fw|bn_bw|RowwiseMoments|GammaBeta|^triton_(?:red|per)_fused_\w*?(?:rsqrt|var_mean)", "norm"),
    # Layout changes the device category calls elementwise or does not know: transposes (cuBLAS's
    # transpose_*, MIOpen's batched_transpose_*, torch's permute kernels), cuDNN's and TensorRT's
    # NCHW <-> NHWC conversions.
    (r"[Tt]ranspose|permute|nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw", "copy/layout"),
)
# The breakdown category of each device category (kernlint.trace.names.DEVICE_CATEGORIES) for names that no
# line of BREAKDOWN_CATEGORY_TABLE matched. Casts, random numbers, quantization and unknown Triton kernels are
# elementwise work; device-to-device copies are layout; copies to or from the host are host transfers.
BREAKDOWN_FROM_DEVICE_CATEGORY: dict[str, str] = {
    "gemm": "gemm", "elementwise": "elementwise", "cast": "elementwise", "rng": "elementwise",
    "quant": "elementwise", "triton": "elementwise", "reduce": "reduce", "embedding": "embedding",
    "copy": "copy/layout", "memcpy_dtod": "copy/layout", "memcpy_htod": "host transfer",
    "memcpy_dtoh": "host transfer", "memcpy_other": "host transfer", "comm": "communication",
    "fill": "memset/fill", "memset": "memset/fill", "other": "other",
}
_BREAKDOWN_TABLE = _Table(BREAKDOWN_CATEGORY_TABLE, _TOKEN_START)


@lru_cache(maxsize=65536)
def classify_breakdown(name: str, device_category: str) -> str:
    """Breakdown category of a device event from its full name and its device category."""
    return _BREAKDOWN_TABLE.first_match(name, "") or BREAKDOWN_FROM_DEVICE_CATEGORY.get(device_category, "other")
# -- end device-time breakdown --


# Whole [scope] tables a rule names as `scope = "@name"`, instead of copying the block.
SCOPE_PRESETS: dict[str, dict] = {
    # Hot scopes: step and serving ranges (ProfilerStep#N, execute_model, forward_decode, decode_step,
    # sampler...), Python frames of forwards, samplers and decode steps, and every nn.Module; set-up code
    # (loading, weight init, warm-up, graph capture) runs outside them. A trace without a step (no step
    # range, no step function) is checked over its whole profiled window, set-up excepted; what is found
    # outside the scopes above is a warning there (the trace cannot say whether it ran in a step).
    "hot-step": {
        "annotations": ["@hot-scope-range"],
        "frames": ["@hot-scope-frame"],
        "modules": ["@hot-scope-module"],
        "steps": ["@hot-scope-range", "@step-frame"],
        "when-absent": "profiled-window",
        "setup-annotations": ["@setup-scope-range", "@graph-capture-range"],
        "setup-frames": ["@setup-scope-frame", "@graph-capture-frame"],
    },
}


# How torch.profiler names an nn.Module's frame (with_modules): `nn.Module: Linear_0`. Rules match the module
# name without it.
MODULE_PREFIX = "nn.Module: "


def without_module_prefix(name: str) -> str:
    return name[len(MODULE_PREFIX):] if name.startswith(MODULE_PREFIX) else name


# Calls through which Triton launches its kernels (the CUDA driver; HIP's module API on ROCm): a kernel no
# table line knows, launched by one of them, is a Triton kernel.
TRITON_LAUNCH = _Lazy("TRITON_LAUNCH", r"^(?:cuLaunchKernel|hipModuleLaunchKernel)")
# Ops whose copy kernels change the dtype: a copy launched under one of them is a cast.
CASTING_OPS: frozenset[str] = frozenset({"aten::_to_copy", "aten::to"})


def is_triton_launch(runtime_name: str) -> bool:
    return TRITON_LAUNCH.match(runtime_name) is not None


def _strip_parameter_list(name: str) -> str:
    """Drop a trailing C++ parameter list `(...)` at template depth 0."""
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and not name.startswith("(anonymous", i):
            return name[:i]
    return name


def _split_template(name: str) -> tuple[str, str]:
    """`ns::kernel<args>` -> (`ns::kernel`, `args`), splitting at the first `<` at depth 0."""
    i = name.find("<")
    if i < 0:
        return name, ""
    return name[:i], name[i + 1 : name.rfind(">")] if ">" in name else name[i + 1 :]


@lru_cache(maxsize=65536)
def short_kernel_name(name: str) -> str:
    """A readable short name for a kernel.

    `void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16>, ...>(...)`
    -> `vectorized_elementwise_kernel[FillFunctor<BFloat16>]`;
    `tensorrt_llm::kernels::fp8_blockscale_gemm::scale_1x128_kernel<__nv_bfloat16>(...)` -> `scale_1x128_kernel`;
    `Memcpy DtoD (Device -> Device)` -> `Memcpy DtoD`. Names without C++ decoration are kept as they are.
    """
    match = _MEMCPY_SHORT.match(name)
    if match:
        return f"{match.group(1)} {match.group(2)}"
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    text = _strip_parameter_list(text)
    head, template = _split_template(text)
    base = _NAMESPACE_QUALIFIER.sub("", head).strip()
    functor = _FUNCTOR.search(template)
    if functor:
        detail = _NAMESPACE_QUALIFIER.sub("", functor.group(0))
        return f"{base}[{detail}]"
    host = _HOST_FUNCTION.search(template)
    if host:
        return f"{base}[{host.group(1)}]"
    return base or name


def frame_parts(frame_name: str) -> tuple[str | None, int | None, str]:
    """`path/to/file.py(129): apply_weights` -> ("path/to/file.py", 129, "apply_weights")."""
    match = _FRAME.match(frame_name)
    if not match:
        return None, None, frame_name
    return match.group(1), int(match.group(2)), match.group(3)


_FRAME = _Lazy("_FRAME", r"^(.*?)\((\d+)\): (.*)$")

# Python frames from these places are library plumbing, not the code a user wrote. A scope built from
# Python frames skips them.
LIBRARY_FRAME = _Lazy(
    "LIBRARY_FRAME",
    r"(^|/)(torch|triton|contextlib|functools|threading|runpy|importlib|typing|abc|_pytest|pluggy|click)/"
    r"|^<built-in|^<frozen|^<string>|(^|/)site-packages/(torch|triton)/|^\s*$"
    r"|^(contextlib|functools|threading|runpy|abc)\.py\("
    # kernlint's own driving code (the CLI, the API, the capture runner, the audit): it calls the profiled
    # step, it never is the user's scope. Its reference kernels and workloads stay user code.
    r"|(^|/)kernlint/(cli|cli/[a-z_]+|api|pytest_plugin|audit|pipeline|cases|rank_worker|__main__|capture/[a-z_]+)\.py\("
)


def is_library_frame(frame_name: str) -> bool:
    return bool(LIBRARY_FRAME.search(frame_name))


# Runtime calls that replay a whole captured CUDA graph: the kernels they run have no launch of their own.
GRAPH_LAUNCH = _Lazy("GRAPH_LAUNCH", r"^(cuda|hip|cu)GraphLaunch")


def is_graph_launch(runtime_name: str) -> bool:
    return bool(GRAPH_LAUNCH.match(runtime_name))


# Stream capture: launches between these calls on one thread are recorded into a CUDA graph, not run, so
# they have no device event of their own.
GRAPH_CAPTURE_BEGIN = _Lazy("GRAPH_CAPTURE_BEGIN", r"^(cuda|hip)StreamBeginCapture|^cuStreamBeginCapture")
GRAPH_CAPTURE_END = _Lazy("GRAPH_CAPTURE_END", r"^(cuda|hip)StreamEndCapture|^cuStreamEndCapture")

# (issue 36) torch's CUDAGraph.replay() frame: what it launches itself before the graph launch (the seed and
# offset fills of each registered RNG generator) is torch's replay prologue, not the program's code.
GRAPH_REPLAY_FRAME = _Lazy("GRAPH_REPLAY_FRAME", r"(^|/)torch/cuda/graphs\.py\(\d+\): replay$")


def is_graph_replay_frame(frame_name: str) -> bool:
    return bool(GRAPH_REPLAY_FRAME.search(frame_name))


# Python frames of the profiler itself (its start and stop synchronize the device): what runs under them is
# the profiler's work, not the profiled program's.
PROFILER_FRAME = _Lazy("PROFILER_FRAME", r"(^|/)torch/(profiler/|autograd/profiler\.py|autograd/profiler_util\.py)")


def is_profiler_frame(frame_name: str) -> bool:
    return bool(PROFILER_FRAME.search(frame_name))


def is_compiler_machinery_frame(frame_name: str) -> bool:
    """Whether a Python frame is torch's compiler or CUDA-graph machinery (`@compiler-machinery-frame`)."""
    return bool(_COMPILER_MACHINERY.search(frame_name))


# Named patterns that rule files reference as `@name` (the rule loader expands them); each is searched with
# re.search. The names in the comments were read from the projects' sources (see tests/test_names.py).
NAMED_PATTERNS: dict[str, str] = {
    # Kernels of 1x128 per-token-group activation quantization:
    #   TensorRT-LLM  tensorrt_llm::kernels::fp8_blockscale_gemm::scale_1x128_kernel<...> (+ scale_1x128_reshape_kernel)
    #   kernlint      scale_1x128_kernel (Triton)
    #   vLLM          _per_token_group_quant_fp8, _per_token_group_quant_fp8_colmajor (Triton),
    #                 per_token_group_quant_8bit_kernel<...>, per_token_group_quant_8bit_packed_kernel<...> (CUDA)
    #   SGLang        _per_token_group_quant_8bit (Triton), per_token_group_quant_8bit_kernel<...> (sgl-kernel)
    #   DeepGEMM      per_token_cast_to_fp8 (Triton ports: _per_token_cast_to_fp8_kernel)
    #   and fused activation + quantization kernels of the same layout (vLLM's
    #   _silu_mul_per_token_group_quant_fp8_colmajor).
    # Not per-tensor / per-token quantization (dynamic_scaled_fp8_quant_kernel,
    # dynamic_per_token_scaled_fp8_quant_kernel), 128x128 weight blocks (scale_128x128_kernel,
    # per_block_cast_to_fp8), int8-only kernels (per_token_group_quant_int8) or dequantization.
    # Tensors made from a NumPy array or a buffer they share, not copied from Python data: the profiler shows
    # their aten::lift_fresh under the builtin's frame (torch.from_numpy, torch.frombuffer, torch.from_dlpack).
    "zero-copy-tensor-frame": r"^<built-in method (?:from_numpy|frombuffer|from_dlpack) ",
    # Autograd's backward nodes, as the profiler records them on the autograd engine's thread
    # (`autograd::engine::evaluate_function: LinearBackward0`): the backward's own work, not a forward layer's.
    "backward-node-op": r"^autograd::engine::evaluate_function: ",
    # The range torch.utils.data.DataLoader records around each batch it yields (collate included):
    # `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`, `..._MultiProcessingDataLoaderIter...`.
    "data-loader-range": r"^enumerate\(DataLoader\)#",
    # Ops that read one value to the host. Under an op that is not itself a sync (aten::mul given a 0-dim
    # tensor argument), it reads a CPU scalar: no device is involved on any device.
    "scalar-read-op": r"^aten::(?:item|_local_scalar_dense)$",
    # torch.compile's generated Triton kernels (inductor), named after the ops they fused: pointwise, reduction,
    # persistent reduction, template. `triton_red_fused__fused_rms_norm_scale_1x128_0` holds an RMSNorm fused
    # with the quant's input, not the quant: such a kernel is never an anchor by a substring of its name.
    "inductor-generated-kernel": r"^triton_(?:poi|red|per|tem)_",
    # TensorRT-LLM's fused quantize + UE8M0 packing (trtllm::fp8_quantize_1x128_packed_ue8m0, SM100) launches
    # fp8_quantize_1x128_packed_* kernels; before PR 14348 it zeroed its packed scale buffer first (a
    # FillFunctor<int> in the op's scope before the quant kernel: KL001's finding).
    "act-quant-1x128-kernel": r"(?<![A-Za-z0-9])(?:scale_1x128(?!\d)|per_token_group_quant_(?:fp8|8bit)"
                              r"|per_token_cast_to_fp8|fp8_quantize_1x128(?!\d))",
    # Ops and record_function ranges of the same quantization (CPU traces, or ops above the kernel):
    #   kernlint's scale_1x128 range; vLLM's vllm::per_token_group_quant_fp8 custom op and its
    #   _C::per_token_group_fp8_quant(_packed); SGLang's sgl_kernel::sgl_per_token_group_quant_8bit(_v2) and
    #   sgl_per_token_group_quant_fp8; TensorRT-LLM's trtllm::fp8_quantize_1x128 and
    #   fp8_batched_quantize_1x128_permute102. Not _C::dynamic_scaled_fp8_quant, _C::dynamic_per_token_scaled_fp8_quant,
    #   sgl_per_token_quant_fp8, sgl_per_tensor_quant_fp8, quantize_weight_128x128, dequantize_1x128.
    "act-quant-1x128-op": r"(?<![A-Za-z0-9])(?:scale_1x128(?!\d)|per_token_group_quant_(?:fp8|8bit)"
                          r"|per_token_group_fp8_quant|quantize_1x128(?!\d)|per_token_cast_to_fp8)",
    # Python frames (`path/to/file.py(123): function`) of dummy weight init: vLLM's
    # weight_utils.initialize_dummy_weights / initialize_single_dummy_weight and DummyModelLoader.load_weights
    # (model_loader/dummy_loader.py), kernlint's reference of the same names. Not warm-up runs on dummy batches
    # (_dummy_run, _dummy_sampler_run, profile_run, capture_model, _get_dummy_batch, make_dummy_input).
    "dummy-weight-init-frame": r"\.py\(\d+\): (?:initialize_dummy_weights|initialize_single_dummy_weight)$"
                               r"|(?:^|[/\\])dummy_loader\.py\(\d+\): load_weights$",
    # record_function ranges around dummy weight init: dummy_init, dummy_weight(s)_init, init_dummy_weights,
    # initialize_dummy_weights (any case, as a whole word). Not _dummy_run, dummy_batch.
    "dummy-weight-init-range": r"(?i)(?<![a-z0-9])(?:dummy_(?:weights?_)?init(?:iali[sz]ation)?"
                               r"|init(?:iali[sz]e)?_(?:single_)?dummy_weights?)(?![a-z0-9])",
    # -- FP8 and host patterns (KL203, KL503, KL005) --
    # Runtime calls that allocate page-locked host memory: what Tensor.pin_memory() and pin_memory=True
    # factories reach (CUDA's caching host allocator calls cudaHostAlloc; ROCm hipHostMalloc), and the driver
    # API forms. Slow, serialized in the driver, host-blocking (vLLM PR 37006). Not cudaHostRegister (it pins
    # memory that exists, usually once at set-up).
    "pinned-host-alloc-call": r"^(?:cudaHostAlloc|cudaMallocHost|hipHostMalloc|hipHostAlloc|hipMallocHost"
                              r"|cuMemHostAlloc|cuMemAllocHost)(?:_v\d+)?$",
    # Ops that copy a tensor into newly pinned host memory (Tensor.pin_memory(); _pin_memory is its kernel).
    "pinned-host-alloc-op": r"^aten::_?pin_memory$",
    # Random ops of dummy weight init that overwrite a tensor's values (KL005 asks which of them hit a scale).
    # In-place random fills (`tensor.uniform_()`...): the op's first argument is the tensor it overwrites.
    "random-init-op": r"^aten::(?:uniform_|normal_|random_|bernoulli_|exponential_|log_normal_|cauchy_"
                      r"|geometric_)$",
    # -- end FP8 and host patterns --
    # Ranges that profilers and compilers wrap around whole steps or graphs, never a layer's scope:
    # torch.profiler's ProfilerStep#N (and its `PyTorch Profiler (0)` span), torch.compile's
    # `## Call CompiledFxGraph <hash> ##`, `Torch-Compiled Region: 0/0`, `CompiledFunction(Backward)`,
    # `TorchDynamo Cache Lookup`, and DDP's `DistributedDataParallel.forward` around the whole model. Other
    # `## name ##` ranges are user annotations (torchrec's pipeline stages use that style) and are not here.
    # -- zoo families R4/R5/R8: hot scopes, syncs, uploads (helper-owned block) --
    # Hot scopes: where a host sync or a per-step upload costs every step (families R4, R5; kernlint's
    # KL401, KL501, KL502). Set-up code (model loading, weight init, warm-up before the first step) runs
    # outside them. Ranges: torch.profiler's ProfilerStep#N (one training or serving step), vLLM's
    # execute_model / sample_tokens, SGLang's forward_batch(_generation) / forward_decode / forward_extend /
    # forward_idle, HF / TensorRT-LLM decode and generation steps (decode_step, generation_step, generate_step),
    # and sampler ranges (sample, sampler, sampling, sample_tokens), any case, as whole words. Not _dummy_run,
    # profile_run, capture_model, load_model, warmup.
    "hot-scope-range": r"^ProfilerStep#\d+$|(?i:(?<![a-z0-9])(?:execute_model|forward_batch(?:_generation)?"
                       r"|forward_(?:decode|extend|idle)|(?:decode|generation|generate|train|training)_?step"
                       r"|sampl(?:e|er|ing)(?:_tokens?)?)(?![a-z0-9_]))",
    # Python frames (`path/file.py(123): function`) of hot functions: every forward (nn.Module forwards and
    # autograd Functions), samplers (sample, _sample, sampler, forward_sample...), vLLM's execute_model and
    # sample_tokens, SGLang's forward_batch_generation / forward_decode / forward_extend, HF's _sample /
    # _beam_search / greedy and decode / generation steps. Not load_weights, _dummy_run, capture_model,
    # warmup, __init__.
    "hot-scope-frame": r"\.py\(\d+\): (?:_?forward(?:_(?:decode|extend|idle|batch(?:_generation)?|sample))?"
                       r"|_?sample(?:r|_tokens)?|execute_model|_?decode_step|_?generation_step|_?generate_step"
                       r"|_beam_search|_greedy_search|_assisted_decoding|train_step|training_step)$",
    # The frames among those that run a whole step, not one layer: serving and decode steps and samplers. A
    # trace with neither these nor a step range shows no step (rules then check its whole profiled window).
    "step-frame": r"\.py\(\d+\): (?:_?forward_(?:decode|extend|idle|batch(?:_generation)?|sample)"
                  r"|_?sample(?:r|_tokens)?|execute_model|_?decode_step|_?generation_step|_?generate_step"
                  r"|_beam_search|_greedy_search|_assisted_decoding|train_step|training_step)$",
    # nn.Module frames, by the name torch.profiler prints (`Sampler_0`, `LlamaDecoderLayer_3`, without the
    # `nn.Module: ` prefix): a module frame is its forward, and every forward is hot.
    "hot-scope-module": r"^[A-Za-z_][A-Za-z0-9_]*_\d+$",
    # CUDA-graph capture: regions whose launches are recorded into a graph (family R8, KL491), where any host
    # sync makes capture fail. Frames: torch.cuda.make_graphed_callables, vLLM's capture_model /
    # _capture_cudagraphs / CUDAGraphWrapper capture, SGLang's CudaGraphRunner.capture / capture_one_batch_size,
    # TensorRT-LLM's and TransformerEngine's graph capture helpers. Not replay, not _dummy_run (warm-up runs
    # eager).
    "graph-capture-frame": r"\.py\(\d+\): (?:make_graphed_callables|_make_graphed_callables|capture_model"
                           r"|_capture_cudagraphs?|capture_one_batch_size|_capture_graph|capture_graph"
                           r"|capture_cuda_graph|cuda_graph_capture)$"
                           r"|cuda_graph_runner\.py\(\d+\): capture$",
    # record_function / NVTX ranges around capture: names with cuda_graph / cudagraph / graph together with
    # capture (`cuda_graph_capture`, `capture_cudagraph`, `CUDAGraph capture`), any case.
    "graph-capture-range": r"(?i)(?:cuda_?graphs?|graph)[ _]?capture|capture[ _]?(?:cuda_?)?graphs?",
    # Set-up code, left out when a trace names no hot scope and a rule checks its whole profiled window:
    # model loading and weight init, warm-up and profiling runs, compilation, CUDA-graph capture. Ranges
    # (any case, whole words): load_model, load_weights, dummy weight init, warmup / warm_up, profile_run,
    # dummy_run, capture_model, compile, setup, init / initialize, and benchmark harnesses' own ranges (PARAM's
    # `[param|...]`: its set-up, warm-up and timed runs, bracketed by the harness's synchronizes). Frames: the
    # same functions, and __init__; not a bare `setup` (pytest runs every test inside `runner.py: setup`
    # when it records in a fixture).
    "setup-scope-range": r"^\[param\||(?i:(?<![a-z0-9])_?(?:load_(?:model|weights?|checkpoint|state_dict)"
                         r"|warm_?up(?:_model)?"
                         r"|profile_run|dummy_(?:run|weights?_init|init)|capture_model|compile(?:_model)?|set_?up"
                         r"|init(?:iali[sz]e)?(?:_(?:model|weights?|dummy_weights?))?)(?![a-z0-9]))",
    "setup-scope-frame": r"\.py\(\d+\): (?:__init__|_?load_(?:model|weights?|checkpoint|state_dict)"
                         r"|_?warm_?up(?:_model)?|profile_run|_dummy_run|dummy_run|capture_model|_capture_cudagraphs?"
                         r"|make_graphed_callables|initialize_dummy_weights|init_weights|_init_weights"
                         r"|reset_parameters)$",
    # torch's compiler and CUDA-graph machinery (issue 36): what one of these frames issues itself, with no
    # frame of the program's own code and no nn.Module between it and the event, is set-up for every rule:
    # inductor's cudagraph trees (torch/_inductor/cudagraph_trees.py: the synchronizes of their warm-up and
    # recording, the copies of a replay's inputs into the graph's static buffers), torch.cuda.graph and
    # make_graphed_callables (torch/cuda/graphs.py: the synchronize on entry to a capture, their own
    # warm-up synchronizes), Dynamo's frame evaluation, guards, cache look-ups and compilation
    # (torch/_dynamo/). The program's work under them (the model run while a graph is recorded, the compiled
    # graph's kernels, a user's callable in make_graphed_callables) is below a user frame or module and stays
    # the program's (kernlint.trace.scopes.ScopeIndex.in_machinery).
    "compiler-machinery-frame": r"(?:^|/)torch/(?:_inductor/cudagraph_trees|cuda/graphs|_dynamo/[\w/]+)\.py\(\d+\): ",
    # -- end R4/R5/R8 --
    # -- zoo families R1/R2/R3: fills, copies, casts (helper-owned block) --
    # Ops that fill a buffer with one value (dead-fill, KL101): aten::fill_ and aten::zero_ (what zeros,
    # full, new_ones, zeros_like, ones_like... run). Not masked_fill_ / index_fill_ (partial writes).
    "dead-fill-fill-op": r"^aten::(?:fill_|zero_)$",
    # Factory ops that allocate and then fill (a fill below one of them is the user's choice, not some other
    # op's implementation): zeros, ones, full and their _like / new_ forms, scalar_tensor.
    "dead-fill-factory-op": r"^aten::(?:zeros|ones|full|zeros_like|ones_like|full_like|new_zeros|new_ones"
                            r"|new_full|scalar_tensor|fill_|zero_)$",
    # In-place ops that write every element of `self` without reading it: a buffer they take as `self` is
    # overwritten whole (copy_ writes all of dst, broadcasting src). Not add_/mul_ (read), index_*_ /
    # masked_*_ / scatter_ (partial). Not fill_ / zero_: two fills in a row are, in real traces, two small
    # buffers of one shape (CUDA-graph capture fills its RNG seed and offset scalars back to back), and a
    # trace cannot tell them apart.
    "full-overwrite-op": r"^aten::(?:copy_|uniform_|normal_|random_|bernoulli_|exponential_"
                         r"|geometric_|log_normal_|cauchy_)$",
    # Ops that materialize a copy a consumer might have read in place (redundant-materialization, KL201):
    # repetition (repeat, tile: a tensor N times larger) and contiguous copies.
    "materializing-op": r"^aten::(?:repeat|tile|contiguous)$",
    # Casting ops whose output is a new tensor of the target dtype (widening-cast, cast-round-trip).
    "cast-op": r"^aten::_to_copy$",
    # -- end R1/R2/R3 --
    # -- zoo families R6/R7: recompute, launch budgets (helper-owned block) --
    # Ops whose output depends only on their arguments (sizes, constants), never on a tensor: the sources of
    # loop-invariant work (RoPE's `arange` positions and frequency exponents, masks from `ones` / `full`,
    # `eye`, index grids). Not `empty` (no work), not the `*_like` forms (they read an input's shape and are
    # R1's fills), not random factories (`rand`, `randn`: a new value each call is the point).
    "invariant-source-op": r"^aten::(?:arange|linspace|logspace|ones|zeros|full|eye|scalar_tensor"
                           r"|tril_indices|triu_indices)$",
    # Pure functions that carry an invariant value forward unchanged in kind: arithmetic, transcendental,
    # products, joins, views, casts and copies, triangular masks. A run of these after an
    # `invariant-source-op` is what RoPE's cos/sin tables, ALiBi slopes and causal masks are built from. Not
    # reductions, not GEMMs other than einsum/outer (RoPE's frequency table), not random ops, not syncs, and
    # not ops that bring another tensor's values into a buffer (`copy_`, `masked_fill`, `where`, `lift_fresh`):
    # those usually write activations or per-step data into it.
    "invariant-math-op": r"^aten::(?:pow|float_power|outer|ger|mul|div|add|sub|rsub|reciprocal|neg|exp|exp2"
                         r"|log|log2|sqrt|rsqrt|sin|cos|tan|sinh|cosh|tanh|sigmoid|polar|cat|stack|repeat"
                         r"|repeat_interleave|expand|unsqueeze|view|reshape|flatten|transpose|permute|slice"
                         r"|select|to|_to_copy|clone|contiguous|type_as|triu|tril|clamp|floor|ceil|round"
                         r"|einsum|view_as_complex|view_as_real|complex|_reshape_alias|t|mul_|div_|add_|sub_"
                         r"|neg_|pow_)$",
    # -- end R6/R7 --
    # -- R9: unfused or layout-bound compute (KL901-KL903) --
    # The softmax of eager attention (Hugging Face's eager_attention_forward, `F.softmax(scores, -1)`):
    # aten::softmax and its kernel op _softmax; not log_softmax (a classifier's loss).
    "softmax-op": r"^aten::(?:_?softmax|_safe_softmax)$",
    # The matmuls of eager attention around its softmax: `q @ k.transpose(-2, -1)` and `probs @ v`.
    "attention-matmul-op": r"^aten::(?:matmul|bmm|baddbmm)$",
    # Fused attention, what eager attention should be: torch's SDPA and its flash / memory-efficient / cuDNN
    # kernels' ops, FlashAttention's flash_attn ops, vLLM's unified attention.
    "fused-attention-op": r"^aten::(?:scaled_dot_product_attention|_scaled_dot_product_(?:flash|efficient|cudnn)"
                          r"_attention\w*|_flash_attention_forward|_efficient_attention_forward)$"
                          r"|^flash_attn(?:::|_)|^vllm::unified_attention",
    # nn.Modules of RMSNorm and LayerNorm, by class name (as printed, `Qwen2RMSNorm_0`): Hugging Face's
    # LlamaRMSNorm, Qwen2RMSNorm, T5LayerNorm, torch's LayerNorm and RMSNorm, vLLM's RMSNorm. Not BatchNorm,
    # GroupNorm.
    "norm-module": r"(?:RMS|Rms|Layer)Norm",
    # Python functions that compute an RMS or layer norm (`rms_norm`, `_norm`, `layer_norm_fn`,
    # `_rocm_aiter_rms_norm_impl`); not a caller named after them (`rmsnorm_benchmark`), not batch_norm.
    "norm-frame": r"\.py\(\d+\): (?:(?:\w*_)?(?:rms_norm|layer_norm)(?:_fn|_forward|_impl)?|_norm)$",
    # Kernels that only convert a tensor's layout around a convolution: cuDNN's nchwToNhwcKernel and
    # nhwcToNchwKernel (`void cudnn::ops::nchwToNhwcKernel<...>`, older cuDNN without the namespace), MIOpen's
    # batched_transpose_* kernels.
    "layout-transform-kernel": r"nchwToNhwc|nhwcToNchw|batched_transpose",
    # The ops layout transforms surround (KL903's subject): a convolution, forward or backward, by any backend.
    "convolution-op": r"^aten::(?:_?convolution(?:_backward)?|conv[123]d|(?:cudnn|miopen|mkldnn)_convolution\w*)$",
    # -- end R9 --
    # -- torch.compile's generated code (issue 36) --
    # The op torch.compile wraps around one call of a compiled graph: what runs inside it was launched by the
    # compiler's generated code, in the graph's order, with no module or frame of the layer around it.
    "compiled-graph-call-op": r"^## Call CompiledFxGraph\b|^Torch-Compiled Region\b",
    # The op inductor records for each Triton kernel it launches (named after the kernel: pointwise `poi`,
    # persistent reduction `per`, reduction `red`, `fused` with the ops it fused), with the kernel's tensor
    # and size arguments.
    "inductor-kernel-op": r"^triton_(?:poi|per|red)_fused_",
    # -- end torch.compile --
    # One step of a profiled loop (torch.profiler's `prof.step()`, and kernlint's repeated runs): a baseline
    # takes each as one run of the program.
    "profiler-step-range": r"^ProfilerStep#\d+$",
    "profiler-container-range": r"^ProfilerStep#\d+$|^PyTorch Profiler \(\d+\)$|^## Call CompiledFxGraph\b"
                                r"|^Torch-Compiled Region\b|^CompiledFunction(?:Backward)?$"
                                r"|^TorchDynamo Cache Lookup$|^DistributedDataParallel\.forward$",
}


_COMPILER_MACHINERY = _Lazy("_COMPILER_MACHINERY", NAMED_PATTERNS["compiler-machinery-frame"])


# Names whose number counts the recording, not the code: torch.profiler's step counter (`ProfilerStep#12`,
# the 12th `prof.step()`: another number in the next cycle of a scheduled profiler, or after a longer
# warm-up) and its span (`PyTorch Profiler (0)`). A finding's fingerprint (kernlint.rules.fingerprint)
# writes the replacement instead, so that two recordings of the same code give the same fingerprints.
# (pattern, replacement), each searched anywhere in a name.
RECORDING_COUNTERS: tuple[tuple[str, str], ...] = (
    (r"(?<![A-Za-z0-9_])ProfilerStep#\d+", "ProfilerStep#N"),
    (r"(?<![A-Za-z0-9_])PyTorch Profiler \(\d+\)", "PyTorch Profiler (N)"),
)


# The Python names an op is called by where they differ from its own name without the namespace (`aten::new_ones`
# is `x.new_ones(...)` or `torch.new_ones(...)`: no entry needed). A finding's source line is refined to the one
# statement of its function that calls one of these names (kernlint.rules.statements): an alias should name only
# calls that issue the op (one that is too wide mostly leaves the `def` line, two statements matching).
PYTHON_CALL_NAMES: dict[str, tuple[str, ...]] = {
    "aten::to": ("to", "cuda", "cpu", "float", "half", "bfloat16", "double", "int", "long", "type"),
    "aten::_to_copy": ("to", "cuda", "cpu", "float", "half", "bfloat16", "double", "int", "long", "type"),
    "aten::_local_scalar_dense": ("item", "tolist"),
    "aten::is_nonzero": ("bool",),   # `if t:` calls nothing by name: the def line stays
    "aten::lift_fresh": ("tensor", "as_tensor"),
    "aten::_unique2": ("unique",),
    "aten::mm": ("mm", "matmul"),
    "aten::bmm": ("bmm", "matmul"),
    "aten::empty_strided": ("empty_strided", "empty_like", "new_empty_strided"),
    "aten::zero_": ("zero_", "zeros_"),
    "aten::fill_": ("fill_", "ones_", "constant_"),
}


def python_call_names(op: str | None) -> tuple[str, ...]:
    """The Python names that call the op (`aten::new_ones` -> `new_ones`; aliases from PYTHON_CALL_NAMES); none
    for a name without a namespace (a range, a module) or that is not an identifier."""
    if not op or "::" not in op:
        return ()
    if op in PYTHON_CALL_NAMES:
        return PYTHON_CALL_NAMES[op]
    base = op.rpartition("::")[2].partition(".")[0]   # an overload (`add.Tensor`) is not part of the name
    return (base,) if base.isidentifier() else ()


def named_pattern(name: str) -> str:
    """The regex of a named pattern; KeyError naming the known ones for an unknown name."""
    try:
        return NAMED_PATTERNS[name]
    except KeyError:
        raise KeyError(f"no named pattern {name!r} (known: {', '.join(sorted(NAMED_PATTERNS))})") from None


def pattern_label(pattern: str) -> str:
    """How to show a rule's pattern: `@name` when it is a names-table entry, else `/regex/`."""
    for name, value in NAMED_PATTERNS.items():
        if value == pattern:
            return f"@{name}"
    return f"/{pattern}/"


# -- Nsight Systems exports (kernlint.trace.sources.nsys): what its names are in kineto's words -------------------
# CUPTI's callback names carry the API version nsys appends (`cudaLaunchKernel_v7000`,
# `cudaStreamGetCaptureInfo_v2_v11030`); kineto writes the call's own name (`cudaStreamGetCaptureInfo_v2` keeps
# its one-digit `_v2`).
NSYS_API_VERSION = _Lazy("NSYS_API_VERSION", r"_v\d{4,}$")
# Driver-API calls (`cuLaunchKernelEx`, `cuKernelGetAttribute`): kineto's cuda_driver category.
DRIVER_API_CALL = _Lazy("DRIVER_API_CALL", r"^cu[A-Z]")
# The NVTX ranges of torch.autograd.profiler.emit_nvtx (and `nsys --pytorch=autograd-nvtx`): one per
# RecordFunction, its name followed by `, seq = N`, `, op_id = N`, `, sizes = [...]`, `, input_op_ids = [...]`.
NVTX_RECORD_FUNCTION = _Lazy("NVTX_RECORD_FUNCTION",
                             r"^(?P<name>.+?)(?:, seq = -?\d+)?, op_id = \d+(?:, sizes = .*?)?"
                             r"(?:, input_op_ids = .*)?$")
# ... of which an op (kineto's cpu_op: `aten::copy_`, `c10d::alltoall_base_`, an autograd Function such as
# `FlashAttnFunc`) is a plain, possibly namespaced identifier; any other name (`FSDP::pre_forward (blocks.2)`,
# `ProfilerStep#3`) is a record_function range (kineto's user_annotation).
NVTX_OP_NAME = _Lazy("NVTX_OP_NAME", r"^[A-Za-z_][\w.]*(?:::[A-Za-z_][\w.]*)*$")
# CUPTI's copy and memory kinds (CUpti_ActivityMemcpyKind, CUpti_ActivityMemoryKind) as kineto names them in
# `Memcpy HtoD (Pageable -> Device)` and `Memset (Device)`.
NSYS_COPY_KINDS: dict[int, str] = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
                                   8: "DtoD", 9: "HtoH", 10: "PtoP"}
NSYS_MEMORY_KINDS: dict[int, str] = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
                                     5: "Device Static", 6: "Managed Static"}


def nsys_runtime_name(name: str) -> tuple[str, str]:
    """(kineto's name, kineto's category) of an nsys runtime-table call."""
    name = NSYS_API_VERSION.sub("", name)
    return name, "cuda_driver" if DRIVER_API_CALL.match(name) else "cuda_runtime"


def nvtx_range(text: str) -> tuple[str, str]:
    """(name, kineto's category) of an NVTX push/pop or start/end range: an emit_nvtx op range is the op
    (`cpu_op`), any other range a user annotation."""
    m = NVTX_RECORD_FUNCTION.match(text)
    if m is None:
        return text, "user_annotation"
    name = m.group("name")
    return name, "cpu_op" if NVTX_OP_NAME.match(name) else "user_annotation"


def nsys_memcpy_name(copy_kind, src_kind, dst_kind) -> str:
    kind = NSYS_COPY_KINDS.get(copy_kind) if isinstance(copy_kind, int) else None
    if kind is None:
        return "Memcpy"
    src = NSYS_MEMORY_KINDS.get(src_kind, "Unknown") if isinstance(src_kind, int) else "Unknown"
    dst = NSYS_MEMORY_KINDS.get(dst_kind, "Unknown") if isinstance(dst_kind, int) else "Unknown"
    return f"Memcpy {kind} ({src} -> {dst})"


def nsys_memset_name(mem_kind) -> str:
    return f"Memset ({NSYS_MEMORY_KINDS.get(mem_kind, 'Unknown') if isinstance(mem_kind, int) else 'Unknown'})"
