"""`kernlint check --show-settings`: the settings a check would run with, resolved as the check resolves them
(command-line flag > config file > default: kernlint.config.resolve_check), printed instead of checking (ruff's
--show-settings). Plain `key = value` lines, one setting each, so that a diff of two runs shows what changed."""
from __future__ import annotations

import json
from pathlib import Path

import msgspec

from kernlint.config import described


def _value(value) -> str:
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, (list, tuple)):
        value = [str(v) if isinstance(v, Path) else v for v in value]
    return json.dumps(value, ensure_ascii=False, default=str)


def settings_text(settings, options, traces) -> str:
    """The lines --show-settings prints: `settings` a kernlint.config.CheckSettings, `options` the CLI's
    CheckOptions, `traces` the paths given."""
    from kernlint.cli.app import split_values

    config, sources, policy = settings.config, settings.sources, settings.exit
    location = sources.suppressions_location
    lines = [
        f"# {described(config)}",
        f"config-file = {_value(config.path)}",
        f"traces = {_value([str(t) for t in traces])}",
        f"rules = {_value([r.id for r in settings.rules])}",
        f"rule-names = {_value([r.name for r in settings.rules])}",
        f"rule-files = {_value(sorted({str(r.path) for r in settings.rules if r.path}))}",
        f"format = {_value(options.fmt)}",
        f"output = {_value(options.output)}",
        f"fail-on = {_value(policy.fail_on)}",
        f"allow-incomplete = {_value(policy.allow_incomplete)}",
        f"exit-zero = {_value(policy.exit_zero)}",
        f"max-trace-bytes = {_value(settings.max_trace_bytes)}",
        f"baseline = {_value(options.baseline)}",
        f"exclude = {_value(split_values(options.extra.get('exclude', ())))}",
        f"respect-gitignore = {_value(options.extra.get('respect_gitignore', True))}",
        f"suppressions-file = {_value(location)}"
        + ("" if location is None or location.exists() else "  # not there: nothing suppressed by it"),
        f"inline-ignores = {_value(sources.inline_ignores)}",
        f"per-source-ignores = {_value({k: list(v) for k, v in sources.per_source_ignores.items()})}",
        f"source-root = {_value(sources.mapping.root)}"
        + ("" if sources.root is not None else "  # the git checkout around the working directory"),
        f"path-map = {_value([list(pair) for pair in sources.path_map])}",
    ]
    for field in msgspec.structs.fields(settings.thresholds):
        lines.append(f"thresholds.{field.encode_name} = {_value(getattr(settings.thresholds, field.name))}")
    return "\n".join(lines) + "\n"
