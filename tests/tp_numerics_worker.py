"""Run by tests/test_distributed.py under torchrun (gloo, 2 ranks): the tensor-parallel MLP, all-reduced,
must equal the unsharded MLP computed on one process."""
import sys

import torch
import torch.distributed as dist

from kernlint.workloads import BUILTIN_WORKLOADS
from kernlint.workloads.tp import build_tp_mlp

dist.init_process_group("gloo")
out = BUILTIN_WORKLOADS["fp8-tp-mlp"].build("cpu")().float()
full, x = build_tp_mlp("cpu", 0, 1)
with torch.no_grad():
    ref = full(x).float()
err = ((out - ref).norm() / ref.norm()).item()
dist.destroy_process_group()
print(f"rank-relative-error {err:.3e}")
sys.exit(0 if err < 2e-2 else 1)
