"""Loading rule files: the shipped rules/ folder plus user paths, validated against the schema."""
from __future__ import annotations

import importlib.resources
import re
from pathlib import Path
from typing import Iterable

import msgspec
import tomllib

from kernlint.errors import ConfigError, RuleFileError
from kernlint.rules.checks import REGISTRY
from kernlint.rules.schema import Rule, RuleSpec
from kernlint.trace.names import (
    DEVICE_CATEGORIES,
    HOST_CATEGORIES,
    NAMED_PATTERNS,
    named_pattern,
)
from kernlint.trace.patterns import PatternError, compile_pattern
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


def rule_language_reference() -> str:
    """docs/rule-language.md: from the source checkout, or the installed package data."""
    checkout = Path(__file__).resolve().parents[2] / "docs" / "rule-language.md"
    if checkout.is_file():
        return checkout.read_text(encoding="utf-8")
    return importlib.resources.files("kernlint.docs").joinpath("rule-language.md").read_text(encoding="utf-8")


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
    # Not `key = ...`: the key may be a table of its own, `[key]`, `[[key]]` or `[key.sub]` (under `tables`).
    table_re = re.compile(r"^\s*\[\[?\s*" + r"\s*\.\s*".join(re.escape(t) for t in dotted) + r"\s*[.\]]")
    for i, line in enumerate(lines):
        if table_re.match(line):
            return i + 1
    return start or None


def _path_parts(path: str) -> list[str]:
    return [p for p in re.split(r"\.|\[\d+\]", path) if p]


# Where a rule file holds patterns: (table, key); a list or a single string.
_PATTERN_KEYS = (("anchor", "kernel"), ("anchor", "op"), ("scope", "annotations"), ("scope", "modules"),
                 ("scope", "frames"), ("scope", "ops"), ("check", "names"))


def _expand_named_patterns(data: dict, path: Path, text: str) -> None:
    """`@name` -> the names table's pattern of that name, in place; an unknown name is an error."""
    for table, key in _PATTERN_KEYS:
        section = data.get(table)
        if not isinstance(section, dict) or key not in section:
            continue
        value = section[key]
        items = value if isinstance(value, list) else [value]
        expanded = []
        for item in items:
            if isinstance(item, str) and item.startswith("@"):
                try:
                    item = named_pattern(item[1:])
                except KeyError:
                    raise RuleFileError(path, f"{table}.{key}: no pattern {item!r} in the names table (known: "
                                        f"{', '.join('@' + n for n in sorted(NAMED_PATTERNS))})",
                                        _line_of(text, [table, key])) from None
            expanded.append(item)
        section[key] = expanded if isinstance(value, list) else expanded[0]


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
    except (RecursionError, MemoryError):  # tomllib parses nested arrays and tables by recursion
        raise RuleFileError(path, "invalid TOML: arrays or tables nested too deeply to read") from None
    _expand_named_patterns(data, path, text)
    try:
        spec = msgspec.convert(data, RuleSpec)
    except (RecursionError, MemoryError):
        raise RuleFileError(path, "schema error: values nested too deeply to check") from None
    except msgspec.ValidationError as exc:
        message = str(exc)
        unknown = _UNKNOWN_FIELD.search(message)
        if unknown:
            parents = _path_parts(unknown.group(2)[1:]) if unknown.group(2) else []
            extra = ""
            if parents == ["check"] and isinstance(data.get("check"), dict):
                kind = REGISTRY.get(data["check"].get("type"))
                if kind is not None:
                    allowed = sorted(f.encode_name for f in msgspec.structs.fields(kind.spec))
                    extra = f" (check type {kind.type} takes: {', '.join(allowed) or 'no other key'})"
            raise RuleFileError(path, f"unknown key `{unknown.group(1)}`"
                                + (f" in [{'.'.join(parents)}]" if parents else "") + extra,
                                _line_of(text, parents + [unknown.group(1)])) from None
        at = _AT_PATH.search(message)
        parts = _path_parts(at.group(1)) if at else []
        if parts == ["check", "type"] or (parts == ["check"] and "type" in message):
            message = f"{message} (known check types: {', '.join(sorted(REGISTRY))})"
        raise RuleFileError(path, f"schema error: {message}", _line_of(text, parts)) from None
    rule = Rule(spec=spec, path=str(path))
    _validate(rule, path, text)
    return rule


def _validate(rule: Rule, path: Path, text: str) -> None:
    spec = rule.spec

    def fail(problem: str, *where: str) -> None:
        raise RuleFileError(path, problem, _line_of(text, list(where)))

    if not RULE_ID.match(spec.id):
        fail(f"rule id {spec.id!r} must be KL followed by three digits", "id")
    if not RULE_NAME.match(spec.name):
        fail(f"rule name {spec.name!r} must be kebab-case", "name")
    check = spec.check
    regexes = []
    if spec.anchor is not None:
        regexes += [(spec.anchor.kernel, ["anchor", "kernel"]), (spec.anchor.op, ["anchor", "op"])]
    for key in ("annotations", "modules", "frames", "ops"):
        regexes += [(p, ["scope", key]) for p in getattr(spec.scope, key)]
    regexes += [(p, ["check", "names"]) for p in getattr(check, "names", ())]
    for pattern, where in regexes:
        if pattern is None:
            continue
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            fail(f"{'.'.join(where)}: {exc}", *where)
    for cat in getattr(check, "device_categories", ()):
        if cat != "*" and cat not in DEVICE_CATEGORIES:
            fail(f"unknown device category {cat!r} (known: {', '.join(DEVICE_CATEGORIES)})",
                 "check", "device-categories")
    for cat in getattr(check, "op_categories", ()):
        if cat != "*" and cat not in HOST_CATEGORIES:
            fail(f"unknown op category {cat!r} (known: {', '.join(HOST_CATEGORIES)})", "check", "op-categories")
    for kind in getattr(check, "kinds", ()):
        if kind not in KINDS:
            fail(f"unknown event kind {kind!r} (known: {', '.join(KINDS)})", "check", "kinds")
    kind = rule.kind
    has_anchor = spec.anchor is not None and (spec.anchor.kernel or spec.anchor.op)
    if kind.needs_anchor and not has_anchor:
        fail(f"check type {kind.type} needs an [anchor] with `kernel` or `op`", "check", "type")
    if kind.needs_scope and not spec.scope.is_named:
        fail(f"check type {kind.type} needs a [scope] naming annotations, modules, frames or ops", "check", "type")
    if kind.validate is not None:
        problem = kind.validate(rule)
        if problem is not None:
            fail(problem[0], *problem[1])


def rule_files(paths: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(path.glob("*.toml"))
            if not found:
                raise RuleFileError(path, "rule folder holds no rule files (*.toml)")
            out.extend(found)
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
