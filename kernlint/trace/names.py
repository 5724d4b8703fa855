"""Kernel and op names: normalization to short readable names, and classification into categories.

Device-side categories (kernels, memcpy, memset) and host-side categories (runtime calls, aten ops) come
from ordered tables of regular expressions; the first match wins. The tables are data so that a new
kernel family is one line, and tests/test_names.py runs them on real names recorded on the H200.
"""
from __future__ import annotations

import re
from functools import lru_cache

# Categories a device event can have.
DEVICE_CATEGORIES = (
    "fill", "copy", "cast", "elementwise", "reduce", "gemm", "quant", "rng",
    "memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memcpy_other", "memset", "triton", "comm", "other",
)
# Categories a host-side event (runtime/driver call, aten op) can have.
HOST_CATEGORIES = (
    "sync", "launch", "memcpy_call", "alloc_call", "runtime_other",
    "fill", "copy", "cast", "elementwise", "reduce", "gemm", "quant", "rng", "sync_op", "comm",
    "alloc", "view", "other",
)

# Ordered: the first pattern that matches the full kernel name decides. Names here are real ones seen
# in torch 2.11 / H200 traces (see fixtures/traces/gpu) and TensorRT-LLM's, vLLM's and cuBLAS's kernels.
KERNEL_CATEGORY_TABLE: tuple[tuple[str, str], ...] = (
    (r"^Memcpy HtoD", "memcpy_htod"),
    (r"^Memcpy DtoH", "memcpy_dtoh"),
    (r"^Memcpy DtoD", "memcpy_dtod"),
    (r"^Memcpy", "memcpy_other"),
    (r"^Memset", "memset"),
    (r"FillFunctor|fill_kernel|\bzero_kernel", "fill"),
    (r"nccl|all_?reduce|all_?gather|reduce_?scatter|cross_device|one_shot_|two_shot_", "comm"),
    (r"scale_1x128|per_token_group_quant|block_?quant|quant_?kernel|fp8_quant|_quant_|quantize", "quant"),
    (r"float8_copy|to_fp8|fp8_convert|dequant", "cast"),
    (r"direct_copy_kernel|copy_kernel|CopyFunctor|copy_device_to_device|cat_batched|CatArrayBatched"
     r"|index_copy|unrolled_elementwise_kernel.*copy", "copy"),
    (r"nvjet|gemm|gemv|cutlass|xmma|sm\d+_.*mma|cublas|cublasLt|matmul|_mm_kernel|wgmma|splitKreduce", "gemm"),
    (r"distribution_elementwise|uniform|normal_|philox|curand|randperm|bernoulli|random_", "rng"),
    (r"reduce_kernel|Reduce|reduction|softmax|layer_norm|rms_?norm|norm_kernel|argmax|topk|cumsum|scan",
     "reduce"),
    (r"elementwise_kernel|Functor|pointwise|_elementwise|silu|gelu|act_and_mul", "elementwise"),
)

# Host-side runtime and driver calls.
RUNTIME_CATEGORY_TABLE: tuple[tuple[str, str], ...] = (
    (r"Synchronize$|^cudaStreamWaitEvent$|^cuStreamSynchronize|^cuCtxSynchronize", "sync"),
    (r"^cudaMemcpy$|^cuMemcpyDtoH|^cuMemcpyHtoD|^cudaMemcpy2D$|^cudaMemcpyFromSymbol$", "sync"),
    (r"LaunchKernel|^cudaLaunchCooperativeKernel|^cudaGraphLaunch|^cuGraphLaunch|^cudaLaunch", "launch"),
    (r"Memcpy|Memset", "memcpy_call"),
    (r"Malloc|Free|MemPool|cuMemCreate|cuMemMap|cuMemAddressReserve", "alloc_call"),
    (r".", "runtime_other"),
)

# aten / user ops, by name without the namespace. Ops in "alloc" and "view" do no device work.
OP_CATEGORY_TABLE: tuple[tuple[str, str], ...] = (
    (r"^(fill_|zero_|ones|zeros|full|new_ones|new_zeros|new_full|ones_like|zeros_like|full_like"
     r"|masked_fill_?|index_fill_?)$", "fill"),
    (r"^(_to_copy|_to_dtype|to_dtype|type_as)$", "cast"),
    (r"^(copy_|clone|contiguous|repeat|repeat_interleave|cat|stack|index_copy_?|index_put_?|_index_put_impl_"
     r"|scatter_?|gather|index_select|flip|roll|tile|_copy_from|_copy_from_and_resize)$", "copy"),
    (r"^(empty|empty_strided|empty_like|new_empty|new_empty_strided|resize_|resize_as_|set_|record_stream"
     r"|_empty_affine_quantized|empty_permuted)$", "alloc"),
    (r"^(view|view_as|reshape|_reshape_alias|as_strided|as_strided_|t|transpose|permute|unsqueeze|squeeze"
     r"|expand|expand_as|select|slice|narrow|detach|detach_|alias|unflatten|flatten|split|split_with_sizes"
     r"|chunk|unbind|lift_fresh|_unsafe_view|numpy_T|mT|movedim|unfold|resolve_conj|resolve_neg|to|size"
     r"|stride|dim|is_contiguous|_nested_tensor_from_mask_left_aligned|item_size|requires_grad_|result_type"
     r"|_has_compatible_shallow_copy_type|diagonal|real|imag|view_as_real|view_as_complex|lift|_unsafe_index)$",
     "view"),
    (r"^(uniform_|normal_|rand|randn|randint|random_|bernoulli_?|multinomial|randperm|exponential_"
     r"|randn_like|rand_like)$", "rng"),
    (r"^(mm|matmul|addmm|bmm|baddbmm|linear|_scaled_mm|scaled_mm|_scaled_grouped_mm|einsum|mv|dot|addmv"
     r"|_int_mm|conv\w*|cudnn_\w+)$", "gemm"),
    (r"^(_local_scalar_dense|item|nonzero|is_nonzero|equal|nonzero_static|tolist|_assert_async|unique\w*"
     r"|masked_select|allclose)$", "sync_op"),
    (r"^(sum|mean|amax|amin|max|min|norm|linalg_vector_norm|std|var|prod|softmax|_softmax|log_softmax"
     r"|_log_softmax|argmax|argmin|topk|sort|cumsum|cumprod|logsumexp|any|all|layer_norm|native_layer_norm"
     r"|rms_norm|_fused_rms_norm|group_norm|batch_norm|native_batch_norm|aminmax|_aminmax)$", "reduce"),
    (r"^(all_reduce|allreduce_|all_gather\w*|reduce_scatter\w*|broadcast_?|_allgather_base_|barrier)$", "comm"),
    (r"quant|scale_1x128", "quant"),
)

_MEMCPY_SHORT = re.compile(r"^(Memcpy|Memset) (\w+)")
_FUNCTOR = re.compile(r"(\w*Functor\w*)(<[^<>]*(?:<[^<>]*>[^<>]*)*>)?")
_NAMESPACE_QUALIFIER = re.compile(r"(?:\b[A-Za-z_]\w*|\(anonymous namespace\))::")
# The host function a templated TensorIterator kernel was instantiated from (direct_copy_kernel_cuda, ...).
_HOST_FUNCTION = re.compile(r"(\w+)(?:<[^<>()]*>)?\(at::TensorIteratorBase")


def _compile(table: tuple[tuple[str, str], ...]) -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(pattern), category) for pattern, category in table)


_KERNEL_TABLE = _compile(KERNEL_CATEGORY_TABLE)
_RUNTIME_TABLE = _compile(RUNTIME_CATEGORY_TABLE)
_OP_TABLE = _compile(OP_CATEGORY_TABLE)


def _first_match(table, name: str, default: str) -> str:
    for pattern, category in table:
        if pattern.search(name):
            return category
    return default


@lru_cache(maxsize=65536)
def classify_kernel(name: str) -> str:
    """Category of a device event (kernel, memcpy or memset) from its full name."""
    return _first_match(_KERNEL_TABLE, name, "other")


@lru_cache(maxsize=4096)
def classify_runtime(name: str) -> str:
    """Category of a CUDA runtime or driver call."""
    return _first_match(_RUNTIME_TABLE, name, "runtime_other")


@lru_cache(maxsize=16384)
def classify_op(name: str) -> str:
    """Category of an op (aten::fill_ -> fill). The namespace is ignored."""
    base = name.rsplit("::", 1)[-1]
    return _first_match(_OP_TABLE, base, "elementwise" if name.startswith("aten::") else "other")


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


_FRAME = re.compile(r"^(.*?)\((\d+)\): (.*)$")

# Python frames from these places are library plumbing, not the code a user wrote. A scope built from
# Python frames skips them.
LIBRARY_FRAME = re.compile(
    r"(^|/)(torch|triton|contextlib|functools|threading|runpy|importlib|typing|abc|_pytest|pluggy|click)/"
    r"|^<built-in|^<frozen|^<string>|(^|/)site-packages/(torch|triton)/|^\s*$"
    r"|^(contextlib|functools|threading|runpy|abc)\.py\("
)


def is_library_frame(frame_name: str) -> bool:
    return bool(LIBRARY_FRAME.search(frame_name))
