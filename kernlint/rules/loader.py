"""Loading rule files: the shipped rules/ folder plus user paths, validated against the schema."""
from __future__ import annotations

import importlib.resources
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path

import msgspec

from kernlint.errors import ConfigError, RuleFileError
from kernlint.rules.checks import REGISTRY
from kernlint.rules.families import family_of
from kernlint.rules.fields import pattern_fields, value_set_fields
from kernlint.rules.schema import AnchorSpec, MinCostSpec, Rule, RuleSpec, ScopeSpec
from kernlint.trace.names import NAMED_PATTERNS, SCOPE_PRESETS, named_pattern
from kernlint.trace.patterns import PatternError, compile_pattern

# A prefix of one to eight letters and digits that starts with a letter, then three digits: KL001 for the
# shipped rules, ACME001 for a team's own. Ids are case-insensitive: a rule file's id is upper-cased.
RULE_ID = re.compile(r"^[A-Z][A-Z0-9]{0,7}[0-9]{3}$")
RULE_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# What an error message says, read only when a rule file is bad: compiled then (re's own cache), not on import.
_UNKNOWN_FIELD = r"unknown field `([^`]+)`(?: - at `([^`]+)`)?"
_AT_PATH = r"at `\$((?:\.[\w-]+|\[\d+\])*)`"
_TOML_LINE = r"at line (\d+)"
# The names table's own patterns (what `@name` expands to) are ours and compile (tests/test_names.py): they are
# not compiled to check a rule, but on their first use (kernlint.trace.patterns.compile_pattern).
_NAMES_TABLE_PATTERNS = frozenset(NAMED_PATTERNS.values())


# The shipped rule files and the rule-language reference are package data, read through importlib.resources
# (never through str() of a resource path), so they load from a wheel, an sdist build, an editable install and
# a zip import alike. Run from a source checkout that is on sys.path but not installed (the device scripts'
# PYTHONPATH=checkout), the packages do not exist: the checkout's own folders are read instead.
BUILTIN_RULES_PACKAGE = "kernlint.builtin_rules"
DOCS_PACKAGE = "kernlint.docs"
_CHECKOUT = Path(__file__).resolve().parents[2]


def _package_data(package: str, checkout_folder: str) -> Traversable:
    try:
        return importlib.resources.files(package)
    except ModuleNotFoundError:
        folder = _CHECKOUT / checkout_folder
        if (folder / "__init__.py").is_file() and (_CHECKOUT / "kernlint" / "__init__.py").is_file():
            return folder
        raise


def builtin_rule_files() -> list[Traversable]:
    """The shipped rule files (KL*.toml of the installed `kernlint.builtin_rules` package), sorted by name."""
    try:
        root = _package_data(BUILTIN_RULES_PACKAGE, "rules")
        found = sorted((e for e in root.iterdir() if e.name.endswith(".toml") and e.is_file()), key=lambda e: e.name)
    except (ModuleNotFoundError, OSError) as exc:
        raise RuleFileError(BUILTIN_RULES_PACKAGE, f"the shipped rules cannot be read ({exc}); reinstall kernlint") \
            from None
    if not found:
        raise RuleFileError(str(root), "the shipped rules are missing from the installed package; reinstall kernlint")
    return found


def rule_language_reference() -> str:
    """docs/rule-language.md, from the installed package data."""
    return _package_data(DOCS_PACKAGE, "docs").joinpath("rule-language.md").read_text(encoding="utf-8")


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


def _pattern_keys(data: dict) -> list[tuple[str, str]]:
    """Where a rule file holds patterns: (table, key) of every field [anchor], [scope] and the check kind
    (by its [check] type) declare as a pattern (kernlint.rules.fields)."""
    keys = [("anchor", key) for _, key in pattern_fields(AnchorSpec)]
    keys += [("scope", key) for _, key in pattern_fields(ScopeSpec)]
    check = data.get("check")
    kind = REGISTRY.find(check.get("type")) if isinstance(check, dict) and isinstance(check.get("type"), str) else None
    if kind is not None:
        keys += [("check", key) for _, key in pattern_fields(kind.spec)]
    return keys


def _expand_scope_preset(data: dict, path: Path, text: str) -> None:
    """`scope = "@name"` -> a copy of the names table's [scope] preset of that name, in place."""
    scope = data.get("scope")
    if not isinstance(scope, str):
        return
    if not scope.startswith("@") or scope[1:] not in SCOPE_PRESETS:
        raise RuleFileError(path, f"scope: {scope!r} names no scope preset (known: "
                            f"{', '.join('@' + n for n in sorted(SCOPE_PRESETS))}; or write a [scope] table)",
                            _line_of(text, ["scope"]))
    data["scope"] = {k: list(v) if isinstance(v, list) else v for k, v in SCOPE_PRESETS[scope[1:]].items()}


def _expand_named_patterns(data: dict, path: Path, text: str) -> None:
    """`@name` -> the names table's pattern of that name, in place; an unknown name is an error."""
    for table, key in _pattern_keys(data):
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


def parse_rule_file(path: Path | Traversable) -> Rule:
    """One rule file: a path, or a Traversable of the installed package data (named by its str())."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleFileError(str(path), f"cannot read rule file: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(_TOML_LINE, str(exc))
        raise RuleFileError(path, f"invalid TOML: {str(exc).split(' (at')[0]}",
                            int(m.group(1)) if m else None) from None
    except (RecursionError, MemoryError):  # tomllib parses nested arrays and tables by recursion
        raise RuleFileError(path, "invalid TOML: arrays or tables nested too deeply to read") from None
    _expand_scope_preset(data, path, text)
    _expand_named_patterns(data, path, text)
    try:
        spec = msgspec.convert(data, RuleSpec)
    except (RecursionError, MemoryError):
        raise RuleFileError(path, "schema error: values nested too deeply to check") from None
    except msgspec.ValidationError as exc:
        message = str(exc)
        unknown = re.search(_UNKNOWN_FIELD, message)
        if unknown:
            parents = _path_parts(unknown.group(2)[1:]) if unknown.group(2) else []
            extra = ""
            if parents == ["check"] and isinstance(data.get("check"), dict):
                kind = REGISTRY.find(data["check"].get("type"))
                if kind is not None:
                    allowed = sorted(f.encode_name for f in msgspec.structs.fields(kind.spec))
                    extra = f" (check type {kind.type} takes: {', '.join(allowed) or 'no other key'})"
            raise RuleFileError(path, f"unknown key `{unknown.group(1)}`"
                                + (f" in [{'.'.join(parents)}]" if parents else "") + extra,
                                _line_of(text, parents + [unknown.group(1)])) from None
        at = re.search(_AT_PATH, message)
        parts = _path_parts(at.group(1)) if at else []
        if parts == ["check", "type"] or (parts == ["check"] and "type" in message):
            message = f"{message} (known check types: {', '.join(REGISTRY.names())})"
        raise RuleFileError(path, f"schema error: {message}", _line_of(text, parts)) from None
    if spec.id != spec.id.upper():
        spec = msgspec.structs.replace(spec, id=spec.id.upper())
    rule = Rule(spec=spec, path=str(path))
    _validate(rule, path, text)
    return rule


def _validate(rule: Rule, path: Path, text: str) -> None:
    spec = rule.spec

    def fail(problem: str, *where: str) -> None:
        raise RuleFileError(path, problem, _line_of(text, list(where)))

    if not RULE_ID.match(spec.id):
        fail(f"rule id {spec.id!r} must be a prefix of 1 to 8 letters and digits that starts with a letter, "
             "then three digits (KL001, ACME001)", "id")
    if not RULE_NAME.match(spec.name):
        fail(f"rule name {spec.name!r} must be kebab-case", "name")
    check = spec.check
    regexes = []
    for table, struct in (("anchor", spec.anchor), ("scope", spec.scope), ("check", check)):
        if struct is None:
            continue
        for attr, key in pattern_fields(type(struct)):
            value = getattr(struct, attr)
            regexes += [(p, [table, key]) for p in (value if isinstance(value, list) else [value])]
    for pattern, where in regexes:
        if pattern is None or pattern in _NAMES_TABLE_PATTERNS:
            continue
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            fail(f"{'.'.join(where)}: {exc}", *where)
    # Fields a value set types (kernlint.rules.fields: categories, event kinds, dtypes), by their declared type.
    for table, struct in (("anchor", spec.anchor), ("scope", spec.scope), ("check", check)):
        if struct is None:
            continue
        for attr, key, value_set in value_set_fields(type(struct)):
            value = getattr(struct, attr)
            for item in (value if isinstance(value, list) else [value]):
                problem = value_set.problem(item)
                if problem is not None:
                    fail(f"{table}.{key}: {problem}", table, key)
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
    """Shipped rules (unless builtin=False) plus user files/folders. An id loaded twice is an error, named
    with the file and line of the second."""
    files: list[Path | Traversable] = (builtin_rule_files() if builtin else []) + rule_files(extra)
    rules: dict[str, Rule] = {}
    for file in files:
        rule = parse_rule_file(file)
        if rule.id in rules:
            raise RuleFileError(str(file), f"rule id {rule.id} is already defined in {rules[rule.id].path}; give "
                                           "this rule an id of its own (your own prefix, e.g. ACME001)",
                                _line_of(file.read_text(encoding="utf-8"), ["id"]))
        rules[rule.id] = rule
    return sorted(rules.values(), key=lambda r: r.id)


def override_severity(rules: list[Rule], overrides: Mapping[str, str], *, source: str | None = None,
                      lines: Mapping[str, int] | None = None) -> list[Rule]:
    """`rules` with the severities of `overrides` (a rule id, any case, or a rule name -> severity). A key
    that names no rule is an error, with `source` and the key's line from `lines` when given."""
    by_key = {**{r.name: r.id for r in rules}, **{r.id: r.id for r in rules}}
    new: dict[str, str] = {}
    for key, severity in overrides.items():
        rule_id = by_key.get(key.upper()) or by_key.get(key.lower())
        if rule_id is None:
            raise ConfigError(source, f"[severity] {key}: no rule {key!r} (known: "
                                      f"{', '.join(r.id for r in rules) or 'none'})", (lines or {}).get(key))
        new[rule_id] = severity
    return [Rule(spec=msgspec.structs.replace(r.spec, severity=new[r.id]), path=r.path) if r.id in new else r
            for r in rules]


def override_min_cost(rules: list[Rule], table: Mapping[str, object], *, source: str | None = None,
                      lines: Mapping[str, int] | None = None) -> list[Rule]:
    """`rules` with the min-cost of a config's [min-cost] (kernlint.config): its `share` and `us` fill in what a
    rule's file leaves out (never a rule whose file says "none"); a rule's own entry (its id, any case, or its
    name: a table of `share` / `us`, or "none") wins over both. A rule key that names no rule is an error."""
    by_key = {**{r.name: r.id for r in rules}, **{r.id: r.id for r in rules}}
    default = {k: v for k, v in table.items() if k in ("share", "us")}
    own: dict[str, object] = {}
    for key, value in table.items():
        if key in ("share", "us"):
            continue
        rule_id = by_key.get(key.upper()) or by_key.get(key.lower())
        if rule_id is None:
            raise ConfigError(source, f"[min-cost] {key}: no rule {key!r} (known: "
                                      f"{', '.join(r.id for r in rules) or 'none'})", (lines or {}).get(key))
        own[rule_id] = value
    out = []
    for r in rules:
        spec = r.spec.min_cost
        if r.id in own:
            value = own[r.id]
            spec = "none" if value == "none" else MinCostSpec(**{**default, **value})
        elif spec != "none" and default:
            mine = {} if spec is None else {k: getattr(spec, k) for k in ("share", "us")
                                            if getattr(spec, k) is not None}
            spec = MinCostSpec(**{**default, **mine})
        out.append(r if spec is r.spec.min_cost else Rule(spec=msgspec.structs.replace(r.spec, min_cost=spec),
                                                          path=r.path))
    return out


@dataclass(frozen=True)
class RuleSelection:
    """One layer of the rule selection (the config file, then the command line), resolved as ruff does:
    a layer's `select` (None: not given) replaces what the layers before chose; `extend_select` adds to
    it; `ignore` removes. Within a layer the most specific selector wins (an exact id or name over a
    prefix, a longer prefix over a shorter one, any prefix over a family or tag, that over ALL); at equal
    specificity ignore wins.

    `source` (a config file) and `lines` (selector key -> line) place errors about this layer."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    source: str | None = None
    lines: Mapping[str, int] = field(default_factory=dict)


# A family (R1, distributed: kernlint.rules.families, as `kernlint rules` groups them) or a tag (fp8, timing,
# zoo-1): more specific than ALL, less than (or as much as, for a one-letter one) any id prefix.
FAMILY_OR_TAG = 1


def _specificity(selector: str, rule: Rule) -> int | None:
    """How specifically `selector` names `rule` (higher is more specific), or None if it does not."""
    if selector.upper() == "ALL":
        return 0
    if selector.upper() == rule.id or selector.lower() == rule.name:
        return 100
    if rule.id.startswith(selector.upper()):
        return len(selector)
    wanted = selector.lower()
    if wanted == family_of(rule.spec.tags).key.lower() or any(wanted == t.lower() for t in rule.spec.tags):
        return FAMILY_OR_TAG
    return None


def _selector_matches(selector: str, rule: Rule) -> bool:
    return _specificity(selector, rule) is not None


def resolve_selection(rules: list[Rule], layers: Iterable[RuleSelection]) -> list[Rule]:
    """The rules that the selection layers choose, in the order of `rules`. A selector that matches no rule,
    or a selection that leaves no rule, is a ConfigError."""
    layers = list(layers)
    known = ", ".join(r.id for r in rules) or "none"
    for layer in layers:
        for key, selectors in (("select", layer.select or ()), ("extend-select", layer.extend_select),
                               ("ignore", layer.ignore)):
            for selector in selectors:
                if not any(_selector_matches(selector, r) for r in rules):
                    where = f"{key}: " if layer.source else ""
                    raise ConfigError(layer.source, f"{where}selector {selector!r} matches no rule (known: {known})",
                                      layer.lines.get(key))
    chosen = {r.id for r in rules}   # by default every loaded rule
    for layer in layers:
        verdicts: dict[str, bool] = {}
        for rule in rules:
            best: tuple[int, int] | None = None   # (specificity, 1 for ignore so that it wins a tie)
            for selectors, keep in (((*(layer.select or ()), *layer.extend_select), True), (layer.ignore, False)):
                for selector in selectors:
                    spec = _specificity(selector, rule)
                    if spec is not None and (best is None or (spec, not keep) > best):
                        best = (spec, int(not keep))
            if best is not None:
                verdicts[rule.id] = not best[1]
        if layer.select is not None:
            chosen = {rule_id for rule_id, keep in verdicts.items() if keep}
        else:
            chosen = (chosen | {i for i, keep in verdicts.items() if keep}) - {i for i, keep in verdicts.items()
                                                                               if not keep}
    result = [r for r in rules if r.id in chosen]
    if not result:
        given = "; ".join(f"{key} {', '.join(values)}" for layer in layers for key, values in
                          (("select", layer.select or ()), ("extend-select", layer.extend_select),
                           ("ignore", layer.ignore)) if values)
        source = next((layer.source for layer in layers if layer.source and (layer.select is not None or
                                                                             layer.ignore)), None)
        raise ConfigError(None, f"the rule selection ({given or 'select nothing'}) leaves no rule to check "
                                f"(known: {known})" + (f"; see {source}" if source else ""))
    return result


def select_rules(rules: list[Rule], select: Iterable[str] = (), ignore: Iterable[str] = ()) -> list[Rule]:
    """--select / --ignore: each takes an id (KL001), a prefix (KL0), a rule name, a family (R1, baseline), a
    tag (fp8) or ALL, in any case. No
    selector selects every rule."""
    select = tuple(s.strip() for s in select if s.strip())
    ignore = tuple(s.strip() for s in ignore if s.strip())
    return resolve_selection(rules, [RuleSelection(select=select or None, ignore=ignore)])
