"""What the import-hygiene tests (test_startup_imports, test_check_without_pandas) share: the environment of a
fresh interpreter that imports this checkout, and the smallest trace every rule runs on."""
from __future__ import annotations

import os
from pathlib import Path

# The checkout these tests belong to, first on the path of the interpreters they start.
CHECKOUT_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                             *filter(None, [os.environ.get("PYTHONPATH")])])}

# Three events: an op, its launch and its kernel. Nothing fails; every rule runs on it.
TINY_TRACE = {"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5,
     "args": {"External id": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 2,
     "args": {"correlation": 7, "External id": 1}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 4, "dur": 3,
     "args": {"correlation": 7, "External id": 1, "device": 0, "stream": 7}},
]}
