"""`kernlint rules` and `kernlint explain`."""
from __future__ import annotations

import json
import shutil
import sys

import click

from kernlint.cli.app import color_option, emit, guarded, main
from kernlint.cli.options import (
    ConfiguredCommand,
    config_options,
    current_config,
    debug_option,
    no_builtin_option,
    rules_of,
    rules_option,
)
from kernlint.errors import ConfigError, ExitCode
from kernlint.report.safe import printable

# The config keys that the commands which list or explain rules take (not the check's format or output).
_RULE_SOURCE_KEYS = frozenset({"rules", "no-builtin"})


@main.command("rules", cls=ConfiguredCommand, config_keys=_RULE_SOURCE_KEYS)
@rules_option
@no_builtin_option
@click.option("--format", "--output-format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format: a table (text) or a JSON array.")
@color_option
@config_options
@debug_option
@guarded
def list_rules(rule_paths, no_builtin, fmt, config_file, isolated, debug):
    """List the rules grouped by family (R1-R8, distributed, baseline), with the config's [severity] applied."""
    from rich.console import Group
    from rich.text import Text

    from kernlint.rules.families import group_rules, id_span, zoo_cases

    rules = rules_of(current_config(), rule_paths, no_builtin)
    groups = group_rules(rules)
    if fmt == "json":
        click.echo(json.dumps([{"id": r.id, "name": r.name, "severity": r.severity, "summary": r.spec.summary,
                                "check": r.spec.check.type, "path": r.path, "family": family.key,
                                "family_title": family.title, "zoo_cases": zoo_cases(r.spec.tags)}
                               for family, members in groups for r in members], indent=2, allow_nan=False))
        return ExitCode.CLEAN
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    blocks = []
    for family, members in groups:
        ids = id_span([r.id for r in members])
        blocks.append(Text(printable(f"{family.label} ({ids}): {family.line}"), style="bold"))
        blocks += [rules_table(members, width), Text("")]
    emit(Group(*blocks[:-1]), None)
    return ExitCode.CLEAN


def rules_table(members, width: int | None = None):
    """A family's table. The id and name columns are never cut nor folded (each is a selector to copy): on a
    terminal of `width` columns (80 and up) the check and summary columns fold into what is left, and where
    that is under 40 columns the check column is left out (`kernlint explain ID` and --format json give it).
    None (a pipe, a file): every column whole (app.emit renders at the width the table needs)."""
    from rich.table import Table
    from rich.text import Text

    rows = [[printable(v) for v in (r.id, r.name, r.severity, r.spec.check.type, r.spec.summary)] for r in members]
    table = Table(box=None)
    # Each column's cells and its padding (one space either side).
    fixed = [max(len(h), *(len(row[i]) for row in rows)) + 2 for i, h in enumerate(("id", "name", "severity"))]
    room = max(width - sum(fixed) - 1, 20) if width else None
    table.add_column("id", no_wrap=True, min_width=fixed[0] - 2)
    table.add_column("name", no_wrap=True, min_width=fixed[1] - 2)
    table.add_column("severity", no_wrap=True)
    with_check = room is None or room >= 40
    if with_check:
        table.add_column("check", overflow="fold", max_width=room // 3 - 2 if room else None)
    table.add_column("summary", overflow="fold",
                     max_width=(room - room // 3 - 2 if with_check else room - 2) if room else None)
    for row in rows:
        table.add_row(*(Text(v) for i, v in enumerate(row) if with_check or i != 3))
    return table


@main.command(cls=ConfiguredCommand, config_keys=_RULE_SOURCE_KEYS)
@click.argument("rule_id", required=False)
@click.option("--schema", is_flag=True, help="Print the rule-language reference (scopes, kinds, categories, "
                                             "check types and how they combine).")
@rules_option
@no_builtin_option
@config_options
@debug_option
@guarded
def explain(rule_id, schema, rule_paths, no_builtin, config_file, isolated, debug):
    """Print a rule's documentation (What it does / Why is this bad? / Example / Use instead / References),
    or with --schema the rule-language reference. RULE_ID is an id or a name, in any case."""
    from kernlint.rules.docs import rule_markdown
    from kernlint.rules.loader import rule_language_reference

    if schema:
        click.echo(rule_language_reference(), nl=False)
        return ExitCode.CLEAN
    if not rule_id:
        raise ConfigError(None, "explain needs a rule id or name, or --schema")
    rules = {r.id: r for r in rules_of(current_config(), rule_paths, no_builtin)}
    by_name = {r.name: r for r in rules.values()}
    rule = rules.get(rule_id.upper()) or by_name.get(rule_id.lower())
    if rule is None:
        raise ConfigError(None, f"no rule {rule_id!r} (known: {', '.join(sorted(rules))})")
    click.echo(rule_markdown(rule), nl=False)
    return ExitCode.CLEAN
