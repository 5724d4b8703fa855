"""Shared test set-up: GPU-marked tests run only where CUDA exists (the H200 via the device tool)."""
from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU; CI has none (run on the H200 with the device tool)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
