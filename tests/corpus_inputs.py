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


BUILDERS = {name: fn for name, fn in globals().items() if callable(fn) and not name.startswith("_")
            and fn.__module__ == __name__}
