"""Named workloads: what `kernlint run` and `kernlint audit` profile, on which device, with which scopes.

A workload builds, for a device, one *step*: a zero-argument callable that does the work once. Steps are
scoped with `record_function` names so that every finding names the layer it came from. The regressed
variants (regressed/workloads.py of a source checkout's fixtures/ or of kernlint-fixtures, a plugin of the
WORKLOADS registry imported by its path) are built by the same factories.
"""
from __future__ import annotations

from kernlint.checkout import CHECKOUT_FIXTURES
from kernlint.workloads.base import (
                                     ANY_VERDICT,
                                     WORKLOADS,
                                     Step,
                                     Workload,
                                     known_workloads,
                                     regressed_workloads,
                                     resolve_device,
                                     resolve_target,
)
from kernlint.workloads.fp8 import BUILTIN_WORKLOADS, DEEPSEEK_V3_LINEAR_SHAPES, dummy_init_workload, linear_workload
from kernlint.workloads.graphs import decoder_compiled_workload, decoder_graph_workload
from kernlint.workloads.tp import tp_mlp_workload

__all__ = ["ANY_VERDICT", "BUILTIN_WORKLOADS", "CHECKOUT_FIXTURES", "DEEPSEEK_V3_LINEAR_SHAPES", "Step", "WORKLOADS",
           "Workload", "decoder_compiled_workload", "decoder_graph_workload", "dummy_init_workload", "known_workloads",
           "linear_workload", "regressed_workloads", "resolve_device", "resolve_target", "tp_mlp_workload"]
