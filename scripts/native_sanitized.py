"""The native reader's tests under AddressSanitizer and UndefinedBehaviorSanitizer (`make test-native-asan`).

Builds kernlint/trace/_kineto_chunk.c with KERNLINT_SANITIZE (setup.py: -fsanitize=..., -O1 -g, frame
pointers, UBSan's findings fatal) into a temporary folder, never over the checkout's own build, then runs the
native tests (pytest arguments: NATIVE_TESTS unless given) with the sanitizer's runtime preloaded (LD_PRELOAD:
Python itself is not instrumented, so the runtime must come first) and this file as a pytest plugin that puts
the instrumented module in place of the built one. Leak detection is off: CPython keeps what it allocates
until exit, by design. A finding aborts the test process with the sanitizer's report: exit status not 0.

    python scripts/native_sanitized.py                       # address,undefined; the native tests
    python scripts/native_sanitized.py --quick               # their C-heavy part (CI)
    KERNLINT_SANITIZE=undefined python scripts/native_sanitized.py tests/test_native_chunk.py -k random
    KERNLINT_FUZZ_EXAMPLES=5000 python scripts/native_sanitized.py   # more random chunks
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NATIVE_TESTS = ["tests/test_native_chunk.py", "tests/test_event_stream.py", "tests/test_nest_walk.py",
                "tests/test_native_tables.py"]
# --quick (CI, about 20 s on 2 cores): the tests whose time goes to the C code (targeted and random chunks,
# damaged buffers, the tables, random walks, streams cut at every block size); not the recorded traces, whose
# time under the sanitizers is the Python path's and numpy's (the whole set: 2-3 minutes).
QUICK = [*NATIVE_TESTS, "-k", "(test_native_chunk or test_nest_walk or test_native_tables) and not recorded"
         " or block_sizes or larger_than_any or larger_than_the_limit or shapes and False"]
MODULE_VAR = "KERNLINT_SANITIZED_MODULE"   # the instrumented module's file, for the plugin below
RUNTIMES = {"address": "libasan.so", "undefined": "libubsan.so", "thread": "libtsan.so"}


def _compiler() -> str:
    """The C compiler the build uses (CC, else Python's own)."""
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")[0]


def _runtime(sanitizers: list[str]) -> str:
    """The sanitizer runtime to preload: ASan's where it is among them (it carries UBSan's checks' reports
    too), else the first one's. Exits where the compiler has none."""
    name = RUNTIMES["address"] if "address" in sanitizers else RUNTIMES.get(sanitizers[0], "")
    found = subprocess.run([_compiler(), f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
    if not name or not os.path.isabs(found) or not os.path.exists(found):
        sys.exit(f"native_sanitized: {_compiler()} has no {name or sanitizers[0]} runtime: install its sanitizer "
                 "libraries (Debian: libasan8 libubsan1, which gcc pulls in) or set CC to a compiler that has them")
    return os.path.realpath(found)


def _build(sanitize: str, where: Path) -> Path:
    env = {**os.environ, "KERNLINT_SANITIZE": sanitize}
    args = [sys.executable, "setup.py", "build_ext", "--force", "--build-lib", str(where / "lib"),
            "--build-temp", str(where / "temp")]
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
    built = sorted((where / "lib" / "kernlint" / "trace").glob("_kineto_chunk*.so"))
    if done.returncode != 0 or not built:   # an optional extension fails quietly: say why here
        sys.exit(f"native_sanitized: the instrumented build failed\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return built[0]


def main(argv: list[str]) -> int:
    sanitize = os.environ.get("KERNLINT_SANITIZE", "").strip() or "address,undefined"
    sanitizers = [s for s in sanitize.split(",") if s]
    runtime = _runtime(sanitizers)
    where = Path(tempfile.mkdtemp(prefix="kernlint-sanitized-"))
    try:
        started = time.monotonic()
        module = _build(sanitize, where)
        print(f"native_sanitized: built {module.name} with -fsanitize={sanitize} in "
              f"{time.monotonic() - started:.1f} s; preloading {runtime}", flush=True)
        env = {**os.environ, MODULE_VAR: str(module), "LD_PRELOAD": runtime,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                           os.environ.get("PYTHONPATH")])),
               # leaks: CPython's by design; the first error ends the process (exit status 86 / 87). The
               # reports go to files as well: pytest captures the test's stderr, which the abort would lose.
               "ASAN_OPTIONS": f"detect_leaks=0:halt_on_error=1:exitcode=86:log_path={where / 'report'}",
               "UBSAN_OPTIONS": f"print_stacktrace=1:halt_on_error=1:exitcode=87:log_path={where / 'report'}"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        tests = QUICK if argv == ["--quick"] else argv or NATIVE_TESTS
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "native_sanitized",
                "-n", "0", *tests]
        code = subprocess.run(args, cwd=REPO, env=env).returncode
        for report in sorted(where.glob("report*")):
            print(f"native_sanitized: {report.name}\n{report.read_text(errors='replace')}", file=sys.stderr)
            code = code or 1
        if code in (86, 87):
            print(f"native_sanitized: {'AddressSanitizer' if code == 86 else 'UBSan'} stopped the tests "
                  "(its report is above)", file=sys.stderr)
        return code
    finally:
        shutil.rmtree(where, ignore_errors=True)


# -- the pytest plugin (-p native_sanitized): the instrumented module in place of the built one ---------------

def pytest_configure(config) -> None:
    path = os.environ.get(MODULE_VAR)
    if not path:
        return
    import importlib.util

    import kernlint.trace
    from kernlint.trace import native_chunk

    name = "kernlint.trace._kineto_chunk"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    kernlint.trace._kineto_chunk = module
    native_chunk._module, native_chunk._tried = module, True
    assert native_chunk.native_module().__file__ == path


def pytest_report_header(config) -> str | None:
    path = os.environ.get(MODULE_VAR)
    return f"native reader under sanitizers: {path}" if path else None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
