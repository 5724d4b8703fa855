"""The Workload type, device choice, and resolving `kernlint run TARGET`."""
from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from kernlint.checkout import GET_FIXTURES, fixtures_folder, import_path
from kernlint.device import Device
from kernlint.errors import ConfigError
from kernlint.registry import Registry

Step = Callable[[], object]


# An expectation that asserts nothing: a verdict whose severity follows a cost measured while other workloads
# share the device (the audit runs the ranks of distributed workloads beside the others), so either is right.
ANY_VERDICT = "any"


@dataclass(frozen=True)
class Workload:
    """A named piece of work to profile. `expect` maps rule ids to the verdict the workload must get."""

    name: str
    summary: str
    build: Callable[[str], Step]
    expect: Mapping[str, str] = field(default_factory=dict)
    regressed: bool = False
    devices: tuple[str, ...] = ("cpu", "cuda")
    distributed: bool = False      # needs torch.distributed: run with --nproc N
    # Verdicts that differ when a distributed workload runs on one rank (what only rank 1 does is absent);
    # ANY_VERDICT where the verdict rests on a cost the audit cannot measure steadily there.
    expect_one_rank: Mapping[str, str] = field(default_factory=dict)
    # Why it does not run on the devices it leaves out (the audit lists it as not run, with this).
    not_run_reason: str = "needs a CUDA GPU"
    # How a fresh process finds it (the audit profiles each workload in a process of its own): module:callable
    # or path/file.py:callable. None: by its registered name.
    target: str | None = None
    # `kernlint audit` runs every registered workload with this set (another package's too): False keeps one
    # out (a workload only for `kernlint run`).
    audited: bool = True

    @property
    def process_target(self) -> str:
        return self.target or self.name


def resolve_device(device: str) -> Device:
    """auto -> cuda where torch sees a GPU, else cpu. Asking for cuda without one is a usage error."""
    if device == "auto":
        return Device.CUDA if torch.cuda.is_available() else Device.CPU
    chosen = Device.parse(device)
    if chosen.is_gpu and not torch.cuda.is_available():
        raise ConfigError(None, "--device cuda: torch sees no CUDA GPU here (use --device cpu or auto)")
    return chosen


def _load_module(spec: str):
    if spec.endswith(".py") or "/" in spec:
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(path, "no such Python file")
        try:
            module = import_path(path, f"kernlint_user_{path.stem}")
        except SystemExit as exc:  # sys.exit() at import: an error, never a silent exit 0
            raise ConfigError(path, f"cannot import: the module called sys.exit({exc.code!r})") from None
        except Exception as exc:  # the user's module failed to import: say which and why, in one line
            raise ConfigError(path, f"cannot import: {type(exc).__name__}: {exc}") from None
        return module
    try:
        return importlib.import_module(spec)
    except ImportError as exc:
        raise ConfigError(None, f"cannot import module {spec!r}: {exc}") from None
    except SystemExit as exc:
        raise ConfigError(None, f"cannot import module {spec!r}: it called sys.exit({exc.code!r})") from None
    except Exception as exc:
        raise ConfigError(None, f"cannot import module {spec!r}: {type(exc).__name__}: {exc}") from None




# The built-in workloads: kernlint's own plugin of the registry, loaded as an entry point's module is (it
# registers its workloads on import).
DEFAULT_PLUGINS: tuple[str, ...] = ("kernlint.workloads.fp8",)

# Every workload `run` and `audit` know by name: the default plugins, then those other packages name in the
# entry-point group `kernlint.workloads` (a Workload, or a module that registers its own), and the regressed
# variants once loaded (regressed_workloads).
WORKLOADS: Registry[Workload] = Registry("workload", "kernlint.workloads", default_plugins=DEFAULT_PLUGINS,
                                         summary=lambda w: w.summary)

# The regressed variants (`audit --include-regressed`, `kernlint run fp8-block-linear-new-ones`): a plugin of
# the workloads registry in the fixtures folder (a source checkout's fixtures/, or the installed kernlint-fixtures
# package: kernlint.checkout.fixtures_folder), a Python file imported by its path that registers its workloads
# (regressed=True) on import.
REGRESSED_PLUGIN = Path("regressed") / "workloads.py"


def regressed_workloads(fixtures: Path | None = None) -> dict[str, Workload]:
    """The regressed variants: the workloads that `fixtures`' (default: fixtures_folder(), the checkout's or
    kernlint-fixtures') regressed/workloads.py registers in WORKLOADS, loaded once."""
    folder = Path(fixtures) if fixtures else fixtures_folder()
    if folder is None:
        raise ConfigError(None, f"the regressed workloads come with kernlint's fixtures: {GET_FIXTURES}")
    path = (folder / REGRESSED_PLUGIN).resolve()
    if not path.is_file():
        raise ConfigError(folder, f"no {REGRESSED_PLUGIN.as_posix()} here: the regressed workloads need a source "
                                  "checkout's fixtures/ or kernlint-fixtures (or --fixtures DIR)")
    names = WORKLOADS.load_plugin(str(path), origin=f"workload plugin 'regressed' ({path})",
                                  load=lambda: import_path(path, "kernlint_fixtures_regressed_workloads"))
    return {name: WORKLOADS.get(name) for name in names}


def known_workloads(include_regressed: bool = True) -> dict[str, Workload]:
    """Registered workloads, plus the regressed ones where the fixtures (a checkout's, kernlint-fixtures) are."""
    folder = fixtures_folder() if include_regressed else None
    if folder is not None and (folder / REGRESSED_PLUGIN).is_file():
        regressed_workloads(folder)
    return {name: w for name, w in WORKLOADS.items() if include_regressed or not w.regressed}


def resolve_target(target: str, workloads: Mapping[str, Workload]) -> Workload:
    """A built-in workload name, `package.module:callable`, or `path/to/file.py:callable`.

    The callable takes the device (`"cpu"`/`"cuda"`) and returns the step to profile, or takes no
    argument and is the step itself.
    """
    if target in workloads:
        return workloads[target]
    if ":" not in target:
        raise ConfigError(None, f"unknown workload {target!r}: use one of {', '.join(sorted(workloads))}, "
                                "or module:callable, or path/to/file.py:callable")
    module_spec, _, attr = target.rpartition(":")
    module = _load_module(module_spec)
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(None, f"{module_spec} has no callable {attr!r}")
    takes_device = any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                       for p in inspect.signature(fn).parameters.values())
    build = fn if takes_device else (lambda device: fn)
    return Workload(name=attr, summary=f"{target}", build=build)
