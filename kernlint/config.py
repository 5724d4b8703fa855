"""Configuration files: `kernlint.toml` (keys at the top level) or `pyproject.toml` (`[tool.kernlint]`).

Found like ruff finds its own: in each folder from the working directory upward, `kernlint.toml` wins over
`pyproject.toml`, and a `pyproject.toml` without a `[tool.kernlint]` table is passed over. The keys mirror
the command-line flags (kebab-case); docs/configuration.md lists every one.

This module returns data and raises the typed errors of kernlint.errors (ConfigError, with file and line);
unknown keys are not errors but `ConfigWarning`s in the result. It prints nothing: the CLI does.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from kernlint.baseline.model import Thresholds
from kernlint.errors import ConfigError

CONFIG_FILE = "kernlint.toml"
PYPROJECT = "pyproject.toml"
PYPROJECT_TABLE = ("tool", "kernlint")
SEVERITIES = ("info", "warning", "error")

# Every top-level key: what it is (checked by _convert), and the flag it mirrors (None: a table).
KEYS: dict[str, tuple[str, str | None]] = {
    "rules": ("path-list", "--rules"),
    "no-builtin": ("bool", "--no-builtin"),
    "select": ("selector-list", "--select"),
    "extend-select": ("selector-list", "--extend-select"),
    "ignore": ("selector-list", "--ignore"),
    "fail-on": ("severity", "--fail-on"),
    "allow-incomplete": ("bool", "--allow-incomplete"),
    "max-trace-bytes": ("size", "--max-trace-bytes"),
    "format": ("format", "--format"),
    "output": ("path", "--output"),
    "exit-zero": ("bool", "--exit-zero"),
    "baseline": ("path", "--baseline"),
    "severity": ("severity-table", None),
    "thresholds": ("thresholds-table", None),
    "per-source-ignores": ("ignores-table", None),
    "source-root": ("path", "--source-root"),
    "path-map": ("path-map-table", None),
    "min-cost": ("min-cost-table", None),
    "exclude": ("glob-list", "--exclude"),
}
# The rule selection is resolved in layers (config, then command line), as ruff does: not a plain default.
SELECTION_KEYS = ("select", "extend-select", "ignore")
# Keys whose click parameter is not the key in snake_case.
_PARAM_NAMES = {"rules": "rule_paths", "format": "fmt"}


def param_name(key: str) -> str:
    """The click parameter a config key gives the default of: `fail-on` -> `fail_on`, `rules` -> `rule_paths`."""
    return _PARAM_NAMES.get(key, key.replace("-", "_"))


THRESHOLD_KEYS = tuple(f.encode_name for f in msgspec.structs.fields(Thresholds))


@dataclass(frozen=True)
class ConfigWarning:
    """Something in a config file that is ignored (an unknown key): the CLI shows it on stderr."""

    path: str
    line: int | None
    problem: str

    def one_line(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.problem}"


@dataclass(frozen=True)
class Config:
    """A loaded config file, or none (path None).

    values: the keys given, by their kebab-case name, checked and converted (paths absolute, sizes in bytes),
        [severity] and [thresholds] apart.
    severity: rule id or name (as written) -> severity, from [severity].
    thresholds: [thresholds], with the defaults for keys not given.
    """

    path: Path | None = None
    display: str | None = None            # the path as messages show it (relative to the working directory)
    table: str | None = None              # "[tool.kernlint]", or None for a kernlint.toml's top level
    values: dict[str, Any] = field(default_factory=dict)
    severity: dict[str, str] = field(default_factory=dict)
    thresholds: Thresholds = Thresholds()
    # [per-source-ignores]: a glob of a finding's source path -> rule ids, names or ALL (ruff's per-file-ignores).
    per_source_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # [path-map]: a recorded path prefix -> the working tree's ("/workspace/vllm/" = ""): traces recorded elsewhere.
    path_map: dict[str, str] = field(default_factory=dict)
    # [min-cost]: severity follows cost (kernlint.rules.negligible). "share" / "us" -> the global values, a rule
    # id or name -> its own {"share", "us"} or "none".
    min_cost: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[ConfigWarning, ...] = ()
    lines: dict[str, int] = field(default_factory=dict)   # "select", "severity.KL002", "thresholds.alpha"
    how: str = "no config file found"                     # how it was chosen, for `-v`

    def line_of(self, key: str) -> int | None:
        """The line of a key given as `select` or `severity.KL002` (the table's line when it is inline)."""
        if key in self.lines:
            return self.lines[key]
        below = [n for k, n in self.lines.items() if k.startswith(key + ".")]   # `[key.sub]` or `key.sub = `
        if below:
            return min(below)
        parts = key.split(".", 1)
        return self.lines.get(parts[0]) if len(parts) > 1 else None

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(self.display, problem, self.line_of(key))


# -- finding the file ------------------------------------------------------------------------------------


def _has_kernlint_table(path: Path) -> bool:
    text = _read(path)
    if "kernlint" not in text:  # never parse (nor fail on) a pyproject.toml that cannot concern us
        return False
    tool = _parse(path, text).get("tool")
    return isinstance(tool, dict) and "kernlint" in tool


def find_config(start: Path) -> Path | None:
    """The config file that applies in `start`: in `start` and each folder above it, kernlint.toml, else a
    pyproject.toml with a [tool.kernlint] table; None if there is none."""
    start = start.resolve()
    for folder in (start, *start.parents):
        own, pyproject = folder / CONFIG_FILE, folder / PYPROJECT
        try:
            if own.is_file():
                return own
            if own.exists():   # a folder (or a device) by the config's name is a mistake, never passed over
                raise ConfigError(_display(own), "not a file: a config file must be a TOML file")
            if pyproject.is_file() and _has_kernlint_table(pyproject):
                return pyproject
        except PermissionError:
            raise ConfigError(str(folder), f"cannot be searched for {CONFIG_FILE} (permission denied); pass "
                                           "--config FILE, or --isolated to use no config file") from None
    return None


def resolve_config(explicit: str | Path | None = None, *, isolated: bool = False, cwd: Path | None = None,
                   formats: Iterable[str] | None = None) -> Config:
    """The config of this invocation: `explicit` (--config), none (--isolated), or the one found upward from
    `cwd` (default: the working directory)."""
    if explicit is not None and isolated:
        raise ConfigError(None, "--config and --isolated cannot be combined (--isolated ignores every config "
                                "file)")
    if isolated:
        return Config(how="config files ignored (--isolated)")
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(path, "no such config file" if not path.exists() else "not a config file")
        return load_config(path, formats=formats, how="given with --config")
    cwd = cwd or Path.cwd()
    found = find_config(cwd)
    if found is None:
        return Config(how=f"no {CONFIG_FILE} or pyproject.toml with [tool.kernlint] in {cwd} or above")
    return load_config(found, formats=formats, how="found from the working directory upward")


# -- reading and checking it -----------------------------------------------------------------------------


def _display(path: Path) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    absolute = path.absolute()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(_display(path), f"cannot read config file: {getattr(exc, 'strerror', None) or exc}"
                          ) from None


_TOML_LINE = r"\(at line (\d+), column \d+\)"   # in tomllib's message of a bad file: compiled only then


def _parse(path: Path, text: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(_TOML_LINE, str(exc))
        raise ConfigError(_display(path), f"invalid TOML: {re.sub(_TOML_LINE, '', str(exc)).strip()}",
                          int(m.group(1)) if m else None) from None
    except (RecursionError, MemoryError):  # tomllib parses nested arrays and tables by recursion
        raise ConfigError(_display(path), "invalid TOML: arrays or tables nested too deeply to read") from None


_KEY_PART = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"


@functools.cache
def _line_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A table header and a `key =` line: compiled when a config file is read, not on import."""
    return (re.compile(rf"^\s*\[\[?\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$"), re.compile(rf"^\s*({_DOTTED})\s*="))


def _key_parts(dotted: str) -> tuple[str, ...]:
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in re.findall(_KEY_PART, dotted))


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Line (1-based) of every table header and `key =` in a TOML text, by the full key path: enough to
    point a message at a key. A key inside a multi-line string is not mistaken for one."""
    header_line, assign_line = _line_patterns()
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    in_string: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_string:
            if line.count(in_string) % 2 == 1:
                in_string = None
            continue
        header = header_line.match(line)
        if header:
            table = _key_parts(header.group(1))
            lines.setdefault(table, number)
            continue
        assign = assign_line.match(line)
        if assign:
            lines.setdefault(table + _key_parts(assign.group(1)), number)
            rest = line[assign.end():]
            for quotes in ('"""', "'''"):
                if rest.count(quotes) % 2 == 1:
                    in_string = quotes
    return lines


def _type_name(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
             dict: "a table"}
    return next((n for t, n in names.items() if isinstance(value, t)), type(value).__name__)


def parse_size(value: object) -> int:
    """A size in bytes: a whole number, or a number with a suffix K, M, G or T (powers of 1024, an optional
    trailing B or iB: 512M, 4G, 1.5GiB). ValueError says what is wrong."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size (bytes, or 512M, 4G), got {_type_name(value)}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        m = re.fullmatch(_SIZE, value, re.IGNORECASE)
        if not m:
            raise ValueError(f"{value!r} is not a size: give bytes, or a number with K, M, G or T (512M, 4G)")
        from fractions import Fraction

        number = int(Fraction(m.group(1)) * _UNITS[(m.group(2) or "").lower()])
    else:
        raise ValueError(f"expected a size (bytes, or 512M, 4G), got {_type_name(value)}")
    if number <= 0:
        raise ValueError(f"{value!r}: the size must be above zero")
    return number


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = r"\s*(\d+(?:\.\d*)?)\s*(?:([kmgt])(?:i?b)?|b)?\s*"   # compiled (re.IGNORECASE) on first use


def _unknown(key: str, known: Iterable[str], where: str) -> str:
    import difflib

    known = list(known)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if key.replace("_", "-") in known:
        close = [key.replace("_", "-")]
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown key '{key}' {where}{hint} (known: {', '.join(known)})"


def load_config(path: str | Path, *, formats: Iterable[str] | None = None, how: str = "") -> Config:
    """Read and check one config file: a pyproject.toml's [tool.kernlint] table, or any other file's top
    level. Relative paths in it are taken from the file's folder. `formats`: the output formats --format
    takes (not checked when None)."""
    path = Path(path)
    display = _display(path)
    text = _read(path)
    data = _parse(path, text)
    lines_by_path = key_lines(text)
    if path.name == PYPROJECT:
        prefix = PYPROJECT_TABLE
        tool = data.get("tool")
        section = tool.get("kernlint") if isinstance(tool, dict) else None
        if section is None:
            raise ConfigError(display, "no [tool.kernlint] table in this pyproject.toml")
        table_name = "[tool.kernlint]"
    else:
        prefix, section, table_name = (), data, None
    if not isinstance(section, dict):
        raise ConfigError(display, f"[tool.kernlint] must be a table, not {_type_name(section)}",
                          lines_by_path.get(prefix))
    # Line numbers by the key's name below the kernlint table: "select", "severity.KL002".
    lines = {".".join(p[len(prefix):]): n for p, n in lines_by_path.items() if p[:len(prefix)] == prefix and
             len(p) > len(prefix)}
    config = Config(path=path, display=display, table=table_name, lines=lines, how=how)
    where = f"in {table_name}" if table_name else f"in {path.name}"
    warnings: list[ConfigWarning] = []
    values: dict[str, Any] = {}
    severity: dict[str, str] = {}
    thresholds = Thresholds()
    ignores: dict[str, tuple[str, ...]] = {}
    path_map: dict[str, str] = {}
    min_cost: dict[str, Any] = {}
    base = path.absolute().parent
    for key, value in section.items():
        if key not in KEYS:
            problem = _unknown(key, KEYS, where)
            if key == "tool" and table_name is None:
                problem += f"; {path.name} takes its keys at the top level, without [tool.kernlint]"
            warnings.append(ConfigWarning(display, config.line_of(key), problem))
            continue
        kind = KEYS[key][0]
        if kind == "severity-table":
            severity = _severity_table(config, value)
        elif kind == "ignores-table":
            ignores = _ignores_table(config, value)
        elif kind == "path-map-table":
            path_map = _path_map_table(config, value)
        elif kind == "min-cost-table":
            min_cost = _min_cost_table(config, value)
        elif kind == "thresholds-table":
            thresholds, more = _thresholds_table(config, value, table_name)
            warnings += more
        else:
            values[key] = _convert(config, key, kind, value, base, formats)
    return Config(path=path, display=display, table=table_name, values=values, severity=severity,
                  thresholds=thresholds, per_source_ignores=ignores, path_map=path_map, min_cost=min_cost,
                  warnings=tuple(warnings),
                  lines=lines, how=how)


def _convert(config: Config, key: str, kind: str, value: object, base: Path,
             formats: Iterable[str] | None) -> object:
    def fail(expected: str) -> ConfigError:
        return config.error(key, f"{key}: expected {expected}, got {_type_name(value)}"
                            + (f" {value!r}" if isinstance(value, (str, int, float)) else ""))

    if kind == "bool":
        if not isinstance(value, bool):
            raise fail("true or false")
        return value
    if kind in ("path-list", "selector-list", "glob-list"):
        what = {"path-list": "rule files or folders", "selector-list": "rule ids, prefixes, names or ALL",
                "glob-list": "globs of entries to skip"}[kind]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(f"an array of strings ({what})")
        if any(not v.strip() for v in value):
            raise config.error(key, f"{key}: an empty string is not one of {what}")
        if kind == "path-list":
            return tuple(base / v for v in value)
        return tuple(v.strip() for v in value)
    if kind == "path":
        if not isinstance(value, str) or not value.strip():
            raise fail("a path (a string)")
        return base / value
    if kind == "severity":
        if value not in SEVERITIES:
            raise fail(f"one of {', '.join(SEVERITIES)}")
        return value
    if kind == "size":
        try:
            return parse_size(value)
        except ValueError as exc:
            raise config.error(key, f"{key}: {exc}") from None
    if kind == "format":
        known = list(formats) if formats is not None else None
        if not isinstance(value, str) or (known is not None and value not in known):
            raise fail(f"one of {', '.join(known)}" if known else "an output format name")
        return value
    raise AssertionError(kind)  # pragma: no cover - every kind of KEYS is handled above


def _ignores_table(config: Config, value: object) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise config.error("per-source-ignores", "per-source-ignores: expected a table (\"glob\" = [rule ids]), "
                                                 f"got {_type_name(value)}")
    out = {}
    for glob, ids in value.items():
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i.strip() for i in ids):
            raise config.error(f"per-source-ignores.{glob}", f"[per-source-ignores] {glob}: expected a non-empty "
                                                             f"array of rule ids, names or ALL, got {_type_name(ids)}")
        out[glob] = tuple(i.strip() for i in ids)
    return out


_MIN_COST_LIMITS = {"share": (0.0, 1.0, "a fraction of the step between 0 and 1 (0.005 is 0.5%)"),
                    "us": (0.0, float("inf"), "microseconds a step, 0 or more")}


def _min_cost_values(config: Config, where: str, value: object) -> dict[str, float]:
    if not isinstance(value, dict):
        raise config.error(where, f"[{where}]: expected a table (share = 0.005, us = 0.5) or \"none\", got "
                                  f"{_type_name(value)}")
    out = {}
    for key, number in value.items():
        if key not in _MIN_COST_LIMITS:
            raise config.error(f"{where}.{key}", f"[{where}] {key}: not a min-cost key (share, us)")
        low, high, what = _MIN_COST_LIMITS[key]
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not low <= number <= high:
            raise config.error(f"{where}.{key}", f"[{where}] {key}: expected {what}, got {number!r}")
        out[key] = float(number)
    return out


def _min_cost_table(config: Config, value: object) -> dict[str, Any]:
    """[min-cost]: `share` and `us` for every rule, and per rule (id or name) a table of its own or "none"."""
    if not isinstance(value, dict):
        raise config.error("min-cost", f"min-cost: expected a table, got {_type_name(value)}")
    out: dict[str, Any] = _min_cost_values(config, "min-cost", {k: v for k, v in value.items()
                                                               if not isinstance(v, (dict, str))})
    for rule, own in value.items():
        if isinstance(own, str):
            if own != "none":
                raise config.error(f"min-cost.{rule}", f"[min-cost] {rule}: expected a table or \"none\", got {own!r}")
            out[rule] = "none"
        elif isinstance(own, dict):
            out[rule] = _min_cost_values(config, f"min-cost.{rule}", own)
    return out


def _path_map_table(config: Config, value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise config.error("path-map", "path-map: expected a table (\"recorded prefix\" = \"working-tree prefix\"), "
                                       f"got {_type_name(value)}")
    out = {}
    for old, new in value.items():
        if not old.strip() or not isinstance(new, str):
            raise config.error(f"path-map.{old}", f"[path-map] {old!r}: expected a non-empty recorded prefix and a "
                                                  f"string (the working tree's prefix, \"\" to strip it), got "
                                                  f"{_type_name(new)}")
        out[old] = new
    return out


def _severity_table(config: Config, value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise config.error("severity", f"severity: expected a table (rule id = \"error\"), got "
                                       f"{_type_name(value)}")
    out = {}
    for rule, severity in value.items():
        if severity not in SEVERITIES:
            shown = f" {severity!r}" if isinstance(severity, (str, int, float)) else ""
            raise config.error(f"severity.{rule}", f"[severity] {rule}: expected one of {', '.join(SEVERITIES)}, "
                                                   f"got {_type_name(severity)}{shown}")
        out[rule] = severity
    return out


# (check, what it must be) for each threshold.
_THRESHOLD_RULES: dict[str, tuple[Callable[[float], bool], str]] = {
    "alpha": (lambda v: 0 < v < 1, "a number between 0 and 1 (exclusive)"),
    "min-effect": (lambda v: v > 0, "a fraction above 0 (0.01 is 1 %)"),
    "noise-multiple": (lambda v: v > 0, "a number above 0"),
    "min-runs": (lambda v: v >= 2, "an integer of at least 2"),
    "min-effect-us": (lambda v: v >= 0, "a number of microseconds, 0 or more"),
    "confidence": (lambda v: 0 < v < 1, "a number between 0 and 1 (exclusive)"),
    "quantum-ticks": (lambda v: v >= 0, "a number of timer ticks, 0 or more"),
    "between-prior": (lambda v: 0 <= v < 1, "a fraction from 0 up to 1 (0.006 is 0.6 %)"),
    "between-prior-ticks": (lambda v: v >= 0, "a number of timer ticks, 0 or more"),
}


def _thresholds_table(config: Config, value: object, table_name: str | None
                      ) -> tuple[Thresholds, list[ConfigWarning]]:
    if not isinstance(value, dict):
        raise config.error("thresholds", f"thresholds: expected a table, got {_type_name(value)}")
    where = f"in [{table_name[1:-1]}.thresholds]" if table_name else "in [thresholds]"
    warnings = []
    given = {}
    for key, number in value.items():
        if key not in THRESHOLD_KEYS:
            warnings.append(ConfigWarning(config.display, config.line_of(f"thresholds.{key}"),
                                          _unknown(key, THRESHOLD_KEYS, where)))
            continue
        check, expected = _THRESHOLD_RULES[key]
        integer = key == "min-runs"
        good_type = (isinstance(number, int) if integer else isinstance(number, (int, float))) \
            and not isinstance(number, bool)
        if not good_type or not math.isfinite(number) or not check(number):
            shown = f" {number!r}" if isinstance(number, (str, int, float)) else ""
            raise config.error(f"thresholds.{key}", f"[thresholds] {key}: expected {expected}, got "
                                                    f"{_type_name(number)}{shown}")
        given[key] = number if integer else float(number)
    return msgspec.convert(given, Thresholds), warnings


def described(config: Config) -> str:
    """One line for `-v`: which config file applies and what it sets."""
    if config.path is None:
        return f"config: none ({config.how})"
    keys = sorted(config.values) + (["[severity]"] if config.severity else []) + \
        (["[thresholds]"] if "thresholds" in config.lines else [])
    table = f" {config.table}" if config.table else ""
    return f"config: {config.display}{table} ({config.how}); sets {', '.join(keys) or 'nothing'}"


# -- what a check takes from it ---------------------------------------------------------------------------
# `kernlint check` / `run` / `rules` / `explain` and the pytest plugin resolve the rules through these, so a
# config means the same to each.


def configured_rules(config: Config, rule_paths: Iterable[Path] = (), *, builtin: bool = True) -> list:
    """The loaded rules (the shipped ones unless `builtin` is False, and those of `rule_paths`) with the
    config's [severity] applied; a [severity] key that names no loaded rule is a ConfigError at its line."""
    from kernlint.rules.loader import load_rules, override_min_cost, override_severity

    rules = load_rules(list(rule_paths), builtin=builtin)
    if config.severity:
        rules = override_severity(rules, config.severity, source=config.display,
                                  lines={k: config.line_of(f"severity.{k}") for k in config.severity})
    if config.min_cost:
        rules = override_min_cost(rules, config.min_cost, source=config.display,
                                  lines={k: config.line_of(f"min-cost.{k}") for k in config.min_cost})
    return rules


def selection_layer(config: Config):
    """The config's rule selection (`select`, `extend-select`, `ignore`) as the first layer of the selection
    (a kernlint.rules.loader.RuleSelection), or None when it gives none."""
    if not any(k in config.values for k in SELECTION_KEYS):
        return None
    from kernlint.rules.loader import RuleSelection

    return RuleSelection(select=config.values.get("select"), extend_select=config.values.get("extend-select", ()),
                         ignore=config.values.get("ignore", ()), source=config.display,
                         lines={k: config.line_of(k) for k in SELECTION_KEYS})


def check_rule_names(config: Config, loaded: list) -> None:
    """A ConfigError for a rule in [per-source-ignores] that names none of the `loaded` rules. Checked against
    every loaded rule, not those a check runs: a rule left out by `--select`, or a baseline rule (KL8xx) in
    a check without `--baseline`, is still a rule the file may name."""
    from kernlint.rules.suppressions import check_per_source_ignores

    check_per_source_ignores(config.per_source_ignores, loaded, config.display,
                             lambda glob: config.line_of(f"per-source-ignores.{glob}"))


@dataclass(frozen=True)
class CheckSettings:
    """A check's settings, resolved once from a config file and the caller's own values (argument > config >
    default), the same way for `kernlint check`, `kernlint.check()`, the pytest fixture and the audit: the
    rules (loaded, [severity] and [min-cost] applied, selected in layers), the exit policy, [thresholds], the
    largest trace read, and the suppressions and source mapping the pipeline applies."""

    rules: list
    exit: Any                 # kernlint.pipeline.ExitPolicy
    thresholds: Thresholds
    max_trace_bytes: int
    sources: Any              # kernlint.pipeline.SourceHandling
    config: Config = Config()

    def request(self, inputs: Any, *, baseline: Any = None, execution: Any = None, rules: list | None = None):
        """A kernlint.pipeline.CheckRequest with these settings: the inputs read up to `max_trace_bytes`, the
        baseline compared under [thresholds] (unless the caller's BaselineInput names its own)."""
        from kernlint.pipeline import BaselineInput, CheckRequest, Execution

        baseline = baseline if baseline is not None else BaselineInput()
        if baseline.thresholds is None:
            baseline = dataclasses.replace(baseline, thresholds=self.thresholds)
        if inputs.max_trace_bytes is None:
            inputs = dataclasses.replace(inputs, max_trace_bytes=self.max_trace_bytes)
        return CheckRequest(rules=self.rules if rules is None else rules, inputs=inputs, baseline=baseline,
                            exit=self.exit, execution=execution or Execution(), sources=self.sources)


def resolve_check(config: Config, *, rule_paths: Iterable[Path] | None = None, extra_rule_paths: Iterable[Path] = (),
                  builtin: bool | None = None, select: Iterable[str] | None = None, extend_select: Iterable[str] = (),
                  ignore: Iterable[str] = (), fail_on: str | None = None, allow_incomplete: bool | None = None,
                  exit_zero: bool | None = None, max_trace_bytes: int | None = None,
                  source_root: Path | None = None, path_map: Iterable[tuple[str, str]] = (),
                  suppressions_file: Path | None = None, update_suppressions: Callable | None = None,
                  inline_ignores: bool = True) -> CheckSettings:
    """The settings of a check: each value the caller gives (None: not given) wins over the config's, which
    wins over the default. `rule_paths` replaces the config's `rules` (a command-line flag); `extra_rule_paths`
    adds to them (the API's rule paths, the pytest plugin's --kernlint-rules). The selection is layered: the
    config's select / extend-select / ignore, then the caller's (`select` None: not given). `path_map`: pairs
    tried before the config's [path-map]. `suppressions_file`: the bulk file, kernlint-suppressions.json in
    the working directory by default, read when it exists (a bad one is a ConfigError now, before any work).
    Raises ConfigError / RuleFileError."""
    from kernlint.pipeline import ExitPolicy, SourceHandling
    from kernlint.rules.suppressions import SUPPRESSIONS_FILE, SuppressionFile
    from kernlint.trace.load import DEFAULT_MAX_TRACE_BYTES

    values = config.values
    rules = selected_rules(config, rule_paths=rule_paths, extra_rule_paths=extra_rule_paths, builtin=builtin,
                           select=select, extend_select=extend_select, ignore=ignore)
    policy = ExitPolicy(fail_on=_given(fail_on, values.get("fail-on"), "warning"),
                        allow_incomplete=_given(allow_incomplete, values.get("allow-incomplete"), False),
                        exit_zero=_given(exit_zero, values.get("exit-zero"), False))
    location = Path(suppressions_file) if suppressions_file is not None else Path.cwd() / SUPPRESSIONS_FILE
    # exists, not is_file: a FIFO or a folder there is refused in one line, never skipped (nor replaced)
    read = SuppressionFile.read(location) if location.exists() else None
    sources = SourceHandling(root=_given(source_root, values.get("source-root"), None),
                             path_map=[*path_map, *config.path_map.items()], suppressions=read,
                             suppressions_location=location, per_source_ignores=config.per_source_ignores,
                             inline_ignores=inline_ignores, update_suppressions=update_suppressions)
    return CheckSettings(rules=rules, exit=policy, thresholds=config.thresholds,
                         max_trace_bytes=_given(max_trace_bytes, values.get("max-trace-bytes"),
                                                DEFAULT_MAX_TRACE_BYTES),
                         sources=sources, config=config)


def selected_rules(config: Config, *, rule_paths: Iterable[Path] | None = None, extra_rule_paths: Iterable[Path] = (),
                   builtin: bool | None = None, select: Iterable[str] | None = None, extend_select: Iterable[str] = (),
                   ignore: Iterable[str] = ()) -> list:
    """The rules of resolve_check: loaded (the shipped ones unless `builtin` is False or the config says
    no-builtin; the config's `rules` or `rule_paths`, plus `extra_rule_paths`), [severity] and [min-cost]
    applied, [per-source-ignores] checked against every loaded rule (a rule the selection leaves out is still a
    rule), then selected by the config's layer and the caller's, in that order (ruff's layers)."""
    from kernlint.rules.loader import RuleSelection, resolve_selection

    values = config.values
    paths = [*(values.get("rules", ()) if rule_paths is None else rule_paths), *extra_rule_paths]
    no_builtin = values.get("no-builtin", False) if builtin is None else not builtin
    loaded = configured_rules(config, paths, builtin=not no_builtin)
    check_rule_names(config, loaded)
    layers = [layer for layer in [selection_layer(config)] if layer is not None]
    select = tuple(select) if select is not None else None
    layers.append(RuleSelection(select=select or None, extend_select=tuple(extend_select), ignore=tuple(ignore)))
    return resolve_selection(loaded, layers)


def _given(*values: Any) -> Any:
    """The first value that is not None; the last (the default) when all are."""
    return next((v for v in values if v is not None), values[-1])


def as_mapping(config: Config) -> Mapping[str, Any]:
    """Every value the config gives, by click parameter name (for a command's default_map)."""
    return {param_name(k): v for k, v in config.values.items() if k not in SELECTION_KEYS}


__all__ = ["CONFIG_FILE", "CheckSettings", "Config", "ConfigWarning", "KEYS", "PYPROJECT", "SELECTION_KEYS",
           "THRESHOLD_KEYS", "Thresholds", "as_mapping", "check_rule_names", "configured_rules", "described",
           "find_config", "key_lines", "load_config", "param_name", "parse_size", "resolve_check", "resolve_config",
           "selected_rules", "selection_layer"]
