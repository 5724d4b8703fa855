"""The devices a workload runs on: one type instead of "cuda"/"cpu" strings compared across the layers.

A StrEnum, so a Device is its own name wherever text is wanted (file names, JSON, messages, argv of rank
processes) and parsing is the one place that knows the spellings. Ground floor: no torch here; whether a GPU
is present is the capture side's question.
"""
from __future__ import annotations

import enum

from kernlint.errors import ConfigError


class Device(enum.StrEnum):
    CPU = "cpu"
    CUDA = "cuda"

    @property
    def is_gpu(self) -> bool:
        return self is Device.CUDA

    @property
    def collective_backend(self) -> str:
        """The torch.distributed backend of ranks on this device."""
        return "nccl" if self.is_gpu else "gloo"

    @classmethod
    def parse(cls, text: str, *, option: str = "--device") -> Device:
        """A device name; anything else is a usage error naming the option."""
        try:
            return cls(text)
        except ValueError:
            raise ConfigError(None, f"{option} must be auto, cuda or cpu, not {text!r}") from None
