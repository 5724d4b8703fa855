"""`kernlint history`: a series of baselines and where their timings changed."""
from __future__ import annotations

from pathlib import Path

import click

from kernlint.cli.app import emit, guarded, main, warning_line, write_atomically
from kernlint.cli.checking import read_baseline
from kernlint.cli.options import ConfiguredCommand, config_options, current_config, debug_option
from kernlint.errors import ConfigError, ExitCode
from kernlint.report.safe import printable


@main.command(cls=ConfiguredCommand, config_keys=frozenset())
@click.argument("baselines", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--cache", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Keep what was found here and, for a history that only appended baselines, search again "
                   "only after each series' last change point.")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.01,
              show_default=True, help="Significance level of each change point's test (a permutation test with "
                                      "enough permutations for it; Student's t where a series is too short).")
@click.option("--format", "--output-format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="text: a line per change point; json: the change points for scripts (schema_version 1).")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the output to FILE (atomically) instead of stdout.")
@config_options
@debug_option
@guarded
def history(baselines, cache, alpha, fmt, output, config_file, isolated, debug):
    """Change points over baselines in commit order (files, or a folder whose *.json files sort in commit
    order): per launch series and each program's total device time, E-divisive means with a permutation
    test (Student's t where a series is too short for it to reach --alpha); names the first baseline after
    each change. Exit 0 (it reports; `check --baseline` gates)."""
    import json as _json

    from kernlint.baseline.history import HistoryCacheError, analyse, as_dict, read_cache

    files: list[Path] = []
    for entry in baselines:
        files += sorted(entry.glob("*.json")) if entry.is_dir() else [entry]
    if len(files) < 4:
        raise ConfigError(None, f"history needs 4 or more baselines, got {len(files)}")
    previous = None
    ignored = "; not used: searched again, and the cache rewritten"
    if cache is not None:
        try:   # a FIFO or a device: exit 2 before any work; a malformed cache: a warning, searched again
            previous = read_cache(cache)
        except HistoryCacheError as exc:
            warning_line(exc.one_line() + ignored)
    loaded = [read_baseline(f) for f in files]
    result, kept = analyse(loaded, [f.name for f in files], alpha=alpha,
                           quantum_ticks=current_config().thresholds.quantum_ticks, cache=previous)
    if result.cache_ignored:
        warning_line(f"{cache}: {result.cache_ignored}{ignored}")
    if cache is not None:
        write_atomically(cache, _json.dumps(kept) + "\n")
    if fmt == "json":
        text = _json.dumps(as_dict(result), indent=2) + "\n"
    else:
        lines = [f"{result.series} series over {len(files)} baselines ({files[0].name} .. {files[-1].name})"
                 + (f", {result.reused} from the cache" if cache is not None else "")
                 + f": {len(result.change_points)} change point(s)"]
        for c in result.change_points:
            lines.append(f"  at {c.baseline} (#{c.index + 1}): {c.series}: {c.before_us:g} -> {c.after_us:g} "
                         f"µs ({c.relative:+.1%}), p = {c.p_value:.2g}"
                         + (" (t-test)" if c.test != "permutation" else ""))
        lines += [f"note: {note}" for note in result.notes]
        text = "\n".join(printable(line) for line in lines) + "\n"
    emit(text, output)
    return ExitCode.CLEAN
