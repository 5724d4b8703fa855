"""Run by tests/test_distributed.py on 2 gloo ranks (or under torchrun): the tensor-parallel MLP, all-reduced,
must equal the unsharded MLP computed on one process."""
import os
import sys

import torch
import torch.distributed as dist

from kernlint.workloads import BUILTIN_WORKLOADS
from kernlint.workloads.tp import build_tp_mlp

# Started by tests/test_distributed.py as two plain processes (RANK, WORLD_SIZE and a file store's URI in
# KERNLINT_TEST_STORE: no launcher process importing torch a third time); under torchrun, its env:// store.
store = os.environ.get("KERNLINT_TEST_STORE")
if store:
    dist.init_process_group("gloo", init_method=store, rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]))
else:
    dist.init_process_group("gloo")
out = BUILTIN_WORKLOADS["fp8-tp-mlp"].build("cpu")().float()
full, x = build_tp_mlp("cpu", 0, 1)
with torch.no_grad():
    ref = full(x).float()
err = ((out - ref).norm() / ref.norm()).item()
dist.destroy_process_group()
print(f"rank-relative-error {err:.3e}")
sys.exit(0 if err < 2e-2 else 1)
