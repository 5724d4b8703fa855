"""A tensor-parallel FP8 MLP: column-parallel gate_up, SiLU-and-mul, row-parallel down, then an all-reduce.

Run under torchrun (`kernlint run --nproc N fp8-tp-mlp`): each rank holds 1/N of gate_up's output
features and 1/N of down's input features, as vLLM's MergedColumnParallelLinear / RowParallelLinear do.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.profiler import record_function

from kernlint.device import Device
from kernlint.errors import ConfigError
from kernlint.reference import Fp8BlockLinear
from kernlint.workloads.base import Step, Workload

# DeepSeek-V3's dense MLP on the GPU; a small one with the same structure on the CPU.
GPU_SIZES = {"hidden": 7168, "intermediate": 18432, "tokens": 128}
CPU_SIZES = {"hidden": 512, "intermediate": 1024, "tokens": 16}

RankHook = Callable[[int, torch.Tensor], None]


class TensorParallelMLP(nn.Module):
    def __init__(self, gate_up: Fp8BlockLinear, down: Fp8BlockLinear, rank: int, world: int,
                 hook: RankHook | None = None):
        super().__init__()
        self.gate_up, self.down, self.rank, self.world, self.hook = gate_up, down, rank, world, hook

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.gate_up(x)                     # [M, 2 * I / world]: this rank's gate and up columns
        gate, up = h.chunk(2, dim=-1)
        out = self.down(F.silu(gate) * up)      # [M, hidden]: this rank's partial sum
        if self.hook is not None:
            self.hook(self.rank, out)
        if self.world > 1:
            dist.all_reduce(out)
        return out


def _shard(full: torch.Tensor, rank: int, world: int, dim: int) -> torch.Tensor:
    return full.chunk(world, dim=dim)[rank].contiguous()


def build_tp_mlp(device: str, rank: int, world: int, linear_cls: type[Fp8BlockLinear] = Fp8BlockLinear,
                 hook: RankHook | None = None) -> tuple[TensorParallelMLP, torch.Tensor]:
    """Rank `rank`'s shard of the MLP and the (replicated) input. Every rank draws the same full weights
    from one seed and keeps its slice, so world=1 gives the unsharded reference."""
    sizes = GPU_SIZES if Device.parse(device).is_gpu else CPU_SIZES
    hidden, inter, tokens = sizes["hidden"], sizes["intermediate"], sizes["tokens"]
    if inter % (128 * world):
        raise ConfigError(None, f"intermediate size {inter} does not split into {world} shards of whole "
                                "128-wide blocks")
    gen = torch.Generator(device=device).manual_seed(0)
    gate = torch.randn(inter, hidden, device=device, generator=gen) / hidden ** 0.5
    up = torch.randn(inter, hidden, device=device, generator=gen) / hidden ** 0.5
    down = torch.randn(hidden, inter, device=device, generator=gen) / inter ** 0.5
    x = torch.randn(tokens, hidden, device=device, generator=gen).to(torch.bfloat16)
    gate_up = torch.cat([_shard(gate, rank, world, 0), _shard(up, rank, world, 0)])
    mlp = TensorParallelMLP(linear_cls.from_float(gate_up), linear_cls.from_float(_shard(down, rank, world, 1)),
                            rank, world, hook)
    return mlp, x


def tp_mlp_workload(name: str, linear_cls: type[Fp8BlockLinear] = Fp8BlockLinear, *, expect: dict[str, str],
                    summary: str, regressed: bool = False, hook: RankHook | None = None,
                    expect_one_rank: dict[str, str] | None = None) -> Workload:
    def build(device: str) -> Step:
        if not (dist.is_available() and dist.is_initialized()):
            raise ConfigError(None, f"{name} is tensor-parallel: run it with --nproc N (N >= 1)")
        mlp, x = build_tp_mlp(device, dist.get_rank(), dist.get_world_size(), linear_cls, hook)

        @torch.no_grad()
        def step() -> torch.Tensor:
            with record_function("tp_mlp"):
                return mlp(x)

        return step

    return Workload(name=name, summary=summary, build=build, expect=expect, regressed=regressed,
                    distributed=True, expect_one_rank=expect_one_rank or {})
