"""Record the fixtures of fixtures/traces/cpu-runs: two gloo ranks on the CPU, several profiling cycles per
rank in one folder, so that tests can check that run grouping (kernlint.trace.runs) tells the cycles apart.

    python scripts/record_cpu_runs.py [OUT]        # default OUT: fixtures/traces/cpu-runs

writes
- OUT/repeat2/: one torchrun launch of 2 ranks profiled with `schedule(wait=0, warmup=1, active=1, repeat=2)`
  and `tensorboard_trace_handler`: two cycles per rank, four traces in one folder;
- OUT/two-invocations/: two torchrun launches of 2 ranks into the same folder (one cycle each), as
  `kernlint run` did before every invocation got a folder of its own: four traces in one folder.

Every step all-reduces a tiny tensor (it keeps the ranks in step, as a real run's collectives do); rank 1
also calls `x.sum().item()` every step, a rank-1-only host sync that cross-rank rules should see. Tiny
tensors, no shapes, stacks or memory: each trace is a few KB gzipped. Needs no network and no GPU.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def worker(out: Path, repeat: int, steps: int) -> None:
    """One rank (started by torchrun): a few steps under the profiler, traces into `out`."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    x = torch.randn(8, 8)
    w = torch.randn(8, 8)
    sched = schedule(wait=0, warmup=1, active=1, repeat=repeat)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched,
                 on_trace_ready=tensorboard_trace_handler(str(out), use_gzip=True)) as prof:
        for _ in range(steps):
            y = torch.relu(x @ w)
            dist.all_reduce(y)
            if rank == 1:
                y.sum().item()  # the rank-1-only extra op
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def launch(out: Path, repeat: int) -> None:
    """One torchrun launch of two ranks writing into `out`."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    steps = 2 * repeat  # (warmup + active) per cycle
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc-per-node=2",
           str(Path(__file__).resolve()), "--worker", "--out", str(out), "--repeat", str(repeat),
           "--steps", str(steps)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"torchrun failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def record(out: Path) -> dict[str, list[Path]]:
    """Record both layouts under `out` (replacing what is there); return the traces of each."""
    written = {}
    for name, launches, repeat in (("repeat2", 1, 2), ("two-invocations", 2, 1)):
        folder = out / name
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for _ in range(launches):
            launch(folder, repeat)
        written[name] = sorted(folder.glob("*.pt.trace.json.gz"))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=REPO / "fixtures" / "traces" / "cpu-runs")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=2, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=4, help=argparse.SUPPRESS)
    parser.add_argument("--out", dest="worker_out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker_out, args.repeat, args.steps)
        return 0
    for name, traces in record(args.out).items():
        print(f"{name}: {len(traces)} traces, {sum(t.stat().st_size for t in traces)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
