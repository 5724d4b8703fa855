#!/usr/bin/env python3
"""Records every program in fixtures/programs (or --programs DIR, or the NAMES given) to DIR/NAME.pt.trace.json.gz.

    python scripts/record_fixtures.py --device cpu --out fixtures/traces/cpu
    python scripts/record_fixtures.py --device cuda --out fixtures/traces/gpu placeholder_new_ones
    python scripts/record_fixtures.py --device cuda --programs fixtures/zoo --out fixtures/traces/gpu-zoo

Each program's ``build(device)`` returns one step; it is warmed up twice (Triton compilation, cuBLAS
set-up) and then recorded once.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernlint.checkout import import_path

REPO_ROOT = Path(__file__).resolve().parent.parent
PROGRAMS_DIR = REPO_ROOT / "fixtures" / "programs"
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def program_names(folder: Path = PROGRAMS_DIR) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_"))


def load_program(name: str, folder: Path = PROGRAMS_DIR):
    path = folder / f"{name}.py"
    module = import_path(path, f"kernlint_fixture_program_{name}")
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--out", type=Path, required=True, help="folder for NAME.pt.trace.json.gz")
    parser.add_argument("--programs", type=Path, default=PROGRAMS_DIR, help="folder of programs (NAME.py)")
    parser.add_argument("names", nargs="*", help="programs to record (default: all)")
    args = parser.parse_args(argv)

    import torch

    from kernlint.capture.profiler import record_trace

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    known = program_names(args.programs)
    names = args.names or known
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"unknown program(s) {', '.join(unknown)}; known: {', '.join(known)}")
    for name in names:
        torch.manual_seed(0)
        step = load_program(name, args.programs).build(args.device)
        out = record_trace(step, args.out / f"{name}.pt.trace.json.gz", device=args.device, warmup=2)
        print(f"{name}: {out} ({out.stat().st_size / 1024:.1f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
