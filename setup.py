"""The optional C extension (kernlint.trace._kineto_chunk); everything else is in pyproject.toml.

The extension is optional: where no C compiler works, pip installs kernlint without it and kernlint decodes
traces with its Python path (kernlint.trace.native_chunk degrades to None).
"""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kernlint.trace._kineto_chunk",
            sources=["kernlint/trace/_kineto_chunk.c"],
            optional=True,   # a failed compile is a warning, not a failed install
        ),
    ],
)
