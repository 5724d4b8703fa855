"""The optional C extension (kernlint.trace._kineto_chunk); everything else is in pyproject.toml.

The extension is optional: where no C compiler works, pip installs kernlint without it and kernlint decodes
traces with its Python path (kernlint.trace.native_chunk degrades to None).

It uses only the limited C API of Python 3.11 (Py_LIMITED_API), so a wheel built with it is one abi3 wheel
(cp311-abi3) for every CPython from 3.11 on; not for a free-threaded build, which has no limited API: there
it is built for that interpreter alone.

KERNLINT_SANITIZE=address,undefined (any -fsanitize= list) builds it instrumented, with -O1 -g and frame
pointers, UBSan's findings fatal: `make test-native-asan` (scripts/native_sanitized.py) builds it that way
into a temporary folder and runs the native tests with the sanitizer's runtime preloaded.
"""
import os
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ABI3 = not sysconfig.get_config_var("Py_GIL_DISABLED")
LIMITED_API = "0x030B0000"   # Python 3.11, the oldest pyproject.toml supports
SANITIZE = os.environ.get("KERNLINT_SANITIZE", "").strip()


def _sanitizer_flags() -> tuple[list[str], list[str]]:
    """(compile, link) flags for KERNLINT_SANITIZE (none where it is unset)."""
    if not SANITIZE:
        return [], []
    flags = [f"-fsanitize={SANITIZE}", "-fno-omit-frame-pointer", "-g"]
    if "undefined" in SANITIZE.split(","):
        flags.append("-fno-sanitize-recover=undefined")   # a finding fails the test that met it
    return [*flags, "-O1"], flags   # -O1 after Python's own -O3 (the last one counts)


class BuildExt(build_ext):
    """build_ext that, building in place, removes the extension's other builds beside the new one: Python
    prefers `_kineto_chunk.cpython-3XX-*.so` to `_kineto_chunk.abi3.so`, so a per-version build left from
    before would shadow it."""

    def copy_extensions_to_source(self):
        super().copy_extensions_to_source()
        for ext in self.extensions:
            built = Path(self.get_ext_fullpath(ext.name))   # in place: beside the package's sources
            if not built.exists():   # an optional extension that failed to build: nothing to shadow
                continue
            stem = built.name.split(".")[0]
            for other in built.parent.glob(f"{stem}.*"):
                if other != built and other.suffix in (".so", ".pyd") and other.is_file():
                    other.unlink()


compile_flags, link_flags = _sanitizer_flags()
setup(
    ext_modules=[
        Extension(
            "kernlint.trace._kineto_chunk",
            sources=["kernlint/trace/_kineto_chunk.c"],
            optional=True,   # a failed compile is a warning, not a failed install
            define_macros=[("Py_LIMITED_API", LIMITED_API)] if ABI3 else [],
            py_limited_api=ABI3,
            extra_compile_args=compile_flags,
            extra_link_args=link_flags,
        ),
    ],
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp311"}} if ABI3 else {},
)
