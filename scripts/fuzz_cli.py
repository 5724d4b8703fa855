"""Fuzz the CLI with the mutations of the reliability probes: every example is a fresh `kernlint` process (forked
from a server that imported kernlint: tests/fresh_cli.py) on an input made from the regressed H200 trace
(fixtures/traces/gpu/placeholder_new_ones: a fill before scale_1x128_kernel).

Counted per mutation: exit codes, unhandled (exit 3 or any code outside 0/1/2/4, a traceback, more than one line
on stderr, past the time limit) and regressed-passed (exit 0 on an input that still holds the regressed layer
and is no other valid trace). Example i draws from random.Random(seed, i): a failing example is rebuilt with
`--only i --keep DIR`.

    python scripts/fuzz_cli.py --examples 20000 --jobs 14 [--start 0] [--seed 0] [--timeout 60]
"""
from __future__ import annotations

import argparse
import collections
import copy
import gzip
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from fresh_cli import run_fresh  # noqa: E402

GPU = REPO / "fixtures" / "traces" / "gpu"
REGRESSED = json.loads(gzip.decompress((GPU / "placeholder_new_ones.pt.trace.json.gz").read_bytes()))
CLEAN = json.loads(gzip.decompress((GPU / "placeholder_new_empty.pt.trace.json.gz").read_bytes()))
FRAME = "regressed/fp8_linear_new_ones.py(17)"
ESSENTIAL = ("kernel", "cuda_runtime", "cuda_driver", "cpu_op", "python_function")
STREAMED = 5 << 20   # past the 4 MB a trace is read whole below


class Example:
    """One input: the files written under `folder`, the arguments that check it, and what it must not do."""

    def __init__(self, mutation: str, args: list[str], must_not_pass: bool, expect: set[int] | None = None):
        self.mutation, self.args, self.must_not_pass, self.expect = mutation, args, must_not_pass, expect


def _write(folder: Path, text: str | bytes, name: str, rng: random.Random, may_gzip: bool = True) -> Path:
    data = text.encode() if isinstance(text, str) else text
    if may_gzip and rng.random() < 0.3:
        data, name = gzip.compress(data, compresslevel=1), name + ".gz"
    path = folder / name
    path.write_bytes(data)
    return path


def _escaped_key(rng: random.Random) -> str:
    out = []
    for c in "traceEvents":
        code = f"{ord(c):04x}"
        out.append(("\\u" + (code.upper() if rng.random() < 0.5 else code)) if rng.random() < 0.4 else c)
    key = "".join(out)
    return key if key != "traceEvents" else "trace\\u0045vents"


def _pad(rng: random.Random) -> int:
    return STREAMED + rng.randrange(1 << 20) if rng.random() < 0.15 else rng.randrange(300_000)


def escaped_key(folder: Path, rng: random.Random) -> Example:
    regressed = json.dumps(REGRESSED["traceEvents"])
    other = rng.choice([json.dumps(CLEAN["traceEvents"]), "[]"])
    first, second = (regressed, other) if rng.random() < 0.5 else (other, regressed)
    note = ', "note": "traceEvents"' if rng.random() < 0.5 else ""
    text = (f'{{"traceEvents": {first}, "otherData": {{"pad": "{"p" * _pad(rng)}"{note}}}, '
            f'"{_escaped_key(rng)}": {second}}}')
    path = _write(folder, text, "t.pt.trace.json", rng)
    return Example("escaped-key", ["check", str(path)], True, {2})


def long_first_key(folder: Path, rng: random.Random) -> Example:
    other = {f"k{i}": "v" * rng.randrange(1, 200) for i in range(rng.randrange(1, 4000))}
    text = f'{{"otherData": {json.dumps(other)}, "traceEvents": {json.dumps(REGRESSED["traceEvents"])}}}'
    _write(folder, text, "regressed.pt.trace.json", rng)
    _write(folder, json.dumps(CLEAN), "clean.pt.trace.json", rng)
    return Example("long-first-key", ["check", str(folder)], True, {1})


def escaped_quotes(folder: Path, rng: random.Random) -> Example:
    quotes = '\\"' * (_pad(rng) // 2)
    closed = rng.random() < 0.7
    tail = f'", "traceEvents": {json.dumps(REGRESSED["traceEvents"])}}}' if closed else ""
    text = f'{{"otherData": "{quotes}{tail}'
    path = _write(folder, text, "t.pt.trace.json", rng)
    if rng.random() < 0.5:
        return Example("escaped-quotes", ["check", str(path)], True, {1} if closed else {2})
    _write(folder, json.dumps(CLEAN), "clean.pt.trace.json", rng)
    # an open string in a folder: cut short before any trace key, it cannot be told from another JSON file
    return Example("escaped-quotes", ["check", str(folder)], closed, {1} if closed else {0})


def damage(folder: Path, rng: random.Random) -> Example:
    data = copy.deepcopy(REGRESSED)
    events = data["traceEvents"]
    relevant = [i for i, e in enumerate(events) if e.get("cat") in ESSENTIAL]
    how = rng.choice(["field", "remove", "same-correlation", "duplicate", "equal-ts"])
    if how == "duplicate":
        events.append(copy.deepcopy(events[rng.choice(relevant)]))
    elif how == "equal-ts":
        value = rng.choice([0, 1_000_000, 1.5])
        for e in events:
            if "ts" in e:
                e["ts"] = value
    elif how == "same-correlation":
        for e in events:
            if isinstance(e.get("args"), dict) and "correlation" in e["args"]:
                e["args"]["correlation"] = 7
    elif how == "remove":
        del events[rng.choice([i for i in relevant if events[i]["cat"] in ("kernel", "cuda_runtime", "cuda_driver")])]
    else:
        i = rng.choice(relevant)
        key = rng.choice(["ts", "dur", "pid", "tid", "correlation"])
        value = rng.choice([None, 0.5, [1], {"a": 1}, -1, "x", True])
        if key == "correlation":
            if isinstance(events[i].get("args"), dict) and "correlation" in events[i]["args"]:
                events[i]["args"]["correlation"] = value
        else:
            events[i][key] = value
    path = _write(folder, json.dumps(data), "t.pt.trace.json", rng)
    return Example("damage", ["check", str(path)], True)


def python_id(folder: Path, rng: random.Random) -> Example:
    data = copy.deepcopy(REGRESSED)
    frames = [e for e in data["traceEvents"] if e.get("cat") == "python_function" and isinstance(e.get("args"), dict)]
    for e in rng.sample(frames, min(len(frames), rng.randrange(1, 4))):
        e["args"]["Python id"] = rng.choice([[1, 2], {"id": 3}, [], {}, "7", None, 1.5])
    if frames and rng.random() < 0.5:
        orphan = copy.deepcopy(rng.choice(frames))
        orphan["args"]["Python parent id"] = 10**9
        data["traceEvents"].append(orphan)
    path = _write(folder, json.dumps(data), "t.pt.trace.json", rng)
    return Example("python-id", ["check", str(path)], True)


def outside_the_root(folder: Path, rng: random.Random) -> Example:
    outside = folder.parent / f"{folder.name}-outside" / "secret.py"
    outside.parent.mkdir()
    outside.write_text("\n" * 16 + "def _placeholder_scale(x):  # kernlint: ignore[KL001] from outside\n")
    named = str(outside) if rng.random() < 0.5 else f"../{folder.name}-outside/secret.py"
    data = copy.deepcopy(REGRESSED)
    for e in data["traceEvents"]:
        if e.get("cat") == "python_function" and e["name"].startswith(FRAME):
            e["name"] = f"{named}(17)" + e["name"][len(FRAME):]
    path = _write(folder, json.dumps(data), "t.pt.trace.json", rng)
    return Example("outside-the-root", ["check", str(path)], True, {1})


def bytes_changed(folder: Path, rng: random.Random) -> Example:
    """Truncated, bytes flipped, inserted or deleted: a valid other trace may come out (a kernel renamed), so
    only unhandled outcomes count."""
    data = bytearray(json.dumps(REGRESSED).encode())
    if rng.random() < 0.5:
        data = bytearray(gzip.compress(bytes(data), compresslevel=1))
    for _ in range(rng.randrange(1, 6)):
        if not data:
            break   # truncated to nothing: an empty file
        at = rng.randrange(len(data))
        what = rng.random()
        if what < 0.2:
            del data[at:]
        elif what < 0.5:
            data[at] = rng.randrange(256)
        elif what < 0.75:
            data[at:at] = bytes(rng.choice([b'"', b"\\", b"{", b"[", b"]", b"}", b",", b":", b"\\u00", b"\x00",
                                            b"\xff", b"NaN", b"1e999", b"-", b'"traceEvents":[']))
        else:
            del data[at:at + rng.randrange(1, 64)]
    path = _write(folder, bytes(data), "t.pt.trace.json", rng, may_gzip=False)
    return Example("bytes", ["check", str(path)], False)


def special_files(folder: Path, rng: random.Random) -> Example:
    regressed = folder / "regressed.pt.trace.json"
    regressed.write_text(json.dumps(REGRESSED))
    how = rng.choice(["fifo-capture", "dev-zero-capture", "fifo-in-folder", "fifo-source"])
    if how == "fifo-capture":
        os.mkfifo(folder / "capture.json")
        return Example("special-files", ["check", str(regressed), "--capture", str(folder / "capture.json")], True, {2})
    if how == "dev-zero-capture":
        return Example("special-files", ["check", str(regressed), "--capture", "/dev/zero"], True, {2})
    if how == "fifo-in-folder":
        os.mkfifo(folder / "pipe.json")
        return Example("special-files", ["check", str(folder)], True, {1})   # findings outrank the unread FIFO
    data = copy.deepcopy(REGRESSED)
    for e in data["traceEvents"]:
        if e.get("cat") == "python_function" and e["name"].startswith(FRAME):
            e["name"] = "fifo.py(17)" + e["name"][len(FRAME):]
    regressed.write_text(json.dumps(data))
    os.mkfifo(folder / "fifo.py")
    return Example("special-files", ["check", str(regressed)], True, {1})


MUTATIONS = [escaped_key, long_first_key, escaped_quotes, damage, python_id, outside_the_root, bytes_changed,
             special_files]


def one(i: int, seed: int, root: Path, timeout: float, keep: Path | None) -> tuple[str, int | str, str | None]:
    rng = random.Random(seed * 1_000_003 + i)
    folder = (keep or root) / f"ex{i}"
    folder.mkdir(parents=True)
    mutate = rng.choice(MUTATIONS)
    example = mutate(folder, rng)
    args = [*example.args, "--format", rng.choice(["text", "json", "sarif", "github"])]
    start = time.perf_counter()
    try:
        proc = run_fresh(args, cwd=folder, env={**os.environ, "COLUMNS": "200"}, timeout=timeout)
    except Exception as exc:   # TimeoutExpired
        return example.mutation, "timeout", f"{type(exc).__name__} after {time.perf_counter() - start:.0f} s"
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(folder.parent / f"{folder.name}-outside", ignore_errors=True)
    problem = None
    if proc.returncode not in (0, 1, 2, 4):
        problem = f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
    elif "Traceback" in proc.stdout + proc.stderr:
        problem = "a traceback"
    elif len(proc.stderr.splitlines()) > 1:
        problem = f"{len(proc.stderr.splitlines())} lines on stderr: {proc.stderr[:300]}"
    elif example.must_not_pass and proc.returncode == 0:
        problem = "regressed-passed"
    elif example.expect is not None and proc.returncode not in example.expect:
        problem = f"exit {proc.returncode}, expected {sorted(example.expect)}: {proc.stderr.strip()[-200:]}"
    return example.mutation, proc.returncode, problem


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--start", type=int, default=0, help="the first example's index (split a run in parts)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--only", type=int, help="run example ONLY alone")
    parser.add_argument("--keep", type=Path, help="write the inputs here and keep them")
    options = parser.parse_args()
    indices = [options.only] if options.only is not None else range(options.start, options.start + options.examples)
    exits: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    problems: dict[str, list[str]] = collections.defaultdict(list)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(options.jobs) as pool:
        futures = [pool.submit(one, i, options.seed, Path(tmp), options.timeout, options.keep) for i in indices]
        for i, future in zip(indices, futures):
            mutation, code, problem = future.result()
            exits[mutation][code] += 1
            if problem:
                kind = "regressed-passed" if problem == "regressed-passed" else "unhandled"
                problems[kind].append(f"example {i} ({mutation}): {problem}")
    wall = time.perf_counter() - start
    print(f"{len(indices)} examples ({indices[0]}..{indices[-1]}), seed {options.seed}, {options.jobs} jobs, "
          f"{wall:.0f} s")
    print(f"{'mutation':<18} {'examples':>8}  exit codes")
    for mutation, counts in sorted(exits.items()):
        shown = ", ".join(f"{code}: {n}" for code, n in sorted(counts.items(), key=lambda kv: str(kv[0])))
        print(f"{mutation:<18} {sum(counts.values()):>8}  {shown}")
    for kind in ("unhandled", "regressed-passed"):
        print(f"{kind}: {len(problems[kind])}")
        for line in problems[kind][:20]:
            print("  " + re.sub(r"\s+", " ", line)[:400])
    return 1 if any(problems.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
