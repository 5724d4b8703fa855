"""The built-in workloads: the FP8 block-scaled linear layer and the FP8 dummy-weight loader."""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.profiler import record_function

from kernlint.device import Device
from kernlint.reference import Fp8BlockLinear, initialize_dummy_weights
from kernlint.workloads.base import WORKLOADS, Step, Workload
from kernlint.workloads.graphs import decoder_compiled_workload, decoder_graph_workload
from kernlint.workloads.tp import tp_mlp_workload

# DeepSeek-V3 linear shapes (N, K), and the token counts M the layer runs at.
DEEPSEEK_V3_LINEAR_SHAPES: tuple[tuple[int, int], ...] = ((7168, 2048), (4096, 7168), (24576, 1536))
DEEPSEEK_V3_TOKENS: tuple[int, ...] = (16, 128, 4096)
# The CPU runs the same math in torch ops (dequantize, then matmul): one small M and 1/8 of each side of the
# weights (K kept a multiple of the 128 block) keep the audit in seconds; the launch sequence is the same.
CPU_TOKENS: tuple[int, ...] = (16,)


def linear_shapes(device: str) -> list[tuple[int, int]]:
    """(N, K) of the workloads' linears: DeepSeek-V3's on the GPU, 1/8 of each side on the CPU."""
    if Device.parse(device).is_gpu:
        return list(DEEPSEEK_V3_LINEAR_SHAPES)
    return [(n // 8, max(128, k // 8 // 128 * 128)) for n, k in DEEPSEEK_V3_LINEAR_SHAPES]


def linear_configs(device: str) -> list[tuple[int, int, int]]:
    tokens = DEEPSEEK_V3_TOKENS if Device.parse(device).is_gpu else CPU_TOKENS
    return [(m, n, k) for (n, k) in linear_shapes(device) for m in tokens]


def linear_workload(name: str, linear_cls: type[Fp8BlockLinear], *, expect: dict[str, str], summary: str,
                    regressed: bool = False) -> Workload:
    def build(device: str) -> Step:
        act_dtype = torch.bfloat16
        generator = torch.Generator(device=device).manual_seed(0)
        runs = []
        for m, n, k in linear_configs(device):
            weight = torch.randn(n, k, device=device, generator=generator) / k ** 0.5
            layer = linear_cls.from_float(weight)
            x = torch.randn(m, k, device=device, generator=generator).to(act_dtype)
            runs.append((f"fp8_linear M={m} N={n} K={k}", layer, x))

        @torch.no_grad()
        def step() -> None:
            for scope, layer, x in runs:
                with record_function(scope):
                    layer(x)

        return step

    return Workload(name=name, summary=summary, build=build, expect=expect, regressed=regressed)


class Fp8DummyModel(nn.Module):
    """A small model of FP8 block linears (FP8 weights, fp32 block scales, bf16 biases) and a norm weight."""

    def __init__(self, shapes: list[tuple[int, int]], device: str):
        super().__init__()
        self.layers = nn.ModuleList(Fp8BlockLinear(k, n, bias=True, device=device) for n, k in shapes)
        self.norm_weight = nn.Parameter(torch.empty(shapes[0][1], dtype=torch.bfloat16, device=device),
                                        requires_grad=False)


def dummy_init_workload(name: str, init: Callable[[nn.Module], None], *, expect: dict[str, str], summary: str,
                        regressed: bool = False, devices: tuple[str, ...] = ("cpu", "cuda")) -> Workload:
    def build(device: str) -> Step:
        # On the GPU: the DeepSeek-V3 linear shapes (about 70 M FP8 weights); on the CPU, 1/8 of each side.
        model = Fp8DummyModel(linear_shapes(device), device)

        def step() -> None:
            with record_function("dummy_init"):
                init(model)

        return step

    return Workload(name=name, summary=summary, build=build, expect=expect, regressed=regressed, devices=devices)


def _fused_init(model: nn.Module) -> None:
    initialize_dummy_weights(model, mode="fused")


BUILTIN_WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    linear_workload("fp8-block-linear", Fp8BlockLinear, expect={"KL001": "passed"},
                    summary="FP8 block-scaled linear (1x128 activation groups, 128x128 weight blocks) at "
                            "DeepSeek-V3 shapes; the GEMM quantizes internally, placeholder scale new_empty(1)"),
    dummy_init_workload("fp8-dummy-init", initialize_dummy_weights, expect={"KL002": "passed", "KL005": "passed"},
                        summary="dummy-weight init of a model of FP8 linears: empty_like fp16, uniform_, copy_"),
    dummy_init_workload("fp8-dummy-init-fused", _fused_init, expect={"KL002": "passed", "KL005": "passed"},
                        devices=("cuda",),
                        summary="dummy-weight init with one fused Triton kernel per FP8 tensor, zero scratch"),
    tp_mlp_workload("fp8-tp-mlp", expect={"KL001": "passed", "KL003": "passed"},
                    summary="tensor-parallel FP8 MLP (column-parallel gate_up, row-parallel down, all-reduce); "
                            "run with --nproc N"),
    decoder_graph_workload("fp8-decoder-graph", Fp8BlockLinear, expect={"KL001": "passed"},
                           summary="4-layer FP8 decoder captured into a CUDA graph and replayed (vLLM-style decode, "
                                   "M=16); replayed kernels attributed to the capture"),
    decoder_compiled_workload("fp8-decoder-compiled", Fp8BlockLinear, mode="default", expect={"KL001": "passed"},
                              summary="the 4-layer FP8 decoder under torch.compile (default mode), its linears "
                                      "custom ops that take the placeholder scale"),
    decoder_compiled_workload("fp8-decoder-compiled-graphs", Fp8BlockLinear, mode="reduce-overhead",
                              expect={"KL001": "passed"},
                              summary="the compiled FP8 decoder in reduce-overhead mode: inductor's CUDA-graph "
                                      "trees, recorded and replayed in each step"),
)}
for _workload in BUILTIN_WORKLOADS.values():
    WORKLOADS.register(_workload.name, _workload)
