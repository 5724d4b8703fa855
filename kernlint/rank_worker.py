"""The process started for each rank of `kernlint run --nproc N` (an entry point, like the CLI).

kernlint.capture.distributed starts it with torchrun's worker environment (RANK, LOCAL_RANK, WORLD_SIZE) and
`--kl-init file://...` (a FileStore); under torchrun itself, without `--kl-init`, it meets the other ranks
through torchrun's environment (env://). Every rank initialises torch.distributed (NCCL on GPUs, gloo on
the CPU), builds the workload and writes its own trace and run metadata into the run folder the launcher
made for this invocation (`--kl-run-dir`). A failure becomes one `kernlint-rank-error:` line on stderr,
which the launcher (kernlint.capture.distributed.RankLaunch) shows to the user.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

from kernlint.capture.runner import capture
from kernlint.device import Device
from kernlint.workloads import known_workloads, resolve_target


def main(argv: list[str] | None = None) -> int:
    # Started with `python -P` (kernlint.capture.child.SAFE_PATH): the working directory goes last, where a
    # workload named `mymodule:build` still imports from it, as under `python -m`.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    parser = argparse.ArgumentParser(prog="kernlint.capture.distributed")
    # Prefixed so that torchrun's own parser, which sees these too, takes none of them for its options.
    parser.add_argument("--kl-target", dest="target", required=True)
    parser.add_argument("--kl-device", dest="device", required=True, choices=["cpu", "cuda", "auto"])
    parser.add_argument("--kl-out", dest="out", required=True)
    parser.add_argument("--kl-run", dest="run", required=True)
    # The run folder the launcher made for this invocation; every rank writes into it.
    parser.add_argument("--kl-run-dir", dest="run_dir", default=None)
    parser.add_argument("--kl-warmup", dest="warmup", type=int, default=1)
    parser.add_argument("--kl-steps", dest="steps", type=int, default=1)
    # Where the ranks meet (an init_method URL, a file:// store); rank and world size then come from the
    # environment. Without it: env:// (torchrun's MASTER_ADDR / MASTER_PORT).
    parser.add_argument("--kl-init", dest="init", default=None)
    # One process, no process group: `kernlint run TARGET` (kernlint.capture.child reads what it prints).
    parser.add_argument("--kl-single", dest="single", action="store_true")
    parser.add_argument("--kl-label", dest="label", default=None)
    parser.add_argument("--kl-debug", dest="debug", action="store_true")
    # Where --kl-single writes its result, apart from the workload's own output (kernlint.capture.child).
    parser.add_argument("--kl-result", dest="result", default=None)
    # A fixture folder whose regressed/workloads.py names more workloads (`kernlint audit --fixtures DIR`).
    parser.add_argument("--kl-fixtures", dest="fixtures", default=None)
    args = parser.parse_args(argv)
    if args.single:
        return _single(args)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = Device.parse(args.device)
    if device.is_gpu:
        torch.cuda.set_device(local_rank)
    backend = device.collective_backend
    if args.init:
        dist.init_process_group(backend, init_method=args.init, rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]))
    else:
        dist.init_process_group(backend)
    try:
        workload = resolve_target(args.target, _workloads(args))
        step = workload.build(args.device)
        capture(step, args.out, args.run, device=args.device, warmup=args.warmup, steps=args.steps,
                run_dir=args.run_dir,
                extra={"workload": workload.name, "rank": dist.get_rank(), "world_size": dist.get_world_size(),
                       "backend": dist.get_backend()})
        if dist.get_world_size() > 1:  # alone, there is no one to wait for (and NCCL would start up for it)
            dist.barrier()
    except Exception as exc:  # one line the launcher can show, whatever rank failed
        # When: the launcher names the rank that failed first, not the peers that failed for losing it.
        print(f"kernlint-rank-failed-at: {time.time():.6f}", file=sys.stderr)
        print(f"kernlint-rank-error: rank {dist.get_rank()}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        dist.destroy_process_group()
    return 0


def _workloads(args) -> dict:
    """The registered workloads and the regressed ones: of the fixture folder named (a plugin of the workloads
    registry, loaded from that folder alone), else of the checkout."""
    if args.fixtures:
        from pathlib import Path

        from kernlint.workloads import regressed_workloads

        return {**known_workloads(include_regressed=False), **regressed_workloads(Path(args.fixtures))}
    return known_workloads()


def _single(args) -> int:
    """The workload alone: its trace path, the profiler's log, or its kernlint error, as JSON lines in the
    result file the parent named (kernlint.capture.child), never on stdout, which is the workload's."""
    import json
    import traceback

    from kernlint.capture.runner import profile_workload
    from kernlint.errors import ConfigError, KernlintError
    from kernlint.workloads import resolve_device

    # Opened before the workload runs and written only by kernlint: whatever the workload does to stdout
    # (an unfinished line, a closed descriptor), the result reaches the parent whole.
    result = open(args.result, "a", encoding="utf-8")   # noqa: SIM115 - kept open for the whole run

    def report(**entry) -> None:
        result.write(json.dumps(entry) + "\n")
        result.flush()

    report(ready=True)   # the workload's time (--timeout) starts here
    try:
        device = resolve_device(args.device)
        workload = resolve_target(args.target, _workloads(args))
        if workload.distributed:
            raise ConfigError(None, f"{workload.name} is a distributed workload: add --nproc N")
        captured = profile_workload(workload.build, device, args.out, args.run, label=args.label or args.target,
                                    warmup=args.warmup, steps=args.steps,
                                    extra={"workload": workload.name, "target": args.target,
                                           "regressed": workload.regressed})
    except KernlintError as exc:
        if args.debug and exc.__cause__ is not None:   # --debug: the workload's own traceback
            traceback.print_exception(exc.__cause__)
        report(error={"type": type(exc).__name__, "path": exc.path, "problem": exc.problem, "line": exc.line})
        return 1
    for line in captured.profiler_log:
        report(profiler=line)
    report(trace=str(captured.trace))
    return 0


if __name__ == "__main__":
    code = main()
    # The trace and run metadata are written and the process group is gone. Python's own teardown
    # (finalizing torch, the CUDA context) adds about 0.5 s that the launcher would wait for: skip it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
