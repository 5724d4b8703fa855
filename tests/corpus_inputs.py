"""Builders of the bad and damaged inputs in fixtures/corpus/corpus.toml: each writes its input under a
folder and returns the command-line arguments that check it. Damaged inputs start from a real H200 trace
of a regressed layer (fixtures/traces/gpu/placeholder_new_ones: a FillFunctor fill kernel before
scale_1x128_kernel), so that "damaged, yet passed" would show.
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from rule_helpers import rule_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REGRESSED = FIXTURES / "traces" / "gpu" / "placeholder_new_ones.pt.trace.json.gz"
TP_CLEAN_CPU = FIXTURES / "traces" / "cpu-gloo" / "fp8-tp-mlp"
FILL = "FillFunctor"


def _regressed() -> dict:
    return json.loads(gzip.decompress(REGRESSED.read_bytes()))


def _write(folder: Path, data, name: str = "trace.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def _launch_of(data: dict, kernel_substring: str) -> tuple[dict, dict]:
    events = data["traceEvents"]
    kernel = next(e for e in events if e.get("cat") == "kernel" and kernel_substring in e["name"])
    corr = kernel["args"]["correlation"]
    launch = next(e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                  and (e.get("args") or {}).get("correlation") == corr)
    return kernel, launch


def _check(path) -> list[str]:
    return ["check", str(path)]


# -- 1. wrong clean verdicts ------------------------------------------------------------------------------
def dangling_correlation(folder: Path) -> list[str]:
    data = _regressed()
    kernel, _ = _launch_of(data, FILL)
    kernel["args"]["correlation"] = 999_999
    return _check(_write(folder, data))


def all_correlations_equal(folder: Path) -> list[str]:
    data = _regressed()
    for e in data["traceEvents"]:
        if isinstance(e.get("args"), dict) and "correlation" in e["args"]:
            e["args"]["correlation"] = 7
    return _check(_write(folder, data))


def launch_ts_string(folder: Path) -> list[str]:
    data = _regressed()
    _, launch = _launch_of(data, FILL)
    launch["ts"] = "soon"
    return _check(_write(folder, data))


def pid_fractional(folder: Path) -> list[str]:
    data = _regressed()
    _, launch = _launch_of(data, FILL)
    launch["pid"] = launch["pid"] + 0.5
    return _check(_write(folder, data))


def python_id_list_and_orphan_frame(folder: Path) -> list[str]:
    """Issue 38, item 8: a `Python id` written as a list (and one as an object) beside a frame whose parent id
    names no frame: it was `TypeError: unhashable type`, exit 3."""
    data = _regressed()
    frames = [e for e in data["traceEvents"] if e.get("cat") == "python_function"
              and isinstance(e.get("args"), dict) and "Python id" in e["args"]]
    frames[0]["args"].update({"Python id": [1, 2], "Python parent id": 0})
    frames[1]["args"].update({"Python id": {"id": 3}, "Python parent id": 0})
    frames[2]["args"]["Python parent id"] = 987_654_321
    return _check(_write(folder, data))


def pid_integral_float(folder: Path) -> list[str]:
    data = _regressed()
    for e in data["traceEvents"]:
        if isinstance(e.get("pid"), int):
            e["pid"] = float(e["pid"])
    return _check(_write(folder, data))


def dur_null_everywhere(folder: Path) -> list[str]:
    data = _regressed()
    for e in data["traceEvents"]:
        if e.get("ph") == "X":
            e["dur"] = None
    return _check(_write(folder, data))


def dur_negative_everywhere(folder: Path) -> list[str]:
    data = _regressed()
    for e in data["traceEvents"]:
        if e.get("ph") == "X":
            e["dur"] = -abs(e.get("dur") or 1)
    return _check(_write(folder, data))


def correlation_above_2_pow_70(folder: Path) -> list[str]:
    data = _regressed()
    for e in data["traceEvents"]:
        if isinstance(e.get("args"), dict) and isinstance(e["args"].get("correlation"), int):
            e["args"]["correlation"] += 2**70
    return _check(_write(folder, data))


def runtime_events_removed(folder: Path) -> list[str]:
    data = _regressed()
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") not in ("cuda_runtime", "cuda_driver")]
    return _check(_write(folder, data))


def kernel_event_removed(folder: Path) -> list[str]:
    data = _regressed()
    kernel, _ = _launch_of(data, FILL)
    data["traceEvents"].remove(kernel)
    return _check(_write(folder, data))


# -- 2. folder entries that cannot be read ---------------------------------------------------------------
def folder_with_dangling_symlink(folder: Path) -> list[str]:
    run = folder / "run"
    run.mkdir()
    (run / "rank0.pt.trace.json.gz").write_bytes(REGRESSED.read_bytes())
    os.symlink(folder / "gone.json", run / "rank1.json")
    return _check(run)


def folder_with_fifo(folder: Path) -> list[str]:
    run = folder / "run"
    run.mkdir()
    (run / "a.pt.trace.json.gz").write_bytes(REGRESSED.read_bytes())
    os.mkfifo(run / "b.json")
    return _check(run)


def folder_with_symlink_loop(folder: Path) -> list[str]:
    run = folder / "run"
    (run / "sub").mkdir(parents=True)
    (run / "a.pt.trace.json.gz").write_bytes(REGRESSED.read_bytes())
    os.symlink(run, run / "sub" / "loop")
    os.symlink(run / "x.json", run / "y.json")
    os.symlink(run / "y.json", run / "x.json")
    return _check(run)


# -- 3, 4. commands that did nothing and said it was fine -------------------------------------------------
def run_workload_calls_sys_exit(folder: Path) -> list[str]:
    (folder / "wl.py").write_text("import sys\n\ndef build(device):\n    def step():\n        sys.exit(0)\n"
                                  "    return step\n")
    return ["run", f"{folder / 'wl.py'}:build", "--device", "cpu", "--out", str(folder / "out")]


def replay_without_cases(folder: Path) -> list[str]:
    (folder / "fx" / "cases").mkdir(parents=True)
    return ["audit", "--replay", "--fixtures", str(folder / "fx")]


# -- 5, 6. output and scope defects -----------------------------------------------------------------------
def ts_not_a_number_json(folder: Path) -> list[str]:
    data = _regressed()
    kernel, _ = _launch_of(data, FILL)
    kernel["ts"] = "abc"
    return ["check", str(_write(folder, data)), "--format", "json"]


def tp_clean_trace_without_stacks(folder: Path) -> list[str]:
    run = folder / "run"
    run.mkdir()
    for path in sorted(TP_CLEAN_CPU.glob("*.pt.trace.json.gz")):
        data = json.loads(gzip.decompress(path.read_bytes()))
        data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") != "python_function"]
        (run / path.name).write_bytes(gzip.compress(json.dumps(data).encode()))
    return ["check", str(run), "--select", "KL001", "-v"]   # -v: the not-applicable reason is printed


# -- 7, 8. crashes ----------------------------------------------------------------------------------------
def empty_trace_events(folder: Path) -> list[str]:
    return _check(_write(folder, {"traceEvents": []}))


def metadata_only(folder: Path) -> list[str]:
    return _check(_write(folder, {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1,
                                                   "args": {"name": "python"}}], "schemaVersion": 1}))


def gzip_of_whitespace(folder: Path) -> list[str]:
    path = folder / "blank.json.gz"
    path.write_bytes(gzip.compress(b" \n\t " * 1000))
    return _check(path)


def world_size_as_list(folder: Path) -> list[str]:
    data = _regressed()
    data["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": [2, 2]}
    return _check(_write(folder, data))


def world_size_as_dict(folder: Path) -> list[str]:
    data = _regressed()
    data["distributedInfo"] = {"backend": "nccl", "rank": {"r": 0}, "world_size": {"n": 2}}
    return _check(_write(folder, data))


def deeply_nested_trace(folder: Path) -> list[str]:
    text = '{"traceEvents": [{"ph": "X", "name": "a", "args": {"x": ' + "[" * 10_000 + "]" * 10_000 + "}}]}"
    return _check(_write(folder, text))


def deeply_nested_rule(folder: Path) -> list[str]:
    rules = folder / "rules"
    rules.mkdir()
    (rules / "KL900.toml").write_text("x = " + "[" * 10_000 + "]" * 10_000 + "\n")
    return ["check", str(REGRESSED), "--rules", str(rules)]


# -- 9, 10, 11. bounded time and memory -------------------------------------------------------------------
def kernel_name_40k(folder: Path) -> list[str]:
    data = _regressed()
    kernel, _ = _launch_of(data, FILL)
    kernel["name"] = kernel["name"].replace("FillFunctor<c10::BFloat16>", "FillFunctor<" + "<" * 500
                                            + "c10::BFloat16" * 3000 + ">" * 500 + ">")
    return _check(_write(folder, data))


def _user_rule(folder: Path, rid: str, annotation_pattern: str) -> Path:
    """A rules folder holding one forbid-in-scope rule whose scope is the given annotation pattern.

    Give it a user id (ACME9xx): KL901-KL903 are shipped rules since issue 37, and reusing one is an error.
    """
    rules = folder / "rules"
    rules.mkdir()
    (rules / f"{rid}.toml").write_text(rule_text(f"""
        [scope]
        annotations = [{json.dumps(annotation_pattern)}]
        [check]
        type = "forbid-in-scope"
        kinds = ["kernel"]
        """, rid, name="user-pattern"))
    return rules


def pathological_user_regex(folder: Path) -> list[str]:
    rules = _user_rule(folder, "ACME901", "(a+)+$")
    data = _regressed()
    data["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": "a" * 32 + "b", "pid": 1, "tid": 1,
                                "ts": 0, "dur": 1})
    return ["check", str(_write(folder, data)), "--rules", str(rules), "--select", "ACME901"]


def lookbehind_user_regex(folder: Path) -> list[str]:
    rules = _user_rule(folder, "ACME902", "(?<!x)step")
    return ["check", str(REGRESSED), "--rules", str(rules)]


def many_anchors(folder: Path) -> list[str]:
    """20,000 layers, each an nn.Module with a fill before its quantization (the bench goes to 100,000)."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "execute_model", "pid": 1, "tid": 1, "ts": 0,
               "dur": 10 ** 7}]
    corr = 0
    for i in range(20_000):
        t = 5 + i * 10
        events.append({"ph": "X", "cat": "python_function", "name": f"nn.Module: Linear_{i}", "pid": 1, "tid": 1,
                       "ts": t, "dur": 9})
        for j, kernel in enumerate(("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()",
                                    "scale_1x128_kernel", "nvjet_sm90_tst_128x128_64x4_1x2_h_bz_coopA_NNT")):
            corr += 1
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": t + 1 + 2 * j, "dur": 1, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": t + 3 + 2 * j,
                           "dur": 1, "args": {"correlation": corr}})
    return ["check", str(_write(folder, {"traceEvents": events})), "--select", "KL001", "--format", "json"]


def gzip_bomb(folder: Path) -> list[str]:
    """64 MiB of zeros in 64 KiB of gzip, against a 1 MiB cap (bench/gzip_bomb.py measures 4 GiB)."""
    path = folder / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        block = b"\0" * (1 << 20)
        for _ in range(64):
            out.write(block)
    return ["check", str(path), "--max-trace-bytes", "1M"]


# -- 12-15. hygiene --------------------------------------------------------------------------------------
def escape_codes_in_names(folder: Path) -> list[str]:
    data = _regressed()
    kernel, _ = _launch_of(data, FILL)
    kernel["name"] = "\x1b]0;pwned\x07\x1b[2J\nFound 0 finding(s) in 1 trace(s)." + kernel["name"]
    return _check(_write(folder, data))


def output_into_missing_folder(folder: Path) -> list[str]:
    return ["check", str(REGRESSED), "-o", str(folder / "no" / "such" / "report.txt")]


def click_usage_error(folder: Path) -> list[str]:
    return ["check", "--no-such-option", str(REGRESSED)]


def na_inside_strings(folder: Path) -> list[str]:
    data = _regressed()
    text = json.dumps(data)
    # A bare N/A value (old kineto) next to a name that holds "N/A": the repair touches only the first.
    text = text.replace('"traceEvents": [', '"traceEvents": [{"ph": "X", "cat": "user_annotation", '
                        '"name": "step N/A 1", "pid": 1, "tid": 1, "ts": 1, "dur": N/A}, ', 1)
    return ["check", str(_write(folder, text)), "--format", "json"]


def empty_rules_folder(folder: Path) -> list[str]:
    (folder / "rules").mkdir()
    return ["check", str(REGRESSED), "--rules", str(folder / "rules")]


def unknown_rule_table(folder: Path) -> list[str]:
    rules = folder / "rules"
    rules.mkdir()
    (rules / "ACME903.toml").write_text('id = "ACME903"\nname = "x"\nseverity = "error"\nsummary = "s"\n\n[checks]\n'
                                      'type = "max-count"\n')
    return ["check", str(REGRESSED), "--rules", str(rules)]


# -- issue 22: damage that looked clean ----------------------------------------------------------------------
def every_ts_equal(folder: Path) -> list[str]:
    data = _regressed()
    for e in data["traceEvents"]:
        if "ts" in e:
            e["ts"] = 1_000_000
    return _check(_write(folder, data))


def every_kernel_twice(folder: Path) -> list[str]:
    data = _regressed()
    data["traceEvents"] += [dict(e) for e in data["traceEvents"] if e.get("cat") == "kernel"]
    return _check(_write(folder, data))


def anchor_kernel_twice(folder: Path) -> list[str]:
    data = _regressed()
    anchor = next(e for e in data["traceEvents"] if e.get("cat") == "kernel" and "scale_1x128" in e["name"])
    data["traceEvents"].append(dict(anchor))
    return _check(_write(folder, data))


def two_trace_events_keys(folder: Path) -> list[str]:
    """The regressed events under a first traceEvents key, then a second key holding no event: a reader that
    keeps the last key sees nothing to check."""
    events = json.dumps(_regressed()["traceEvents"])
    return _check(_write(folder, f'{{"traceEvents": {events}, "schemaVersion": 1, "traceEvents": []}}'))


# -- issue 38: what the readers took on trust ------------------------------------------------------------
CLEAN = FIXTURES / "traces" / "gpu" / "placeholder_new_empty.pt.trace.json.gz"
_PAD_BYTES = 5 << 20   # past the 4 MB read whole: the trace is streamed


def _events_json(path: Path) -> str:
    return json.dumps(json.loads(gzip.decompress(path.read_bytes()))["traceEvents"])


def escaped_second_events_key_streamed(folder: Path) -> list[str]:
    """Issue 38, item 1: the clean events under "traceEvents", the regressed ones under a second key written
    with an escape (`trace\\u0045vents`), 5 MB of padding between: the stream read the first list (exit 0)."""
    pad = "p" * _PAD_BYTES
    text = (f'{{"traceEvents": {_events_json(CLEAN)}, "otherData": {{"pad": "{pad}"}}, '
            f'"trace\\u0045vents": {_events_json(REGRESSED)}}}')
    return _check(_write(folder, text, "escaped-key.pt.trace.json"))


def escaped_second_events_key_read_whole(folder: Path) -> list[str]:
    """Issue 38, item 1: the regressed events first, the clean ones under an escaped second key, and the string
    "traceEvents" as a value (which sends a large trace to the whole-file path): that path kept the last list."""
    pad = "p" * _PAD_BYTES
    text = (f'{{"traceEvents": {_events_json(REGRESSED)}, "otherData": {{"pad": "{pad}", "note": "traceEvents"}}, '
            f'"trace\\u0045vents": {_events_json(CLEAN)}}}')
    return _check(_write(folder, text, "escaped-key.pt.trace.json"))


def long_first_key_in_folder(folder: Path) -> list[str]:
    """Issue 38, item 3: a regressed trace whose first key is a 70 KB otherData object, beside a clean trace:
    discovery judged the first 64 KiB only and skipped it as "not a trace"."""
    other = {f"key{i}": "v" * 60 for i in range(1100)}
    (folder / "clean.pt.trace.json.gz").write_bytes(CLEAN.read_bytes())
    text = f'{{"otherData": {json.dumps(other)}, "traceEvents": {_events_json(REGRESSED)}}}'
    _write(folder, text, "regressed.pt.trace.json")
    return _check(folder)


def _open_escaped_quotes(n_bytes: int) -> str:
    return '\\"' * (n_bytes // 2)


def open_escaped_string_streamed(folder: Path) -> list[str]:
    """Issue 38, item 6: a 6 MB string of escaped quotes before the events, still open where the stream first
    looks for the event list: the token scan was quadratic (killed at 300 s)."""
    text = (f'{{"otherData": {{"note": "{_open_escaped_quotes(6 << 20)}"}}, '
            f'"traceEvents": {_events_json(REGRESSED)}}}')
    return _check(_write(folder, text, "open-string.pt.trace.json"))


def open_escaped_string_in_folder(folder: Path) -> list[str]:
    """Issue 38, item 6: a 360 KB string of escaped quotes first in a folder's trace: the sniff took 26 s."""
    text = (f'{{"otherData": {{"note": "{_open_escaped_quotes(360 << 10)}"}}, '
            f'"traceEvents": {_events_json(REGRESSED)}}}')
    _write(folder, text, "open-string.pt.trace.json")
    return _check(folder)


_FRAME = "regressed/fp8_linear_new_ones.py(17)"   # the regressed trace's frame of the new_ones call


def _regressed_naming(folder: Path, source: str) -> Path:
    """The regressed trace with the Python frame of its fill's function renamed to `source`."""
    data = _regressed()
    for e in data["traceEvents"]:
        if e.get("cat") == "python_function" and e["name"].startswith(_FRAME):
            e["name"] = f"{source}(17)" + e["name"][len(_FRAME):]
    return _write(folder, data)


def _file_with_ignore_on_line_17(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n" * 16 + "def _placeholder_scale(x):  # kernlint: ignore[KL001] read from outside the root\n")


def inline_ignore_outside_the_root_absolute(folder: Path) -> list[str]:
    """Issue 38, item 5: a trace naming an absolute path outside the source root (the working directory):
    its `# kernlint: ignore[KL001]` was read and suppressed the finding (exit 0)."""
    outside = folder.parent / f"{folder.name}-outside" / "secret.py"
    _file_with_ignore_on_line_17(outside)
    return _check(_regressed_naming(folder, str(outside)))


def inline_ignore_outside_the_root_relative(folder: Path) -> list[str]:
    """Issue 38, item 5: the same through `../` from the working directory."""
    outside = folder.parent / f"{folder.name}-outside" / "secret.py"
    _file_with_ignore_on_line_17(outside)
    return _check(_regressed_naming(folder, f"../{folder.name}-outside/secret.py"))


def inline_ignore_inside_the_root(folder: Path) -> list[str]:
    """The counterpart: the same comment in a file under the working directory suppresses the finding."""
    _file_with_ignore_on_line_17(folder / "regressed" / "fp8_linear_new_ones.py")
    return _check(_write(folder, _regressed()))


def source_named_is_a_fifo(folder: Path) -> list[str]:
    """Issue 38, item 7: the source file a trace names is a FIFO in the working directory: the comment reader
    blocked forever on its open."""
    os.mkfifo(folder / "fifo.py")
    return _check(_regressed_naming(folder, "fifo.py"))


def source_named_is_huge_or_a_device(folder: Path) -> list[str]:
    """Issue 38, item 7: a 3 GB sparse source file (read whole: MemoryError, exit 3) and /dev/zero."""
    with open(folder / "big.py", "wb") as big:
        big.truncate(3 << 30)
    first = _regressed_naming(folder, "big.py")
    second = folder / "second"
    second.mkdir()
    return ["check", str(first), str(_regressed_naming(second, "/dev/zero"))]


def capture_is_a_fifo(folder: Path) -> list[str]:
    """Issue 38, item 7: `--capture` of a FIFO hung on its open."""
    os.mkfifo(folder / "capture.json")
    return ["check", str(REGRESSED), "--capture", str(folder / "capture.json")]


def capture_is_dev_zero(folder: Path) -> list[str]:
    """Issue 38, item 7: `--capture /dev/zero` read 4.2 GB before it was refused."""
    return ["check", str(REGRESSED), "--capture", "/dev/zero"]


def empty_capture_beside_a_clean_replay(folder: Path) -> list[str]:
    """Issue 38, item 2: a regressed eager trace holding one empty BeginCapture..EndCapture pair, beside a clean
    replay trace of the same process: auto-pairing made it the replay's capture trace, merged only its
    (empty) capture window and never checked the rest. Pairing now needs a capture that aligns."""
    replay_path = FIXTURES / "traces" / "gpu-graphs" / "graph-new-empty-replay.pt.trace.json.gz"
    (folder / "replay.pt.trace.json.gz").write_bytes(replay_path.read_bytes())
    replay = json.loads(gzip.decompress(replay_path.read_bytes()))
    pid = next(e["pid"] for e in replay["traceEvents"] if e.get("cat") == "cuda_runtime")
    data = _regressed()
    runtime = [e for e in data["traceEvents"] if e.get("cat") == "cuda_runtime"]
    old_pid, tid, t0 = runtime[0]["pid"], runtime[0]["tid"], min(e["ts"] for e in runtime)
    for e in data["traceEvents"]:
        if e.get("pid") == old_pid:
            e["pid"] = pid
    data["traceEvents"] += [
        {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid, "ts": t0 - 50 + 10 * k, "dur": 1,
         "args": {"correlation": 99_999_990 + k}}
        for k, name in enumerate(("cudaStreamBeginCapture", "cudaStreamEndCapture"))]
    _write(folder, data, "eager.pt.trace.json")
    return _check(folder)


def run_beside_a_module_named_like_the_standard_library(folder: Path) -> list[str]:
    """`kernlint run` from a folder holding its own timeit.py (and a workload module imported by name): the
    child put the working directory first on sys.path, and torch's `from timeit import ...` imported the
    user's file (exit 2, the child's traceback on the terminal)."""
    (folder / "timeit.py").write_text("raise RuntimeError('the user timeit.py was imported')\n")
    (folder / "my_workload.py").write_text("def build(device):\n    return lambda: None\n")
    return ["run", "my_workload:build", "--device", "cpu", "--out", str(folder / "out")]


def _not_utf8_name(folder: Path) -> Path:
    trace = folder / os.fsdecode(b"regressed-\xff.pt.trace.json.gz")   # bytes that are not UTF-8
    trace.write_bytes(REGRESSED.read_bytes())
    return trace


def non_utf8_file_name_sarif(folder: Path) -> list[str]:
    return ["check", str(_not_utf8_name(folder)), "--format", "sarif"]


def non_utf8_file_name_text_to_a_file(folder: Path) -> list[str]:
    return ["check", str(_not_utf8_name(folder)), "-o", str(folder / "report.txt")]


def run_a_path_that_is_not_python(folder: Path) -> list[str]:
    return ["run", "/etc/passwd:build", "--device", "cpu", "--out", str(folder / "runs")]


def utf8_bom(folder: Path) -> list[str]:
    path = folder / "bom.pt.trace.json"
    path.write_bytes(b"\xef\xbb\xbf" + gzip.decompress(REGRESSED.read_bytes()))
    return _check(path)


def utf16_text(folder: Path) -> list[str]:
    path = folder / "utf16.pt.trace.json"
    path.write_bytes(gzip.decompress(REGRESSED.read_bytes()).decode().encode("utf-16"))
    return _check(path)


def scheduler_that_refuses(folder: Path) -> list[str]:
    return ["check", str(REGRESSED), "--scheduler", "tcp://127.0.0.1:1"]   # port 1: nothing listens


def scheduler_not_an_address(folder: Path) -> list[str]:
    """Issue 38, item 12: Dask retried `not a url` for 30 s, then printed its traceback."""
    return ["check", str(REGRESSED), "--scheduler", "not a url"]


def record_from_dangling_correlation(folder: Path) -> list[str]:
    """`baseline record` from a trace whose fill kernel lost its launch: refused, nothing written."""
    check = dangling_correlation(folder)
    return ["baseline", "record", check[1], "-o", str(folder / "baseline.json")]


# -- issue 38, item 11: the history cache and the suppressions file are input ----------------------------------
def _history_of_8(folder: Path) -> Path:
    """8 baselines of one kernel, 5% slower from the 5th on (a change point at b5.json)."""
    from kernlint.baseline import write_baseline
    from kernlint.baseline.model import SCHEMA_VERSION, Baseline, Launch, ProgramProfile, ScopeProfile

    history = folder / "history"
    history.mkdir()
    for i in range(8):
        us = [(105.0 if i >= 4 else 100.0) + 0.01 * ((i * 10 + r) % 7) for r in range(10)]
        scope = ScopeProfile(launches=[Launch(pos=0, kind="kernel", name="gemm", category="gemm", us=us)])
        program = ProgramProfile(runs=10, timing_basis="device", scopes={"module Linear_0": scope}, total_us=us)
        write_baseline(history / f"b{i + 1}.json", Baseline(schema_version=SCHEMA_VERSION, kernlint_version="test",
                                                            created="2026-12-01T00:00:00Z", programs={"t": program}))
    return history


def history_cache_fifo(folder: Path) -> list[str]:
    """Issue 38, item 11: a FIFO as --cache was opened for reading and waited for a writer forever."""
    os.mkfifo(folder / "history.cache")
    return ["history", str(_history_of_8(folder)), "--cache", str(folder / "history.cache")]


def history_cache_nested_deeply(folder: Path) -> list[str]:
    """Issue 38, item 11: RecursionError, exit 3."""
    (folder / "cache.json").write_text('{"version": 2, "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return ["history", str(_history_of_8(folder)), "--cache", str(folder / "cache.json")]


def history_cache_forged(folder: Path) -> list[str]:
    """Issue 38, item 11: the real cache with a change point written in at b3.json (its digests kept) was
    reported as found."""
    from kernlint.baseline import read_baseline
    from kernlint.baseline.history import analyse

    history = _history_of_8(folder)
    files = sorted(history.glob("*.json"))
    _, cache = analyse([read_baseline(f) for f in files], [f.name for f in files])
    for entry in cache["series"].values():
        entry["changes"] = [[2, 1e-6, "t-test"], *entry["changes"]]
    (folder / "cache.json").write_text(json.dumps(cache))
    return ["history", str(history), "--cache", str(folder / "cache.json")]


def _suppressions(folder: Path, text: str) -> list[str]:
    (folder / "kernlint-suppressions.json").write_text(text)
    return _check(REGRESSED)


def suppressions_nested_deeply(folder: Path) -> list[str]:
    """Issue 38, item 11: RecursionError, exit 3."""
    return _suppressions(folder, '{"version": 2, "suppressions": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}")


def suppressions_count_of_5000_digits(folder: Path) -> list[str]:
    """Issue 38, item 11: ValueError (int of more than 4300 digits), exit 3."""
    return _suppressions(folder, '{"version": 2, "suppressions": {"k": {"rule": "KL001", "count": 1'
                                 + "0" * 5000 + "}}}")


def suppressions_of_222_mb(folder: Path) -> list[str]:
    """Issue 38, item 11: read whole (sparse here: refused by its size before a byte is read)."""
    with open(folder / "kernlint-suppressions.json", "wb") as fh:
        fh.truncate(222_000_000)
    return _check(REGRESSED)


def stdin_is_named_stdin(folder: Path) -> list[str]:
    """Issue 38: errors about `check -` named the temporary file that standard input was copied to."""
    return ["check", "-"]   # the corpus runs give an empty standard input


def run_progress_dots_without_newline(folder: Path) -> list[str]:
    """Issue 38, item 4: a workload whose output ends without a newline (a progress dot, an open tqdm bar)
    swallowed the child's `kernlint-child-trace:` line: exit 2 while the trace was on disk."""
    workload = folder / "dots.py"
    workload.write_text("import sys\n\n\ndef build(device):\n    sys.stdout.write('.')\n\n"
                        "    def step():\n        sys.stdout.write('.')\n        sys.stdout.flush()\n\n"
                        "    return step\n")
    return ["run", f"{workload}:build", "--device", "cpu", "--warmup", "1", "--out", str(folder / "runs")]


BUILDERS = {name: fn for name, fn in globals().items() if callable(fn) and not name.startswith("_")
            and fn.__module__ == __name__}
