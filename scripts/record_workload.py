"""Record one workload's trace in this process and print its path: what each fresh process of the timing
gate's A/A study does (scripts/gpu_timing_gate.sh), without the check `kernlint run` adds.

    python3 scripts/record_workload.py TARGET OUT_DIR STEPS [DEVICE]
TARGET: a built-in workload name, module:callable or path/to/file.py:callable.
"""
from __future__ import annotations

import sys

from kernlint.capture.runner import profile_workload
from kernlint.workloads import known_workloads, resolve_device, resolve_target


def main(argv: list[str]) -> int:
    target, out, steps = argv[0], argv[1], int(argv[2])
    device = resolve_device(argv[3] if len(argv) > 3 else "auto")
    workload = resolve_target(target, known_workloads(include_regressed=False))
    result = profile_workload(workload.build, device, out, workload.name, label=target, steps=steps,
                              extra={"target": target})
    print(result.trace)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
