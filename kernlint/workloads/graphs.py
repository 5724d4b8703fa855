"""The CUDA-graph decoder workload: FP8 linears replayed from a graph, the way vLLM and SGLang run decode.

A 4-layer decoder (each layer an RMSNorm and an MLP of two Fp8BlockLinear around SiLU-and-mul, with a
residual add; M = 16 tokens, hidden 1024) is captured into a CUDA graph inside the profiled step and
replayed twice, so the trace holds the capture (the launches with their ops, modules and Python lines) and
the replays (one graph launch each). kernlint.trace.graphs attributes every replayed kernel to its captured
launch; KL001 then judges each linear in each replay. CUDA graphs need a GPU: on the CPU the workload is
not run, and the audit says so.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.profiler import record_function

from kernlint.reference import Fp8BlockLinear
from kernlint.workloads.base import Step, Workload

DECODER_LAYERS = 4
DECODER_HIDDEN = 1024
DECODER_TOKENS = 16
REPLAYS = 2


class _RMSNorm(nn.Module):
    def __init__(self, hidden: int, device: str):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden, device=device, dtype=torch.bfloat16))

    def forward(self, x):
        # One fused kernel (KL902 unfused-norm): not the float32 chain of pow, mean, rsqrt, mul and casts.
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), self.weight, 1e-6)


class _DecoderLayer(nn.Module):
    def __init__(self, linear_cls: type[Fp8BlockLinear], device: str, generator: torch.Generator):
        super().__init__()
        h = DECODER_HIDDEN
        self.norm = _RMSNorm(h, device)
        self.gate_up = linear_cls.from_float(torch.randn(2 * h, h, device=device, generator=generator) / h ** 0.5)
        self.down = linear_cls.from_float(torch.randn(h, h, device=device, generator=generator) / h ** 0.5)

    def forward(self, x):
        gate, up = self.gate_up(self.norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class _Decoder(nn.Module):
    def __init__(self, linear_cls: type[Fp8BlockLinear], device: str):
        super().__init__()
        generator = torch.Generator(device=device).manual_seed(0)
        self.layers = nn.ModuleList(_DecoderLayer(linear_cls, device, generator) for _ in range(DECODER_LAYERS))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def decoder_graph_workload(name: str, linear_cls: type[Fp8BlockLinear], *, expect: dict[str, str], summary: str,
                           regressed: bool = False) -> Workload:
    def build(device: str) -> Step:
        model = _Decoder(linear_cls, device)
        static_in = torch.randn(DECODER_TOKENS, DECODER_HIDDEN, device=device, dtype=torch.bfloat16)
        pool = torch.cuda.graph_pool_handle()
        with torch.no_grad():
            model(static_in)   # Triton compilation and launch plans, before any capture
        torch.cuda.synchronize()

        @torch.no_grad()
        def step() -> None:
            graph = torch.cuda.CUDAGraph()
            # A range the names table knows as graph capture: set-up for the hot-scope rules; torch.cuda.graph's
            # own synchronize on entry is torch's, outside capture (KL491 leaves it out).
            with record_function("cuda_graph_capture"), torch.cuda.graph(graph, pool=pool):
                model(static_in)
            with record_function("decode_graph_replays"):
                for _ in range(REPLAYS):
                    graph.replay()

        return step

    return Workload(name=name, summary=summary, build=build, expect=expect, regressed=regressed,
                    devices=("cuda",), not_run_reason="CUDA graphs need a GPU")


def decoder_compiled_workload(name: str, linear_cls: type[Fp8BlockLinear], *, mode: str, expect: dict[str, str],
                              summary: str, regressed: bool = False) -> Workload:
    """The decoder under `torch.compile`, as vLLM runs it: the linears' kernels are custom ops
    (`torch.ops.kernlint.fp8_blockscale_gemm` takes the placeholder input scale as an argument, so the compiler
    keeps whatever the placeholder costs), the norm, activation and residual adds inductor's Triton kernels.
    One compiled call per step. In `mode="reduce-overhead"` (inductor's CUDA-graph trees) the profiler's warm-up
    step is the trees' warm-up run, the first profiled step records the graph (the capture) and replays it, and
    later steps replay it."""

    def build(device: str) -> Step:
        model = _Decoder(linear_cls, device)
        compiled = torch.compile(model, mode=mode, fullgraph=True, dynamic=False)
        static_in = torch.randn(DECODER_TOKENS, DECODER_HIDDEN, device=device, dtype=torch.bfloat16)
        with torch.no_grad():
            # Triton compilation and the GEMMs' launch plans (their split-K counters persist) eagerly, first:
            # made during the CUDA-graph trees' warm-up they would live in the trees' private pool.
            model(static_in)
        torch.cuda.synchronize()

        @torch.no_grad()
        def step() -> None:
            with record_function("decode_step_compiled"):
                torch.compiler.cudagraph_mark_step_begin()
                compiled(static_in)

        return step

    return Workload(name=name, summary=summary, build=build, expect=expect, regressed=regressed,
                    devices=("cuda",), not_run_reason="the compiled decoder runs on a GPU (Triton kernels)")
