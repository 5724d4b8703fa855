"""The profiler's arguments follow the installed torch (issue 41): torch 2.14 deprecated `with_modules` (a
FutureWarning at every profiler start: it records only TorchScript models' modules; `with_stack=True`
records nn.Module events for eager ones). kernlint asks torch whether it still takes it
(kernlint.capture.profiler.profiler_arguments) instead of comparing versions, so no profiler kernlint starts
warns about it, on the installed torch or on one that deprecates it (a stand-in that warns as 2.14 does)."""
from __future__ import annotations

import gzip
import json
import warnings

import pytest
import torch
import torch.autograd.profiler as autograd_profiler

import kernlint
from kernlint.capture import profiler as capture


def _model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    x = torch.randn(4, 8)
    return lambda: model(x)


def _about_with_modules(caught) -> list[str]:
    return [f"{w.category.__name__}: {w.message}" for w in caught if "with_modules" in str(w.message)]


@pytest.fixture
def fresh_detection():
    capture._with_modules_is_current.cache_clear()
    yield
    capture._with_modules_is_current.cache_clear()


class _DeprecatingProfile(autograd_profiler.profile):
    """torch's autograd profiler as torch 2.14 made it: `with_modules=True` warns (FutureWarning)."""

    def __init__(self, *args, with_modules=False, **kwargs):
        if with_modules:
            warnings.warn("with_modules is deprecated and will be removed in a future release. Use "
                          "with_stack=True, which records nn.Module events for eager models.", FutureWarning,
                          stacklevel=2)
        super().__init__(*args, with_modules=with_modules, **kwargs)


@pytest.fixture
def torch_that_deprecates_with_modules(monkeypatch, fresh_detection):
    # torch.profiler.profile makes its autograd profiler through this module attribute when it starts.
    monkeypatch.setattr(autograd_profiler, "profile", _DeprecatingProfile)


def _module_frames(path) -> list[str]:
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return [e["name"] for e in events if str(e.get("name", "")).startswith("nn.Module: ")]


def test_the_installed_torch_records_modules_without_a_with_modules_warning(tmp_path, fresh_detection):
    step = _model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        capture.record_trace(step, tmp_path / "t.pt.trace.json.gz", device="cpu")
        with kernlint.profiling(rules=["KL001"], device="cpu") as run:
            step()
    assert not _about_with_modules(caught), _about_with_modules(caught)
    assert run.result is not None
    assert any(name.startswith("nn.Module: Linear") for name in _module_frames(tmp_path / "t.pt.trace.json.gz"))
    # torch 2.13 (installed here) still takes it without deprecation: TorchScript models keep their modules.
    if not torch.__version__.startswith(("2.14", "2.15")):
        assert capture.profiler_arguments()["with_modules"] is True


def test_a_torch_that_deprecates_with_modules_gets_with_stack_alone_and_no_warning(
        tmp_path, torch_that_deprecates_with_modules):
    step = _model()
    with warnings.catch_warnings(record=True) as caught:   # the stand-in is wired where torch.profiler looks
        warnings.simplefilter("always")
        with torch.profiler.profile(with_modules=True):
            step()
    assert _about_with_modules(caught)
    arguments = capture.profiler_arguments()
    assert "with_modules" not in arguments and arguments["with_stack"] is True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        capture.record_trace(step, tmp_path / "t.pt.trace.json.gz", device="cpu")
        with kernlint.profiling(rules=["KL001"], device="cpu"):
            step()
    assert not _about_with_modules(caught), _about_with_modules(caught)
    # The eager model's modules are still in the trace: with_stack records them.
    assert any(name.startswith("nn.Module: Linear") for name in _module_frames(tmp_path / "t.pt.trace.json.gz"))


def test_a_torch_without_with_modules_gets_with_stack_alone(monkeypatch, fresh_detection):
    class Gone(autograd_profiler.profile):
        def __init__(self, *args, **kwargs):
            if "with_modules" in kwargs:
                raise TypeError("__init__() got an unexpected keyword argument 'with_modules'")
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(autograd_profiler, "profile", Gone)
    assert "with_modules" not in capture.profiler_arguments()
