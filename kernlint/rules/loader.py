"""Loading rule files: the shipped rules/ folder plus user paths, validated against the schema."""
from __future__ import annotations

import importlib.resources
import re
import tomllib
from pathlib import Path
from typing import Iterable

import msgspec

from kernlint.errors import ConfigError, RuleFileError
from kernlint.rules.schema import Rule, RuleSpec
from kernlint.trace.names import DEVICE_CATEGORIES, HOST_CATEGORIES
from kernlint.trace.table import KINDS

RULE_ID = re.compile(r"^KL\d{3}$")
RULE_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_UNKNOWN_FIELD = re.compile(r"unknown field `([^`]+)`(?: - at `([^`]+)`)?")
_AT_PATH = re.compile(r"at `\$((?:\.[\w-]+|\[\d+\])*)`")
_TOML_LINE = re.compile(r"at line (\d+)")


def builtin_rules_dir() -> Path:
    """The shipped rules: the source checkout's rules/ folder, or the installed package data."""
    checkout = Path(__file__).resolve().parents[2] / "rules"
    if checkout.is_dir() and any(checkout.glob("KL*.toml")):
        return checkout
    return Path(str(importlib.resources.files("kernlint.builtin_rules")))


def _line_of(text: str, dotted: list[str]) -> int | None:
    """Line (1-based) of a key given as a path like ["check", "type"], found in the TOML text."""
    if not dotted:
        return None
    *tables, key = dotted
    lines = text.splitlines()
    start = 0
    if tables:
        header = re.compile(r"^\s*\[\s*" + r"\s*\.\s*".join(re.escape(t) for t in tables) + r"\s*\]\s*(#.*)?$")
        for i, line in enumerate(lines):
            if header.match(line):
                start = i + 1
                break
        else:  # an inline table: `tables[-1] = { key = ... }`
            inline = re.compile(r"^\s*" + re.escape(tables[-1]) + r"\s*=\s*\{")
            for i, line in enumerate(lines):
                if inline.match(line):
                    return i + 1
            return None
    key_re = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
    for i in range(start, len(lines)):
        if i > start and tables and lines[i].lstrip().startswith("["):
            break
        if not tables and lines[i].lstrip().startswith("["):
            break
        if key_re.match(lines[i]):
            return i + 1
    return start or None


def _path_parts(path: str) -> list[str]:
    return [p for p in re.split(r"\.|\[\d+\]", path) if p]


def parse_rule_file(path: Path) -> Rule:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleFileError(path, f"cannot read rule file: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = _TOML_LINE.search(str(exc))
        raise RuleFileError(path, f"invalid TOML: {str(exc).split(' (at')[0]}",
                            int(m.group(1)) if m else None) from None
    try:
        spec = msgspec.convert(data, RuleSpec)
    except msgspec.ValidationError as exc:
        message = str(exc)
        unknown = _UNKNOWN_FIELD.search(message)
        if unknown:
            parents = _path_parts(unknown.group(2)[1:]) if unknown.group(2) else []
            raise RuleFileError(path, f"unknown key `{unknown.group(1)}`"
                                + (f" in [{'.'.join(parents)}]" if parents else ""),
                                _line_of(text, parents + [unknown.group(1)])) from None
        at = _AT_PATH.search(message)
        parts = _path_parts(at.group(1)) if at else []
        raise RuleFileError(path, f"schema error: {message}", _line_of(text, parts)) from None
    _validate(spec, path, text)
    return Rule(spec=spec, path=str(path))


def _validate(spec: RuleSpec, path: Path, text: str) -> None:
    def fail(problem: str, *where: str) -> None:
        raise RuleFileError(path, problem, _line_of(text, list(where)))

    if not RULE_ID.match(spec.id):
        fail(f"rule id {spec.id!r} must be KL followed by three digits", "id")
    if not RULE_NAME.match(spec.name):
        fail(f"rule name {spec.name!r} must be kebab-case", "name")
    regexes = []
    if spec.anchor is not None:
        regexes += [(spec.anchor.kernel, ["anchor", "kernel"]), (spec.anchor.op, ["anchor", "op"])]
    for key in ("annotations", "modules", "frames", "ops"):
        regexes += [(p, ["scope", key]) for p in getattr(spec.scope, key)]
    regexes += [(p, ["check", "names"]) for p in spec.check.names]
    for pattern, where in regexes:
        if pattern is None:
            continue
        try:
            re.compile(pattern)
        except re.error as exc:
            fail(f"bad regular expression {pattern!r} in {'.'.join(where)}: {exc}", *where)
    for cat in spec.check.device_categories:
        if cat != "*" and cat not in DEVICE_CATEGORIES:
            fail(f"unknown device category {cat!r} (known: {', '.join(DEVICE_CATEGORIES)})",
                 "check", "device-categories")
    for cat in spec.check.op_categories:
        if cat != "*" and cat not in HOST_CATEGORIES:
            fail(f"unknown op category {cat!r} (known: {', '.join(HOST_CATEGORIES)})", "check", "op-categories")
    for kind in spec.check.kinds:
        if kind not in KINDS:
            fail(f"unknown event kind {kind!r} (known: {', '.join(KINDS)})", "check", "kinds")
    check = spec.check.type
    needs_anchor = check in ("forbid-before-anchor", "require-anchor")
    has_anchor = spec.anchor is not None and (spec.anchor.kernel or spec.anchor.op)
    if needs_anchor and not has_anchor:
        fail(f"check type {check} needs an [anchor] with `kernel` or `op`", "check", "type")
    if check in ("forbid-in-scope", "forbid-temporary-alloc", "max-count", "require-anchor") \
            and not spec.scope.is_named:
        fail(f"check type {check} needs a [scope] naming annotations, modules, frames or ops", "check", "type")
    if check == "forbid-temporary-alloc" and not spec.check.dtypes:
        fail("forbid-temporary-alloc needs `dtypes`", "check", "type")
    if check in ("forbid-in-scope", "max-count", "rank-divergence") and not (
            spec.check.kinds or spec.check.names or spec.check.device_categories or spec.check.op_categories):
        fail(f"{check} needs at least one of kinds, names, device-categories, op-categories", "check", "type")


def rule_files(paths: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(sorted(path.glob("*.toml")))
        elif path.is_file():
            out.append(path)
        else:
            raise RuleFileError(path, "no such rule file or folder")
    return out


def load_rules(extra: Iterable[str | Path] = (), *, builtin: bool = True) -> list[Rule]:
    """Shipped rules (unless builtin=False) plus user files/folders. Duplicate ids are errors."""
    paths = ([builtin_rules_dir()] if builtin else []) + list(extra)
    rules: dict[str, Rule] = {}
    for file in rule_files(paths):
        rule = parse_rule_file(file)
        if rule.id in rules:
            raise RuleFileError(file, f"rule id {rule.id} is already defined in {rules[rule.id].path}",
                                _line_of(file.read_text(encoding="utf-8"), ["id"]))
        rules[rule.id] = rule
    return sorted(rules.values(), key=lambda r: r.id)


def _selector_matches(selector: str, rule: Rule) -> bool:
    return selector == "ALL" or rule.id.startswith(selector) or selector == rule.name


def select_rules(rules: list[Rule], select: Iterable[str] = (), ignore: Iterable[str] = ()) -> list[Rule]:
    """--select / --ignore: each takes an id (KL001), a prefix (KL0), a rule name, or ALL."""
    select = [s.strip() for s in select if s.strip()] or ["ALL"]
    ignore = [s.strip() for s in ignore if s.strip()]
    for selector in (*select, *ignore):
        if not any(_selector_matches(selector, r) for r in rules):
            raise ConfigError(None, f"selector {selector!r} matches no rule (known: "
                              f"{', '.join(r.id for r in rules) or 'none'})")
    chosen = [r for r in rules if any(_selector_matches(s, r) for s in select)]
    return [r for r in chosen if not any(_selector_matches(s, r) for s in ignore)]
